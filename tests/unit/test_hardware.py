"""The hardware key: made of what changes a figure, so two hosts that a CPU engine runs at
different speeds on get different goldens (both read "AMD EPYC" as their model name)."""

from __future__ import annotations

from pytest_llmperf.host import hardware

MILAN = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse4_2 avx avx2 fma

processor\t: 1
"""
GENOA = MILAN.replace("model\t\t: 1", "model\t\t: 17").replace(
    "avx2 fma", "avx2 fma avx512f avx512_bf16"
)


def test_two_epyc_generations_get_different_keys_and_the_name_stays_soft():
    milan, genoa = hardware.cpu_facts(MILAN), hardware.cpu_facts(GENOA)
    assert milan["key"] != genoa["key"]
    assert "amd25.1-avx2-" in milan["key"] and "amd25.17-avx2-avx512-avx512bf16-" in genoa["key"]
    assert genoa["cpu_features"] == ["avx2", "avx512", "avx512bf16"]
    assert "epyc" not in genoa["key"]  # the marketing name says nothing: soft


def test_the_key_counts_the_cores_this_process_may_use_and_the_memory():
    facts = hardware.cpu_facts()
    assert facts["key"].endswith(f"-{facts['cpu_cores']}c-{facts['memory_gib']}g")
    assert facts["cpu_cores"] >= 1 and facts["memory_gib"] >= 1
