"""SGLang's adaptive speculation, as its scheduler routes a batch (0.5.14 and later).

``--speculative-adaptive-config FILE`` replaces SGLang's default buckets (no merge). Each bucket
is keyed by a batch size and lists the draft steps it may use; 0 steps means no speculation.
SGLang first pads a batch to the next batch size it captured a speculative CUDA graph for
(1–8, 10–32 step 2, 40–64 step 4, 72–256 step 8, then step 16 up to the max, which is always
captured), then takes the bucket with the largest key ≤ that size, or the smallest bucket when
no key is that small (``speculative/adaptive_spec_params.py``, ``_pad_to_cuda_graph_bs`` and
``_find_closest_bs``; the sizes from ``arg_groups/cuda_graph_hook.py``).

So a cut-off can only be applied at capture-size granularity: batches whose padded size equals
the cut-off's padded size speculate too.
"""

from __future__ import annotations

import bisect
from typing import Any

#: SGLang's default max batch size for CUDA graphs when a profile does not set one.
DEFAULT_MAX_BS = 256
#: What the config's keys carry besides candidate_steps, as in SGLang's own default buckets.
BUCKET_DEFAULTS = {"up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0}


def capture_sizes(max_bs: int = DEFAULT_MAX_BS) -> list[int]:
    """The batch sizes a speculative server captures CUDA graphs for, up to ``max_bs``."""
    sizes = [
        *range(1, 9),
        *range(10, 33, 2),
        *range(40, 65, 4),
        *range(72, 257, 8),
        *range(272, max_bs + 1, 16),
    ]
    sizes = [s for s in sizes if s <= max_bs]
    return sizes if max_bs in sizes else [*sizes, max_bs]


def padded(batch: int, sizes: list[int]) -> int:
    """The captured size a batch is padded to (the batch itself beyond the largest)."""
    at = bisect.bisect_left(sizes, batch)
    return sizes[at] if at < len(sizes) else batch


def route(batch: int, config: dict[str, Any], sizes: list[int]) -> str:
    """The key of the bucket SGLang uses for ``batch``."""
    keys = sorted(int(k) for k in config if k.isdigit())
    at = bisect.bisect_right(keys, padded(batch, sizes)) - 1
    return str(keys[max(0, at)])


def cutoff_config(cutoff: int, num_steps: int, max_bs: int = DEFAULT_MAX_BS) -> dict[str, Any]:
    """The complete config that speculates (with ``num_steps``, as measured) at every batch up
    to ``cutoff`` and not at all from the first batch whose padded size is larger."""
    first_off = padded(cutoff, capture_sizes(max_bs)) + 1
    return {
        "1": {"candidate_steps": [num_steps], **BUCKET_DEFAULTS},
        str(first_off): {"candidate_steps": [0], **BUCKET_DEFAULTS},
    }


def first_batch_without_speculation(cutoff: int, max_bs: int = DEFAULT_MAX_BS) -> int:
    return padded(cutoff, capture_sizes(max_bs)) + 1
