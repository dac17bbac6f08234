"""What a loading SGLang server is doing, read from its log.

SGLang binds its port only after loading (10–15 minutes for a large model), so its log is the
only sign of life. tqdm bars are redrawn with ``\\r`` in 0.5.23 (``\\n`` in 0.5.6), so the log is
split on both. The last recognised stage wins:

    loading weights 45 % (5/11 shards) → loading the draft model → KV cache allocated →
    capturing CUDA graphs (target|draft) bs=256 … → ready ("fired up")
"""

from __future__ import annotations

import re
from pathlib import Path

_SHARDS = re.compile(r"Loading safetensors checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)")
_LOAD_BEGIN = re.compile(r"Load weight begin")
_KV = re.compile(r"KV Cache is allocated")
_CAPTURE = re.compile(
    r"Capture (?:(draft|target)\s+)?(?:\w+\s+)?(?:cuda|CUDA) graph begin", re.IGNORECASE
)
_CAPTURING = re.compile(r"Capturing batches \(bs=(\d+)[^)]*\):\s+(\d+)%")
_READY = re.compile(r"The server is fired up and ready to roll!")


def stage(text: str) -> str | None:
    """A short description of the latest loading stage found in ``text`` (None if none yet)."""
    current: str | None = None
    weight_loads = 0
    graph = "target"
    for line in re.split(r"[\r\n]+", text):
        if _LOAD_BEGIN.search(line):
            weight_loads += 1
            current = (
                "loading weights" if weight_loads == 1 else "loading the draft model's weights"
            )
        elif m := _SHARDS.search(line):
            what = "loading weights" if weight_loads <= 1 else "loading draft weights"
            current = f"{what} {m.group(1)} % ({m.group(2)}/{m.group(3)} shards)"
        elif _KV.search(line):
            current = "KV cache allocated"
        elif m := _CAPTURE.search(line):
            graph = (
                "draft"
                if (m.group(1) or "").lower() == "draft" or "draft" in line.lower()
                else "target"
            )
            current = f"capturing {graph} CUDA graphs"
        elif m := _CAPTURING.search(line):
            current = f"capturing {graph} CUDA graphs {m.group(2)} % (bs={m.group(1)})"
        elif _READY.search(line):
            current = "ready"
    return current


def read_stage(log_path: Path | None, max_bytes: int = 256 * 1024) -> str | None:
    """``stage`` of the last ``max_bytes`` of a log file (a multi-GB log is never read whole)."""
    if log_path is None or not log_path.exists():
        return None
    with open(log_path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - max_bytes))
        return stage(f.read().decode("utf-8", errors="replace"))
