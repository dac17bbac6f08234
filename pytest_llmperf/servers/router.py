"""SGLang's router in front of data-parallel workers, measured as one server.

A profile with ``router = { workers = N, … }`` (pytest_llmperf/topology.py) starts N workers,
each exactly as the profile alone would be started (its own process group, free port, log
``<profile>-w<i>.log``, watchdog), waits until every one serves, then starts the router
(``<python> -m sglang_router.launch_router``, log ``<profile>-router.log``) in front of them and
waits until it counts every worker healthy. Requests, ``/flush_cache`` (which the router sends to
every worker) and readiness go to the router; each worker's own ``/server_info`` is read for the
fingerprint and the results, and each worker's ``/metrics`` for the server's counters (the router
has no tokens of its own to count). Stopping stops the router, then every worker.

With a ``url``, the url is a router someone else runs: nothing is launched, and its workers are
the ones its ``GET /workers`` lists.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx

from pytest_llmperf.engines.sglang import server_info
from pytest_llmperf.errors import ServerStartError
from pytest_llmperf.profiles import Profile
from pytest_llmperf.profiles_file import for_its_engine
from pytest_llmperf.servers import lifecycle, readiness
from pytest_llmperf.servers.lifecycle import ServerHandle

ROUTER_MODULE = "sglang_router.launch_router"


def worker_profile(profile: Profile, index: int) -> Profile:
    """Worker ``index`` of a router profile: the profile itself, under its own name, as its
    engine serves it alone (its readiness is the engine's, not the router's)."""
    return for_its_engine(replace(profile, name=f"{profile.name}-w{index}", router=None))


def router_python(profile: Profile) -> str:
    assert profile.router is not None
    python = profile.router.python
    return profile.path_field(python, command=True) if python else profile.interpreter


def router_command(
    profile: Profile, host: str, port: int, workers: list[str], metrics_port: int
) -> list[str]:
    """The router's command line: on ``host:port``, in front of ``workers``, its own
    Prometheus page on ``metrics_port`` of the same host (its default, 29000 on all interfaces,
    would clash between two runs on one machine)."""
    spec = profile.router
    assert spec is not None
    return [
        router_python(profile),
        "-m",
        ROUTER_MODULE,
        "--host",
        host,
        "--port",
        str(port),
        "--worker-urls",
        *workers,
        "--policy",
        spec.policy,
        "--prometheus-host",
        host,
        "--prometheus-port",
        str(metrics_port),
        *spec.args,
    ]


def start(
    profile: Profile, run_dir: Path, progress: Callable[[str], None] | None = None
) -> ServerHandle:
    """Launch the workers and the router; return once the router counts every worker healthy.
    Whatever was started is stopped again when this fails (or is interrupted)."""
    spec = profile.router
    assert spec is not None and spec.workers is not None
    workers: list[ServerHandle] = []
    handle: ServerHandle | None = None
    try:
        for index in range(spec.workers):  # all loading at once: one load time, not N
            workers.append(lifecycle.launch(worker_profile(profile, index), run_dir))
        for worker in workers:
            lifecycle.wait_ready(worker, progress=progress)
        urls = [w.base_url for w in workers]
        metrics_port = lifecycle.free_port(profile.host)
        handle = lifecycle.launch(
            profile,
            run_dir,
            command_for=lambda host, port: router_command(profile, host, port, urls, metrics_port),
            log_name=f"{profile.name}-router",
        )
        handle.workers, workers = workers, []
        wait_until_routed(handle, len(urls))
        describe(handle, router_version(profile))
        return handle
    except BaseException:
        if handle is not None:
            lifecycle.stop(handle, grace_s=5.0)
        for worker in workers:
            lifecycle.stop(worker, grace_s=5.0)
        raise


def attach(profile: Profile, url: str, source: str) -> ServerHandle:
    """A router someone else runs, at ``url`` (named by ``source``): its workers from
    ``GET /workers``."""
    handle = lifecycle.attach(profile, url, source=source)
    try:
        with httpx.Client(timeout=10.0, headers=handle.headers) as client:
            listed = client.get(handle.base_url + "/workers").json()
        urls = [str(w["url"]) for w in listed["workers"]]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        raise ServerStartError(
            f"{profile.name}: url {url} is not a router that lists its workers (GET /workers: "
            f"{type(exc).__name__}: {exc}); remove the profile's router table if it is one server."
        ) from None
    handle.workers = [
        ServerHandle(
            worker_profile(profile, i),
            u.rstrip("/"),
            api_key=handle.api_key,
            redactor=handle.redactor,
        )
        for i, u in enumerate(urls)
    ]
    describe(handle, None)
    return handle


def wait_until_routed(handle: ServerHandle, expected: int, poll_s: float = 0.25) -> None:
    """Until the router's ``/readiness`` counts ``expected`` healthy workers. A router or worker
    that exits fails at once, with its log's tail."""
    profile = handle.profile
    url = handle.base_url + "/readiness"

    def counts_them(answer: httpx.Response) -> str | None:
        try:
            if answer.status_code == 200 and answer.json().get("healthy_workers") == expected:
                return None
        except (ValueError, AttributeError):
            pass
        return f"{answer.status_code} {answer.text[:200]}"

    def alive() -> None:
        handle.ensure_alive(
            "while starting", error=ServerStartError, with_command=True, who="(router) "
        )

    seen = readiness.poll(
        url,
        timeout_s=profile.ready_timeout_s,
        headers=handle.headers,
        poll_s=poll_s,
        ready=counts_them,
        between=alive,
        request_timeout_s=10.0,
    )
    if seen is not None:
        raise handle.failure(
            ServerStartError,
            f"(router) did not count its {expected} workers healthy within "
            f"{profile.ready_timeout_s:g} s (ready_timeout_s); {url} last said: {seen}",
            with_command=True,
        )


def describe(handle: ServerHandle, version: str | None) -> None:
    """Each worker's /server_info, the first as the server's own (every worker runs the same
    profile), and the topology: worker count, DP size and policy are hard fingerprint keys."""
    assert handle.profile.router is not None
    for worker in handle.workers:
        worker.info = lifecycle.fetch_info(worker)
    handle.info = dict(handle.workers[0].info) if handle.workers else {}
    dp_sizes = [server_info(w.info).get("dp_size") or 1 for w in handle.workers]
    handle.topology = {
        "router": "sglang-router",
        "policy": handle.profile.router.policy,
        "workers": len(handle.workers),
        "dp_size": sum(int(d) for d in dp_sizes),
        **({"router_version": version} if version else {}),
    }


def router_version(profile: Profile) -> str | None:
    """The installed ``sglang-router``'s version in the router's interpreter (package metadata)."""
    try:
        found = subprocess.run(
            [
                router_python(profile),
                "-c",
                "import importlib.metadata as m; print(m.version('sglang-router'))",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return found.stdout.strip() or None if found.returncode == 0 else None
