"""What the simulated engine logs while it "loads": SGLang's sequence (distributed init, weight
shards, KV cache, CUDA-graph capture, the draft model), in the wording of the release it
impersonates, so the plugin's loading-progress reader is tested on it."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_llmperf.sim.server import SimServer

# The server's loggers (sim/server.py formats them as SGLang's).
log = logging.getLogger("sglang.sim")
rank_log = logging.getLogger("sglang.sim.scheduler")


async def log_loading(server: SimServer) -> None:
    """Log SGLang's loading sequence over ``--sim-load-time`` seconds."""
    args = server.args
    log.info("server_args=%r", server.server_args())  # as SGLang 0.5.23 logs it: a dict
    if server.unmodeled:
        log.info(
            "simulated engine: accepted but not modeled: %s",
            " ".join(f"--{k.replace('_', '-')}" for k in server.unmodeled),
        )
    if server.speculation and args.max_running_requests is None:
        log.warning(
            "Max running requests is reset to 48 for speculative decoding. "
            "You can override this by explicitly setting --max-running-requests."
        )
    _ranks(server, "Init torch distributed begin.")
    _ranks(server, "Init torch distributed ends. mem usage=0.12 GB")
    _ranks(server, "Load weight begin. avail mem=138.90 GB")
    shards = 11
    pause = args.sim_load_time * 0.7 / shards
    # Multi-thread loading is SGLang's default from 0.5.11, with its own bar.
    bar = (
        "Multi-thread loading shards"
        if server.reports_at_least(0, 5, 11)
        else ("Loading safetensors checkpoint shards")
    )
    for k in range(1, shards + 1):
        await asyncio.sleep(pause)
        _progress(
            server,
            f"{bar}: {100 * k // shards:3d}% Completed | {k}/{shards} "
            f"[00:{k:02d}<00:{shards - k:02d},  1.00s/it]",
        )
        if args.sim_crash_while_loading and k == shards // 2:
            log.error(
                'Traceback (most recent call last):\n  File "model_loader/loader.py", line 412, '
                "in load_weights\nRuntimeError: simulated crash while loading (--sim-crash-while-loading)"
            )
            sys.stderr.flush()
            os._exit(1)
    _ranks(
        server,
        "Load weight end. type=SimForCausalLM, dtype=torch.bfloat16, avail mem=123.40 GB, mem usage=15.50 GB.",
    )
    _ranks(server, "KV Cache is allocated. #tokens: 812345, K size: 49.60 GB, V size: 49.60 GB")
    await _capture_graphs(server, bar)
    log.info(
        "max_total_num_tokens=812345, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=%d, context_len=131072, available_gpu_mem=17.90 GB",
        server.max_running_requests,
    )


async def _capture_graphs(server: SimServer, bar: str) -> None:
    """CUDA-graph capture, target first; a speculative server loads its draft model in between."""
    if server.reports_at_least(0, 5, 14):
        target = "target verify CUDA graph" if server.speculation else "target decode CUDA graph"
        graph_phases = [target] + (
            ["draft decode CUDA graph", "draft extend CUDA graph"] if server.speculation else []
        )
    else:
        graph_phases = ["cuda graph"] + (
            ["draft cuda graph", "draft extend cuda graph"] if server.speculation else []
        )
    for phase in graph_phases:
        if "draft" in phase and phase == next(p for p in graph_phases if "draft" in p):
            # The draft model loads in the same scheduler once the target is captured.
            _ranks(server, "Load weight begin. avail mem=18.40 GB")
            _progress(server, f"{bar}: 100% Completed | 1/1 [00:01<00:00,  1.00s/it]")
            _ranks(
                server,
                "Load weight end. type=SimEagle3Draft, dtype=torch.bfloat16, avail mem=17.90 GB.",
            )
        _ranks(
            server,
            f"Capture {phase} begin. This can take up to several minutes. avail mem=19.80 GB",
        )
        for i, bs in enumerate((1, 2, 4, 8), start=1):
            await asyncio.sleep(server.args.sim_load_time * 0.3 / (4 * len(graph_phases)))
            _progress(
                server,
                f"Capturing batches (bs={bs} avail_mem=19.75 GB): {25 * i:3d}%| {i}/4 [00:0{i}<00:0{4 - i}]",
            )
        _ranks(
            server,
            f"Capture {phase} end. Time elapsed: 0.10 s. mem usage=1.30 GB. avail mem=18.50 GB.",
        )


def _ranks(server: SimServer, message: str) -> None:
    """A line from every TP rank's scheduler, with SGLang's ``[time TPn]`` logger prefix."""
    for rank in range(max(1, server.args.tp_size)):
        rank_log.info(message, extra={"rank": f" TP{rank}"})


def _progress(server: SimServer, line: str) -> None:
    if server.args.sim_progress_cr:
        sys.stderr.write("\r" + line)
        sys.stderr.flush()
    else:
        log.info(line)
