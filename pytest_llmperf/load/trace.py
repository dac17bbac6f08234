"""Trace replay: production arrivals, lengths and shared prefixes, sent at their own times.

A trace is a JSONL file in Mooncake's format, one request a line::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, …]}

``timestamp`` is in milliseconds from the trace's start; ``hash_ids`` name the prompt's blocks
of ``BLOCK_TOKENS`` tokens (the last one may be shorter), and two requests that share a hash id
share that block. The replay sends request k at ``time_scale × (timestamp_k − timestamp_0)``
seconds after the run's start, its prompt as exact token ids: block h is the same seeded ids
wherever it appears, so requests that shared a prefix in production share it here, and the
server's prefix cache sees what production's saw. A request without ``hash_ids`` gets ids of
its own. Output lengths are exact (``ignore_eos``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_llmperf.load.dataset import Dataset, DatasetError, Entry, read_request_file

#: Tokens per hash block (Mooncake's traces; GuideLLM reads them with 512 as well).
BLOCK_TOKENS = 512
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


@dataclass(frozen=True)
class Trace:
    """A replayable trace: the arrival offsets (seconds, unscaled) and each request's prompt."""

    dataset: Dataset
    offsets: tuple[float, ...]

    @property
    def span_s(self) -> float:
        return self.offsets[-1] if self.offsets else 0.0

    def rate(self, time_scale: float = 1.0) -> float:
        """Mean requests/s of the replay at ``time_scale``."""
        span = self.span_s * time_scale
        return (len(self.offsets) - 1) / span if span > 0 else float(len(self.offsets))


def load_trace(path: Path, token_id_range: tuple[int, int], seed: int = 0) -> Trace:
    """Read a Mooncake-format JSONL trace; every error names the file, the line and the field."""
    import numpy as np  # lazily: only a replay needs it

    file = read_request_file(path, "trace")
    low, high = token_id_range
    blocks: dict[int, list[int]] = {}
    entries: list[Entry] = []
    stamps: list[float] = []
    for number, where, obj in file.json_lines("trace"):
        if not isinstance(obj, dict) or "timestamp" not in obj:
            raise DatasetError(f"{where}: expected an object with {', '.join(FIELDS)}")
        stamp, n_in, n_out = (
            obj["timestamp"],
            obj.get("input_length", -1),
            obj.get("output_length", -1),
        )
        for field, value in (
            ("timestamp", stamp),
            ("input_length", n_in),
            ("output_length", n_out),
        ):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise DatasetError(f"{where}: field {field!r} is {value!r}; expected a number >= 0")
        if stamps and stamp < stamps[-1]:
            raise DatasetError(
                f"{where}: field 'timestamp' goes back in time ({stamp} < {stamps[-1]})"
            )
        hashes = obj.get("hash_ids") or []
        if not isinstance(hashes, list) or not all(isinstance(h, int) for h in hashes):
            raise DatasetError(f"{where}: field 'hash_ids' must be a list of integers")
        ids: list[int] = []
        for h in hashes:
            if h not in blocks:
                rng = np.random.default_rng([seed, 3, h & 0xFFFFFFFF])
                blocks[h] = rng.integers(low, high, BLOCK_TOKENS).tolist()
            ids += blocks[h]
        n_in = int(n_in)
        if len(ids) < n_in:  # no hash blocks, or fewer than the length: ids of its own
            rng = np.random.default_rng([seed, 4, number])
            ids += rng.integers(low, high, n_in - len(ids)).tolist()
        entries.append(Entry(None, tuple(ids[: max(1, n_in)]), max(1, int(n_out))))
        stamps.append(float(stamp))
    if not entries:
        raise DatasetError(f"trace {path}: no requests in it")
    first = stamps[0]
    dataset = Dataset(path, "mooncake-trace", tuple(entries), file.sha256)
    return Trace(dataset, tuple((s - first) / 1000.0 for s in stamps))
