"""Loading stages read from SGLang logs of 0.5.6 (bars on their own lines) and 0.5.23 (\\r bars)."""

from pytest_llmperf.engines.loading import read_stage, stage

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
