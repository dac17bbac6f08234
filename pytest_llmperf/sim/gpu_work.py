"""The simulated engine's GPU mode: decode steps as real work on a device, so that every GPU
path of the plugin (the runner health, the launch pre-flight and release wait, NVML's series,
energy per token, the hardware key) runs end to end on any GPU host without SGLang.

``--sim-gpu-work-gib G`` holds G GiB of weights on ``--sim-gpu-device`` (``cuda`` by default)
and makes each decode step read them once (a matrix-vector product: memory-bound, as a decode
step at a small batch is), so a step's time is the device's, and grows with the weights it
reads. Each running request gains its tokens per step as in the model; the step's time is no
longer modelled. ``--sim-throughput-multiplier 0.7`` reads them 1/0.7 times a step: 30 % fewer
tokens a second and more energy per token, with nothing in the launch or the fingerprint to show
it (the knob is hidden, as a real regression would be).

torch is needed (the optional extra ``sim-gpu``; imported only in this mode). The work runs in
a thread of its own: torch releases the interpreter's lock while it computes, so the server
keeps streaming.
"""

from __future__ import annotations

import math
from typing import Any

#: Columns of the weight matrix: rows × this × element size = the GiB asked for.
COLUMNS = 8192


class GpuWork:
    """``gib`` GiB of weights on ``device``, read once per :meth:`step` (times ``reads``)."""

    def __init__(self, gib: float, device: str) -> None:
        try:
            import torch
        except ImportError:
            raise SystemExit(
                "--sim-gpu-work-gib needs torch: pip install 'pytest-llmperf[sim-gpu]' "
                "(or run the simulated engine with an interpreter that has it)"
            ) from None
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise SystemExit(
                f"--sim-gpu-device {device}: torch sees no CUDA device here "
                f"(torch {torch.__version__}); use --sim-gpu-device cpu to run the same work on "
                "the CPU"
            )
        self.torch, self.device = torch, device
        if not device.startswith("cuda"):
            torch.set_num_threads(1)  # one core for the work: the server and the client need theirs
        # bf16 as a model's weights on a GPU; float32 on a CPU, whose bf16 kernels are slow.
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        size = torch.tensor([], dtype=dtype).element_size()
        self.rows = max(1, math.ceil(gib * 2**30 / (COLUMNS * size)))
        self.weights = torch.ones((self.rows, COLUMNS), dtype=dtype, device=device)
        self.vector = torch.ones(COLUMNS, dtype=dtype, device=device)
        self.gib = self.rows * COLUMNS * size / 2**30
        self.steps = 0
        self.step(1.0)  # the first product compiles and allocates: not inside a measured step

    def step(self, reads: float) -> None:
        """One decode step: the weights read ``reads`` times (1.43 for a 30 % slower engine),
        then the device synchronised, so the step ends when its work has."""
        torch = self.torch
        whole, part = divmod(reads, 1.0)
        out: Any = None
        for _ in range(int(whole)):
            out = torch.mv(self.weights, self.vector)
        if part > 0:
            out = torch.mv(self.weights[: max(1, int(self.rows * part))], self.vector)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize(self.device)
        elif out is not None:
            out.sum().item()
        self.steps += 1
