"""The stand-ins held to the real SGLang: what the simulated engine (behind the stand-in
``sglang`` 0.5.23 package the other tests use) imitates is observed once on the real SGLang 0.5.23
serving on the CPU (the server this package's tests share: tests/sglang_shared.py), and once on
the stand-in launched with the same flags, the same way, and compared where it matters to the
plugin. When SGLang changes, the stand-in's difference fails here first.

Needs ``bash scripts/install-sglang-cpu.sh`` (skipped without; failed under LLMPERF_REQUIRE_SGLANG=1).
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from pytest_llmperf.engines.sglang_log import stage
from pytest_llmperf.load.workload import Workload
from pytest_llmperf.servers import lifecycle
from tests.helpers import fake_sglang
from tests.sglang_real import REPO
from tests.sglang_shared import Shared, watch_health

OUTPUT_LEN = 16
#: Unary /generate answers taken from each server. The real SGLang 0.5.23 does not always answer
#: in one form: in one full run of ~20 its answer lacked ``dp_rank`` and ``weight_versions`` and
#: carried ``decode_throughput`` (its tokenizer manager sets each only on some output paths), and
#: every answer before and since carried the first two. So each server is asked three times and
#: every stand-in answer must take a form the real server's answers took.
UNARY_ASKS = 3


@dataclass
class Observed:
    """One server, observed: its answers, its log, its processes, its exit."""

    health_while_loading: list[str] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)
    log: str = ""
    children: list[str] = field(default_factory=list)
    exit_code: int | None = None


def answers(profile, base_url: str) -> dict[str, Any]:
    """What a ready server answers to the requests the plugin sends (a cache flush last)."""
    native = Workload(api="sglang", output_len=OUTPUT_LEN).item(0).body
    openai = Workload(api="openai", output_len=OUTPUT_LEN, model=profile.model_argument)
    seen: dict[str, Any] = {}
    with httpx.Client(base_url=base_url, timeout=60) as client:
        seen["generate_stream"] = sse(client, "/generate", native)
        unary = json.loads(native)
        unary["stream"] = False
        seen["generate"] = [client.post("/generate", json=unary).json() for _ in range(UNARY_ASKS)]
        seen["completions_stream"] = sse(client, "/v1/completions", openai.item(0).body)
        seen["server_info"] = client.get("/server_info").json()
        flushed = client.post("/flush_cache")
        seen["flush_cache"] = (flushed.status_code, flushed.text)
        seen["models"] = client.get("/v1/models").json()
    return seen


def sse(client: httpx.Client, path: str, body: bytes) -> list[Any]:
    events: list[Any] = []
    with client.stream(
        "POST", path, content=body, headers={"content-type": "application/json"}
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data:"):
                data = line[5:].strip()
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def observe(profile, run_dir: Path) -> Observed:
    """Launch, watch it load, ask it, stop it: the stand-in's whole life."""
    seen = Observed()
    server = lifecycle.launch(profile, run_dir)
    stop = threading.Event()
    watcher = threading.Thread(
        target=watch_health, args=(server.base_url, seen.health_while_loading, stop)
    )
    watcher.start()
    try:
        lifecycle.wait_ready(server)
        watcher.join(timeout=30)
        assert server.process is not None
        seen.children = sorted(
            p.name() for p in psutil.Process(server.process.pid).children(recursive=True)
        )
        seen.answers = answers(profile, server.base_url)
    finally:
        stop.set()
        watcher.join()
        lifecycle.stop(server)
    assert server.process is not None
    seen.exit_code = server.process.returncode
    seen.log = server.log_path.read_text(errors="replace") if server.log_path else ""
    return seen


@pytest.fixture(scope="module")
def real(shared_server: Shared) -> Observed:
    """The real SGLang this package's tests share (one load of 40-50 s less): watched while it
    loaded, asked now; its exit on SIGTERM is checked when the package's tests are done (it
    must exit 0: tests/sglang_shared.py)."""
    server = shared_server.server
    seen = Observed(
        health_while_loading=list(shared_server.health_while_loading),
        children=list(shared_server.children),
    )
    seen.answers = answers(shared_server.profile, server.base_url)
    seen.log = server.log_path.read_text(errors="replace") if server.log_path else ""
    return seen


@pytest.fixture(scope="module")
def standin(tmp_path_factory, shared_server: Shared) -> Observed:
    """The stand-in at the same release, launched with the shared server's own flags."""
    root = tmp_path_factory.mktemp("standin")
    site = fake_sglang(root, "0.5.23")
    profile = replace(
        shared_server.profile,
        python=sys.executable,
        model="standin-model",
        env={"PYTHONPATH": str(site)},
        args=(*shared_server.profile.args, "--sim-children", "2", "--sim-load-time", "1"),
    )
    return observe(profile, root)


def keys(events: list[Any], index: int) -> list[str]:
    return sorted(events[index]) if isinstance(events[index], dict) else [events[index]]


