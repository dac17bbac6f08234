"""The shipped router profile, sglang-cpu-dp2, as a user runs it (runs of 8 requests): two real
SGLang 0.5.23 CPU workers behind SGLang's real router (sglang-router from PyPI), all launched by
the plugin.

One short session (one level, one recorded run: the two workers load in parallel in about 47 s
on 2 cores): the results name both workers, both served and had their cache flushed through the
router, and no process is left."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psutil

from tests import sglang_real
from tests.sglang_shared import SHARED_PIDS

REPO = Path(__file__).resolve().parents[2]


def leftovers() -> list[str]:
    """SGLang's processes and its router's, but the package's shared server's (it idles)."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.pid in SHARED_PIDS:
            continue
        try:
            line = " ".join(proc.info["cmdline"] or ())
            name = proc.info["name"] or ""
            if (
                name.startswith("sglang::")
                or "sglang.launch_server" in line
                or "sglang_router.launch_router" in line
            ):
                found.append(f"{proc.pid} {name} {line[:100]}")
        except psutil.Error:
            continue
    return found


def test_the_router_profile_serves_through_both_real_workers_and_stops_them(pytester):
    sglang_real.require_router()
    assert not leftovers(), leftovers()
    pytester.makeini("[pytest]\nllmperf_baseline_dir = baselines\n")
    shutil.copytree(REPO / "perf_suites", pytester.path / "perf_suites",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    # The shipped file, its relative paths (../.sglang) resolved as in the checkout, and the
    # router profile recording one run of 8 requests (4 a worker) instead of the profile's
    # three: what this test asks of the router is that both workers serve, not a precise golden.
    (pytester.path / ".sglang").symlink_to(REPO / ".sglang", target_is_directory=True)
    with (pytester.path / "perf_suites" / "profiles.toml").open("a") as profiles:
        profiles.write('\n[profiles.dp2]\nextends = "sglang-cpu-dp2"\nmin_requests = 8\nruns = 1\n')
    result = pytester.runpytest_subprocess(
        "perf_suites", "--llm-profile=dp2", "-k", "output_throughput",
        "--llm-concurrency", "2", "--perf-update", "--perf-update-runs", "1",
        "--perf-json", "out.json", "-p", "no:cacheprovider", timeout=600,
    )  # fmt: skip
    output = result.stdout.str()
    assert result.ret == 0, output[-4000:]
    assert "Traceback" not in output + result.stderr.str()
    described = json.loads((pytester.path / "out.json").read_text())["profiles"]["dp2"]
    assert described["topology"]["workers"] == 2 and described["topology"]["dp_size"] == 2
    assert [w["version"] for w in described["workers"]] == ["0.5.23", "0.5.23"]
    logs = [Path(w["log"]).read_text(errors="replace") for w in described["workers"]]
    for log in logs:
        assert log.count('"POST /generate HTTP/1.1" 200') >= 4  # round robin: both served
        assert "Cache flushed successfully!" in log  # /flush_cache through the router
    assert not leftovers(), leftovers()
