"""What a loading SGLang server is doing, read from its log.

SGLang binds its port only after loading (10–15 minutes for a large model), so its log is the
only sign of life. What the log looks like, read in the released code of 0.5.6 and 0.5.23:

- Every scheduler (one per TP rank) logs with the prefix ``[<time> TP<rank>]`` (or ``DP… TP…``),
  so ``Load weight begin.`` appears once per rank. A draft model loads in the same process
  after the target: a rank's second ``Load weight begin.`` is its draft's.
- The weights bar is ``Loading safetensors checkpoint shards: 45% Completed | 5/11`` before
  0.5.11 and ``Multi-thread loading shards: …`` from 0.5.11 (multi-thread loading became the
  default); from 0.5.11 bars are redrawn with ``\\r`` instead of a line per update. Bars carry no
  rank prefix: they belong to whichever model is loading.
- Capture lines: ``Capture cuda graph begin.`` / ``Capture draft cuda graph begin.`` /
  ``Capture draft extend cuda graph begin.`` (0.5.6); ``Capture target decode CUDA graph
  begin.``, ``Capture target verify …``, ``Capture draft decode …``, ``Capture draft extend …``
  (0.5.14 and later); ``Capturing batches (bs=… avail_mem=…): 40%`` in all of them.

The last recognised stage wins::

    loading weights 45 % (5/11 shards) → loading the draft model's weights → KV cache allocated →
    capturing target CUDA graphs 40 % (bs=128) → capturing draft CUDA graphs → ready
"""

from __future__ import annotations

import re
from pathlib import Path

_RANK = re.compile(r"^\[[^\]]*?((?:\s+[A-Z]{2,3}\d+)+)\]")
#: Every checkpoint loader's bar: ``Loading safetensors checkpoint shards``, ``Loading pt …``,
#: ``Loading np_cache …``, ``Multi-thread loading shards``, ``Multi-thread loading pt …``.
_SHARDS = re.compile(
    r"(?:Multi-thread loading|Loading)(?: [\w-]+)* shards:\s+(\d+)% Completed \| (\d+)/(\d+)"
)
_LOAD_BEGIN = re.compile(r"Load weight begin")
_KV = re.compile(r"KV Cache is allocated")
_CAPTURE = re.compile(r"Capture (.*?)(?:cuda|CUDA|cpu|CPU) graph begin")
_CAPTURING = re.compile(r"Capturing batches \(bs=(\d+)[^)]*\):\s+(\d+)%")
_READY = re.compile(r"The server is fired up and ready to roll!")


def stage(text: str) -> str | None:
    """A short description of the latest loading stage found in ``text`` (None if none yet)."""
    current: str | None = None
    loads_begun: dict[str, int] = {}  # per rank
    graph = "target"
    for line in re.split(r"[\r\n]+", text):
        if _LOAD_BEGIN.search(line):
            rank = _rank(line)
            loads_begun[rank] = loads_begun.get(rank, 0) + 1
            current = (
                "loading the draft model's weights" if _drafting(loads_begun) else "loading weights"
            )
        elif m := _SHARDS.search(line):
            what = "loading draft weights" if _drafting(loads_begun) else "loading weights"
            current = f"{what} {m.group(1)} % ({m.group(2)}/{m.group(3)} shards)"
        elif _KV.search(line):
            current = "KV cache allocated"
        elif m := _CAPTURE.search(line):
            graph = "draft" if "draft" in m.group(1).lower() else "target"
            current = f"capturing {graph} CUDA graphs"
        elif m := _CAPTURING.search(line):
            current = f"capturing {graph} CUDA graphs {m.group(2)} % (bs={m.group(1)})"
        elif _READY.search(line):
            current = "ready"
    return current


def _rank(line: str) -> str:
    """``TP3`` (or ``DP0 TP3``) from the logger prefix; lines without one are the main process's."""
    match = _RANK.match(line)
    return " ".join(match.group(1).split()) if match else ""


def _drafting(loads_begun: dict[str, int]) -> bool:
    """A rank that begins a second weight load is loading its draft model."""
    return max(loads_begun.values(), default=0) >= 2


def read_stage(log_path: Path | None, max_bytes: int = 256 * 1024) -> str | None:
    """``stage`` of the last ``max_bytes`` of a log file (a multi-GB log is never read whole)."""
    if log_path is None or not log_path.exists():
        return None
    with open(log_path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - max_bytes))
        return stage(f.read().decode("utf-8", errors="replace"))
