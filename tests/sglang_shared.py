"""One real SGLang 0.5.23 on the CPU, shared by the tests of tests/engines/ that attach to a
server (a load takes 40 to 50 s on 2 cores): test_sglang_cpu.py measures through it, and
test_standin_matches_sglang.py holds the stand-in to what it did while loading, what it answers
and how it exits. Started by the plugin's own launcher outside any pytest session, with
``--enable-metrics`` (the server's own accounting) and ``--enable-cache-report`` (the prefix
cache's figures on the OpenAI API); the fixture is tests/engines/conftest.py's ``shared_server``.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
import psutil

from pytest_llmperf.host import shm
from pytest_llmperf.profiles import Profile
from pytest_llmperf.profiles_file import load_profiles
from pytest_llmperf.servers import lifecycle
from tests.sglang_real import MODEL_DIR, PYTHON, REPO

#: The CPU recipe (see the sglang-cpu profile), written with flags of older SGLang releases
#: where they exist, so every launch here goes through the version adaptation.
CPU_ARGS = [
    "--device", "cpu", "--attention-backend", "torch_native", "--disable-cuda-graph",
    "--max-total-tokens", "8192", "--mem-fraction-static", "0.2", "--sleep-on-idle",
]  # fmt: skip
OLD_STYLE = ["--tp", "1", "--cuda-graph-max-bs", "4", "--stream-output"]
#: The shared server's own flags, beyond the recipe.
SHARED_ARGS = [*CPU_ARGS, *OLD_STYLE, "--enable-metrics", "--enable-cache-report"]

#: The processes of the shared server while it runs: the tests' checks for leftovers leave
#: them be; the fixture's own teardown checks them.
SHARED_PIDS: set[int] = set()


def shm_files() -> set[str]:
    return shm.snapshot()  # SGLang's and multiprocessing's names, as the launcher removes them


def sglang_processes() -> list[str]:
    """SGLang's processes now running, but the shared server's."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline", "status"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or ())
            if (
                proc.pid not in SHARED_PIDS
                and proc.info["status"] != psutil.STATUS_ZOMBIE
                and (
                    (proc.info["name"] or "").startswith("sglang::")
                    or "sglang.launch_server" in cmdline
                )
            ):
                found.append(f"{proc.pid} {proc.info['name']} {cmdline[:120]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def write_project(
    root: Path,
    *,
    args: list[str] | None = None,
    model: str | None = None,
    concurrency: str = "[1, 2, 4]",
    runs: int = 2,
    fail_margin: float = 0.20,
    output_len: int = 64,
) -> Path:
    """A project in ``root`` with profile ``cpu`` (the real SGLang, old-style flags) and the
    throughput suite; returns the model path (a uniquely named link, so the launcher is
    findable)."""
    link = root / f"tiny-llama-{uuid.uuid4().hex[:8]}"
    link.symlink_to(MODEL_DIR, target_is_directory=True)
    model_path = model or str(link)
    (root / "profiles.toml").write_text(
        f"""
default = ["cpu"]

[profiles.cpu]
engine = "sglang"
python = "{PYTHON}"
model = "{model_path}"
args = {json.dumps(args if args is not None else [*CPU_ARGS, *OLD_STYLE])}
env = {{ SGLANG_USE_CPU_ENGINE = "1", HF_HUB_OFFLINE = "1" }}
api = "sglang"
concurrency = {concurrency}
runs = {runs}
output_len = {output_len}
min_requests = 8
ready_timeout_s = 240
shutdown_timeout_s = 30
request_timeout_s = 60
fail_margin = {fail_margin}
warn_margin = 0.08
"""
    )
    (root / "pytest.ini").write_text(
        "[pytest]\nllmperf_profiles_file = profiles.toml\nllmperf_baseline_dir = baselines\n"
    )
    shutil.copy(REPO / "perf_suites" / "test_throughput.py", root / "test_throughput.py")
    return link


@dataclass
class Shared:
    """The shared server, and what it did while it loaded."""

    server: lifecycle.ServerHandle
    #: Its profile (the flags as written, before the version adaptation).
    profile: Profile
    scheduler_pid: int
    #: ``/health_generate``'s answers while it loaded, each distinct answer once, in order.
    health_while_loading: list[str] = field(default_factory=list)
    #: The names of the launcher's child processes once ready.
    children: list[str] = field(default_factory=list)


def watch_health(url: str, seen: list[str], stop: threading.Event) -> None:
    """``/health_generate``'s answers while a server loads, each distinct one once, in order."""
    while not stop.is_set():
        try:
            answer = str(httpx.get(url + "/health_generate", timeout=5).status_code)
        except httpx.HTTPError:
            answer = "refused"
        if not seen or seen[-1] != answer:
            seen.append(answer)
        if answer == "200":
            return
        time.sleep(0.05)


@contextmanager
def shared_sglang(root: Path) -> Iterator[Shared]:
    """Launch the shared server in ``root``; stop it (its whole tree, and the /dev/shm files
    SGLang leaves) after, and check that it exited 0 on SIGTERM and left nothing.

    Pinned to the last core with one OpenMP thread, its clients on the others (see
    test_sglang_cpu.py's ``attached``): on 2 shared cores a client's own CPU use slows the
    server it measures, so unpinned, two clients would measure different servers (seen: 7 %
    apart)."""
    write_project(root, args=SHARED_ARGS)
    profile = load_profiles(root / "profiles.toml").profiles["cpu"]
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) > 1:
        pinned = root / "pinned-python"
        pinned.write_text(f'#!/bin/sh\nexec taskset -c {cores[-1]} {PYTHON} "$@"\n')
        pinned.chmod(0o755)
        profile = replace(profile, python=str(pinned), env={**profile.env, "OMP_NUM_THREADS": "1"})
    shm_before = shm_files()
    server = lifecycle.launch(profile, root / "server")  # the plugin's own launcher
    health: list[str] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch_health, args=(server.base_url, health, stop))
    watcher.start()
    try:
        lifecycle.wait_ready(server)
        watcher.join(timeout=30)
        assert server.process is not None
        launcher = psutil.Process(server.process.pid)
        tree = [launcher, *launcher.children(recursive=True)]
        SHARED_PIDS.update(p.pid for p in tree)
        (scheduler,) = [p for p in tree if p.name().startswith("sglang::schedul")]
        yield Shared(
            server,
            profile,
            scheduler.pid,
            health_while_loading=health,
            children=sorted(p.name() for p in tree[1:]),
        )
    finally:
        stop.set()
        watcher.join()
        lifecycle.stop(server)
        SHARED_PIDS.clear()
    assert sglang_processes() == [], "the shared server outlived its tests"
    assert shm_files() - shm_before == set(), "the shared server's files left in /dev/shm"
    # SGLang drains and exits 0 on SIGTERM (the stand-in must too: test_standin_matches_sglang).
    assert server.process.returncode == 0, f"SGLang exited {server.process.returncode} on SIGTERM"