def test_native_stream_events_match(real, standin):
    r, s = real.answers["generate_stream"], standin.answers["generate_stream"]
    assert (r[-1] == "[DONE]") == (s[-1] == "[DONE]")
    assert keys(r, 0) == keys(s, 0)
    r_meta = [e["meta_info"] for e in r if isinstance(e, dict)]
    s_meta = [e["meta_info"] for e in s if isinstance(e, dict)]
    assert sorted(r_meta[0]) == sorted(s_meta[0]), "meta_info keys of a first event"
    assert sorted(r_meta[-1]) == sorted(s_meta[-1]), "meta_info keys of the last event"
    # Cumulative completion_tokens in every event, ending at the length asked for.
    for metas in (r_meta, s_meta):
        counts = [m["completion_tokens"] for m in metas]
        assert counts == sorted(counts) and counts[-1] == OUTPUT_LEN
    # Text: cumulative (each event's text extends the last) unless incremental streaming is on.
    r_text = [e["text"] for e in r if isinstance(e, dict)]
    s_text = [e["text"] for e in s if isinstance(e, dict)]
    cumulative = [all(b.startswith(a) for a, b in zip(t, t[1:])) for t in (r_text, s_text)]
    assert cumulative[0] == cumulative[1]


def unary_form(answer: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A unary answer's keys and its meta_info's keys."""
    return tuple(sorted(answer)), tuple(sorted(answer["meta_info"]))


def test_unary_generate_matches(real, standin):
    r, s = real.answers["generate"], standin.answers["generate"]
    real_forms = {unary_form(answer) for answer in r}
    shown = "\n".join(f"  real meta_info {a['meta_info']}" for a in r)
    for answer in s:
        assert unary_form(answer) in real_forms, (
            f"the stand-in answered {unary_form(answer)}, a form none of the real server's "
            f"{len(r)} answers took:\n{shown}"
        )
    for answer in (*r, *s):
        assert answer["meta_info"]["completion_tokens"] == OUTPUT_LEN


def test_openai_stream_events_match(real, standin):
    r, s = real.answers["completions_stream"], standin.answers["completions_stream"]
    assert (r[-1] == "[DONE]") == (s[-1] == "[DONE]")
    r_chunks = [e for e in r if isinstance(e, dict)]
    s_chunks = [e for e in s if isinstance(e, dict)]
    assert sorted(r_chunks[0]) == sorted(s_chunks[0])
    assert sorted(r_chunks[0]["choices"][0]) == sorted(s_chunks[0]["choices"][0])
    # The usage (continuous_usage_stats): present in the last chunk, counting the output.
    for chunks in (r_chunks, s_chunks):
        assert chunks[-1]["usage"]["completion_tokens"] == OUTPUT_LEN
    # The same usage keys (0.5.23's UsageInfo: reasoning_tokens too, 0 without thinking).
    assert sorted(r_chunks[-1]["usage"]) == sorted(s_chunks[-1]["usage"])


def test_server_info_reports_the_release_s_field_set_with_its_types(real, standin):
    r, s = real.answers["server_info"], standin.answers["server_info"]
    assert r["version"] == s["version"] == "0.5.23"
    fields = set(json.loads((REPO / "tests/data/sglang-cli/0.5.23.json").read_text())["fields"])
    # Every ServerArgs field the real server reports, the stand-in reports too, and no other.
    assert (set(r) & fields) - set(s) == set()
    assert (set(s) - {"sim_speed"}) - set(r) == set(), "the stand-in reports keys SGLang does not"
    for key in sorted(set(r) & set(s)):
        if r[key] is not None and s[key] is not None:
            assert type(r[key]) is type(s[key]), (key, r[key], s[key])


def test_flush_cache_and_models_answer_alike(real, standin):
    assert real.answers["flush_cache"][0] == standin.answers["flush_cache"][0] == 200
    assert sorted(real.answers["models"]) == sorted(standin.answers["models"])
    assert sorted(real.answers["models"]["data"][0]) == sorted(standin.answers["models"]["data"][0])


def test_health_while_loading_goes_the_same_way(real, standin):
    """SGLang 0.5.23 binds its port before it warms up: refused, then 503, then 200."""
    assert real.health_while_loading[-1] == standin.health_while_loading[-1] == "200"
    assert [a for a in real.health_while_loading if a != "refused"] == [
        a for a in standin.health_while_loading if a != "refused"
    ]


def test_the_log_lines_the_plugin_reads_are_in_both(real, standin):
    for line in (
        "Load weight begin.",
        "Multi-thread loading shards:",
        "KV Cache is allocated.",
        "The server is fired up and ready to roll!",
        "Cache flushed successfully!",
    ):
        assert line in real.log, line
        assert line in standin.log, line
    assert stage(real.log) == stage(standin.log) == "ready"


def test_process_tree_and_exit_on_sigterm_match(real, standin):
    # SGLang: a scheduler and a detokenizer (and multiprocessing's resource tracker).
    assert sum(name.startswith("sglang::") for name in real.children) == 2, real.children
    assert len(standin.children) >= 2, standin.children
    # The real one exits 0 on SIGTERM: checked when the shared server stops, after this.
    assert real.exit_code is None and standin.exit_code == 0
