"""Loading stages read from SGLang logs of 0.5.6 (bars on their own lines) and 0.5.23 (\\r bars)."""

import pytest

from pytest_llmperf.engines.sglang_log import read_stage, stage

LOG_056 = """\
[2026-11-29 10:00:00] Init torch distributed begin.
[2026-11-29 10:00:01] Load weight begin. avail mem=138.90 GB
Loading safetensors checkpoint shards:   9% Completed | 1/11 [00:04<00:41,  4.17s/it]
Loading safetensors checkpoint shards:  45% Completed | 5/11 [00:20<00:25,  4.17s/it]
"""


def test_weight_loading_with_a_bar_per_line():
    assert stage(LOG_056) == "loading weights 45 % (5/11 shards)"
    assert stage("[x] Init torch distributed begin.") is None


def test_carriage_return_bars_and_the_later_stages_of_an_eagle_server():
    log = (
        LOG_056.replace("\n", "\r", 2)
        + "[t] Load weight end. type=X\n[t] KV Cache is allocated. #tokens: 812345\n"
        + "[t] Capture target decode CUDA graph begin. backend=full\n"
        + "\rCapturing batches (bs=256 avail_mem=19.75 GB):  12%|#| 4/35 [00:01<00:09]"
        + "\rCapturing batches (bs=128 avail_mem=19.70 GB):  40%|#| 14/35 [00:03<00:05]"
    )
    assert stage(log) == "capturing target CUDA graphs 40 % (bs=128)"
    log += "\n[t] Load weight begin. avail mem=18.5 GB\n"
    assert stage(log) == "loading the draft model's weights"
    log += "\rLoading safetensors checkpoint shards: 100% Completed | 1/1 [00:01<00:00]\n"
    assert stage(log) == "loading draft weights 100 % (1/1 shards)"
    log += "[t] Capture draft cuda graph begin. This can take up to several minutes.\n"
    assert stage(log) == "capturing draft CUDA graphs"
    log += "[t] The server is fired up and ready to roll!\n"
    assert stage(log) == "ready"


def test_read_stage_reads_only_the_end_of_a_large_log(tmp_path):
    path = tmp_path / "gpu.log"
    path.write_text("x" * 1_000_000 + "\n" + LOG_056)
    assert read_stage(path) == "loading weights 45 % (5/11 shards)"
    assert read_stage(tmp_path / "missing.log") is None


def sglang_launch_log(version: str, *, tp: int, eagle: bool) -> list[str]:
    """A launch's log as SGLang ``version`` writes it, chunk by chunk: a line per TP rank with
    the logger's ``[time TPn]`` prefix, bars without a prefix from rank 0, and the bar text and
    capture lines of that version (0.5.6: line-per-update bars, ``Capture cuda graph begin``;
    0.5.23: ``\\r`` bars, ``Multi-thread loading shards``, ``Capture target decode CUDA graph``)."""
    new = version >= "0.5.11"
    bar_end = "\r" if new else "\n"
    shards = "Multi-thread loading shards" if new else "Loading safetensors checkpoint shards"

    def ranks(message: str) -> list[str]:
        return [f"[2026-11-30 10:00:0{r} TP{r}] {message}\n" for r in range(tp)]

    def load(n: int) -> list[str]:
        bars = [
            f"{bar_end}{shards}: {100 * k // n:3d}% Completed | {k}/{n} [00:0{k}<00:00]"
            for k in range(1, n + 1)
        ]
        return [
            *ranks("Load weight begin. avail mem=90.00 GB"),
            *bars,
            "\n",
            *ranks("Load weight end. type=X, dtype=torch.bfloat16"),
        ]

    def capture(role: str) -> list[str]:
        if new:
            kind = ("verify" if eagle else "decode") if role == "target" else "decode"
            line = f"Capture {role} {kind} CUDA graph begin. backend=full, avail mem=20.00 GB"
        else:
            line = (
                "Capture cuda graph begin."
                if role == "target"
                else "Capture draft cuda graph begin."
            ) + (" This can take up to several minutes. avail mem=20.00 GB")
        bars = [
            f"{bar_end}Capturing batches (bs={bs} avail_mem=19.75 GB): {25 * i:3d}%|#| {i}/4"
            for i, bs in enumerate((64, 32, 16, 8), start=1)
        ]
        return [*ranks(line), *bars, "\n"]

    chunks = [
        *ranks("Init torch distributed begin."),
        *load(4),
        *ranks("KV Cache is allocated. #tokens: 812345"),
        *capture("target"),
    ]
    if eagle:
        chunks += [*load(1), *capture("draft")]
    return [*chunks, "[2026-11-30 10:01:00] The server is fired up and ready to roll!\n"]


def stages_seen(chunks: list[str]) -> list[str]:
    """Every distinct stage a progress line would show while the log grows chunk by chunk."""
    seen: list[str] = []
    for k in range(1, len(chunks) + 1):
        current = stage("".join(chunks[:k]))
        if current is not None and (not seen or seen[-1] != current):
            seen.append(current)
    return seen


@pytest.mark.parametrize("version", ["0.5.6", "0.5.23"])
def test_a_tp8_baseline_never_mentions_a_draft(version):
    seen = stages_seen(sglang_launch_log(version, tp=8, eagle=False))
    assert not [s for s in seen if "draft" in s], seen
    assert (
        "loading weights 100 % (4/4 shards)" in seen
        and "capturing target CUDA graphs 100 % (bs=8)" in seen
    )
    assert seen[-1] == "ready"


@pytest.mark.parametrize("version", ["0.5.6", "0.5.23"])
def test_an_eagle3_launch_shows_target_and_draft_weights_and_captures_in_order(version):
    seen = stages_seen(sglang_launch_log(version, tp=8, eagle=True))

    def first(prefix: str) -> int:
        return next(i for i, s in enumerate(seen) if s.startswith(prefix))

    order = [
        first("loading weights 25 %"),
        first("capturing target CUDA graphs 25 %"),
        first("loading draft weights 100 %"),
        first("capturing draft CUDA graphs 25 %"),
        first("ready"),
    ]
    assert order == sorted(order), seen
    draft_from = first("loading the draft model's weights")
    # Nothing says draft before it loads
    assert not [s for s in seen[:draft_from] if "draft" in s], seen
