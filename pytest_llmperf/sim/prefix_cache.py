"""The simulated engine's prefix cache: how many of a prompt's tokens an earlier prompt computed.

SGLang's radix cache keeps the KV of every prompt it served and reuses the longest prefix a new
prompt shares with them; ``meta_info.cached_tokens`` reports how many were reused, and only the
rest is prefilled. Here prefixes are matched in pages of ``PAGE`` token ids (one hash per page,
chained, so a page matches only after the same pages before it), which keeps a 2,048-token
prompt at 128 hash lookups. As in SGLang, at least the last token of a prompt is computed, and
``/flush_cache`` empties the cache. Text prompts (the default workload) are not token ids here
and are never matched: less kind than SGLang, which would reuse their repeated prefixes.
"""

from __future__ import annotations

from collections.abc import Sequence

PAGE = 16
#: Pages kept before the cache is emptied (SGLang evicts least recently used prefixes; here
#: everything goes at once, which only ever makes the simulation slower, never faster).
MAX_PAGES = 1 << 21


class PrefixCache:
    def __init__(self) -> None:
        self._pages: set[int] = set()

    def clear(self) -> None:
        self._pages.clear()

    def match_and_insert(self, ids: Sequence[int]) -> int:
        """Tokens of ``ids`` found cached (whole pages, at most len − 1); the prompt is cached
        afterwards."""
        if len(self._pages) > MAX_PAGES:
            self._pages.clear()
        matched = 0
        chain = 0
        missing = False
        for start in range(0, len(ids) - len(ids) % PAGE, PAGE):
            chain = hash((chain, *ids[start : start + PAGE]))
            if not missing and chain in self._pages:
                matched = start + PAGE
            else:
                missing = True
                self._pages.add(chain)
        return min(matched, max(0, len(ids) - 1))
