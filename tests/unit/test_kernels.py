"""The kernel-time summary of a Chrome trace, on traces whose times are known."""

from __future__ import annotations

import gzip
import json

import pytest

from pytest_llmperf.core.kernels import (
    KernelSummary,
    TraceError,
    in_one_line,
    moved,
    read_trace,
    side_by_side,
    summarize,
)


def op(name, ts, dur, tid=1, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur}


def test_cpu_operators_are_charged_their_self_time():
    # aten::linear [0, 100) holds aten::addmm [10, 90) which holds aten::mm [20, 60);
    # another thread's aten::mm overlaps in time but is not a child.
    events = [
        op("aten::linear", 0, 100),
        op("aten::addmm", 10, 80),
        op("aten::mm", 20, 40),
        op("aten::mm", 30, 50, tid=2),
        op("aten::softmax", 100, 25),
        {"ph": "X", "cat": "python_function", "name": "forward", "ts": 0, "dur": 500},
        {"ph": "i", "cat": "cpu_op", "name": "marker", "ts": 5},
    ]
    summary = summarize(events)
    assert summary.source == "CPU operators (self time)"
    assert dict(summary.ops) == {
        "aten::linear": 20.0,
        "aten::addmm": 40.0,
        "aten::mm": 90.0,
        "aten::softmax": 25.0,
    }
    assert summary.total_us == 175.0 and summary.ops[0] == ("aten::mm", 90.0)
    assert summary.share("aten::softmax") == pytest.approx(25 / 175)


def test_gpu_kernels_win_over_cpu_operators_and_are_summed_as_they_are():
    events = [
        op("aten::mm", 0, 1000),
        op("sm90_gemm", 0, 300, tid=9, cat="kernel"),
        op("sm90_gemm", 400, 300, tid=9, cat="kernel"),
        op("flash_fwd", 800, 200, tid=9, cat="kernel"),
        op("Memcpy HtoD", 1000, 100, tid=9, cat="gpu_memcpy"),
    ]
    summary = summarize(events, top=2)
    assert summary.source == "GPU kernels"
    assert summary.ops == (("sm90_gemm", 600.0), ("flash_fwd", 200.0))
    assert summary.total_us == 900.0  # the operations left out still count in the total


def test_the_moved_shares_and_the_table():
    golden = KernelSummary(
        "GPU kernels", 1000.0, (("gemm", 500.0), ("attn", 300.0), ("norm", 200.0))
    )
    now = KernelSummary(
        "GPU kernels", 1000.0, (("attn", 550.0), ("gemm", 400.0), ("allreduce", 50.0))
    )
    rows = moved(now, golden)
    assert [(m.name, round(m.change, 3)) for m in rows] == [
        ("attn", 0.25),
        ("norm", -0.2),
        ("gemm", -0.1),
        ("allreduce", 0.05),
    ]
    assert in_one_line(now, golden, top=1) == "moved most: attn 55.0% (golden 30.0%)"
    assert in_one_line(now, None, top=2) == "top: attn 55.0%, gemm 40.0%"
    table = side_by_side(now, golden)
    assert table[0].split() == ["operation", "now", "golden", "moved"]
    assert table[1].split() == ["attn", "55.0%", "30.0%", "+25.0pt"]
    cpu = KernelSummary("CPU operators (self time)", 10.0, (("aten::mm", 10.0),))
    assert "the golden's counts CPU operators" in side_by_side(now, cpu)[0]
    assert KernelSummary.from_json(now.to_json()) == now


def test_a_trace_file_gzip_or_not_and_a_broken_one(tmp_path):
    events = {"traceEvents": [op("aten::mm", 0, 10)]}
    packed = tmp_path / "1.trace.json.gz"
    packed.write_bytes(gzip.compress(json.dumps(events).encode()))
    plain = tmp_path / "2.trace.json"
    plain.write_text(json.dumps(events))
    assert read_trace(packed) == read_trace(plain) == events["traceEvents"]
    broken = tmp_path / "3.trace.json.gz"
    broken.write_bytes(b"\x1f\x8b truncated")
    with pytest.raises(TraceError, match=r"3.trace.json.gz: not a readable Chrome trace"):
        read_trace(broken)
    plain.write_text('{"events": []}')
    with pytest.raises(TraceError, match="no traceEvents list"):
        read_trace(plain)
