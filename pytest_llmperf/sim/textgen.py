"""Deterministic stand-in tokenizer and text generator for the simulated engine.

Temperature 0 on a real model gives the same continuation for the same prompt; here the
continuation is drawn from a fixed vocabulary with a generator seeded by the prompt's hash.
One output token is one word (with its leading space).

A real model is also prefix-consistent: asked again with its prompt followed by the start of its
own continuation, it goes on as it went on before. Greedy parity relies on it to compare past a
near-tie (core/parity.py), so the prompts answered with log-probabilities are remembered
(:func:`remember`) and a prompt that extends one of them by the start of its continuation
continues it (:func:`resolve`).
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
import zlib
from collections import OrderedDict

_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will "
    "more can out other time some what only into them two may these its about than first any new "
    "could after like our well also most over such where through back years much way between down "
    "should because each just those people how too little state good very make world still see own "
    "men work long here get both under never same last might great since against another life day "
    "found place three while part being system number course without again water small old point "
    "house given however take every public form hand during high eye light"
).split()
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Words and punctuation marks: close enough to a BPE count for a simulation."""
    return max(1, len(_TOKEN_RE.findall(text)))


_QUESTION = re.compile(r"What is (\d+) (plus|minus|times) (\d+)\?")
_OPS = {"plus": lambda a, b: a + b, "minus": lambda a, b: a - b, "times": lambda a, b: a * b}
#: The share of arithmetic questions the simulated model answers right (--sim-accuracy).
ACCURACY = {"rate": 0.9}


def answer_words(prompt: str) -> tuple[str, ...]:
    """A question of the built-in task set (data/arithmetic.jsonl) is answered first: right for
    a share ``ACCURACY["rate"]`` of the questions, by the prompt's hash (the same every time, as
    a model at temperature 0), else off by one. Any other prompt: nothing."""
    found = _QUESTION.search(prompt)
    if found is None:
        return ()
    a, op, b = int(found.group(1)), found.group(2), int(found.group(3))
    right = _OPS[op](a, b)
    draw = int.from_bytes(hashlib.sha256(b"right" + prompt.encode()).digest()[:4], "big")
    value = right if draw / 2**32 < ACCURACY["rate"] else right + 1
    return (" " + str(value), ".")


@functools.lru_cache(maxsize=512)
def continuation(prompt: str, length: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """``length`` output tokens for ``prompt``: their texts and their ids (an answer's words
    first, then words drawn from the vocabulary, which hold no digits)."""
    rng = random.Random(hashlib.sha256(prompt.encode()).digest())
    answer = answer_words(prompt)[:length]
    picks = [rng.randrange(len(_WORDS)) for _ in range(length - len(answer))]
    ids = [5000 + zlib.crc32(w.encode()) % 1000 for w in answer] + [1000 + i for i in picks]
    return (*answer, *(" " + _WORDS[i] for i in picks)), tuple(ids)


def top2_logprobs(prompt: str, length: int) -> tuple[tuple[float, float], ...]:
    """Per output position, the log-probabilities of the chosen token and the runner-up, as a
    model's would be at temperature 0: the gap between them is mostly wide (the model is sure),
    about one position in twenty a near-tie within 0.1 (deterministic per prompt)."""
    rng = random.Random(hashlib.sha256(b"logprobs" + prompt.encode()).digest())
    out = []
    for _ in range(length):
        best = -rng.expovariate(4.0)  # a confident choice: log p near 0
        out.append((best, best - rng.expovariate(0.5)))  # the gap: exponential, mean 2
    return tuple(out)


def wrong_token(token_id: int) -> tuple[str, int]:
    """Another word than ``token_id``'s: what a drafter's accepted wrong draft emits."""
    k = (token_id - 1000 + 1) % len(_WORDS)
    return " " + _WORDS[k % len(_WORDS)], 1000 + k % len(_WORDS)


def third_token(token_id: int) -> tuple[str, int]:
    """A word that is neither ``token_id``'s nor its runner-up's (:func:`wrong_token`)."""
    k = (token_id - 1000 + 2) % len(_WORDS)
    return " " + _WORDS[k], 1000 + k


def natural_length(prompt: str, max_new_tokens: int) -> int:
    """Where the model would emit EOS when ``ignore_eos`` is off (deterministic per prompt)."""
    h = int.from_bytes(hashlib.sha256(b"eos" + prompt.encode()).digest()[:4], "big")
    return min(max_new_tokens, 16 + h % 200)


#: The prompts answered with log-probabilities, newest last (at most ROOTS_KEPT): the roots a
#: later prompt may continue (:func:`resolve`).
_ROOTS: OrderedDict[str, None] = OrderedDict()
ROOTS_KEPT = 256


def remember(prompt: str) -> None:
    """Keep ``prompt``'s root as one a later prompt may continue."""
    root, _ = resolve(prompt)
    _ROOTS[root] = None
    _ROOTS.move_to_end(root)
    while len(_ROOTS) > ROOTS_KEPT:
        _ROOTS.popitem(last=False)


def resolve(prompt: str) -> tuple[str, int]:
    """The remembered prompt that ``prompt`` continues and how many of its continuation's tokens
    ``prompt`` already holds (``prompt``, 0: it continues none)."""
    for root in reversed(_ROOTS):
        if len(prompt) <= len(root) or not prompt.startswith(root):
            continue
        rest = prompt[len(root) :]
        words, _ = continuation(root, len(rest))  # every token is at least one character
        joined = ""
        for done, word in enumerate(words, start=1):
            joined += word
            if len(joined) >= len(rest):
                if joined == rest:
                    return root, done
                break
    return prompt, 0


def eos_at(root: str, done: int = 0) -> int:
    """How many tokens the model generates before its EOS, when nothing caps it, for ``root``
    followed by the first ``done`` tokens of its continuation (:func:`resolve`)."""
    return max(1, natural_length(root, 1 << 30) - done)
