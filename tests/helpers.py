"""Real servers for tests (the simulated engine, the exactly-paced SSE server) as
subprocesses on free ports, and helpers that write profile files for pytester projects."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest

from pytest_llmperf.servers import readiness
from pytest_llmperf.servers.lifecycle import free_port
from pytest_llmperf.sim import paced

#: Fast simulated-engine flags for tests: short load and warmup (the tests of loading set their
#: own), 20x the reference node's speed.
FAST_SIM_ARGS = ["--sim-load-time", "0.05", "--sim-warmup-time", "0.02", "--sim-speed", "20"]


class Subprocess:
    """A server process started for a test; stopped (with its group) afterwards."""

    def __init__(self, args: list[str], ready_path: str, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )

        def alive() -> None:
            if self.proc.poll() is not None:
                raise AssertionError(f"{args} exited with {self.proc.returncode}")

        problem = readiness.poll(
            self.url + ready_path, timeout_s=20, poll_s=0.05, between=alive, request_timeout_s=5
        )
        if problem is not None:
            self.stop()  # never leave a server behind, ready or not
            raise AssertionError(f"{args} not ready in 20 s: {problem}")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)


def start_sim(*extra: str) -> Subprocess:
    port = free_port("127.0.0.1")
    args = [
        sys.executable,
        "-m",
        "pytest_llmperf.sim",
        "--model-path",
        "test-model",
        "--port",
        str(port),
        *FAST_SIM_ARGS,
        *extra,
    ]
    return Subprocess(args, "/health_generate", port)


def start_paced(itl_ms: float, tokens_per_chunk: int = 1, *options: str) -> Subprocess:
    port = free_port("127.0.0.1")
    return Subprocess(
        paced.command(port, itl_ms, "--tokens-per-chunk", str(tokens_per_chunk), *options),
        "/health",
        port,
    )


def ctrl_c_enabled() -> None:
    """``preexec_fn`` for a child that a test interrupts with SIGINT: a shell starts background
    jobs with SIGINT ignored, and Python keeps an ignored SIGINT ignored, so a test run from a
    CI script's background job could not Ctrl-C its pytest. Restore the terminal's default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def outcomes_unless_host_too_busy(result: pytest.RunResult, **outcomes: int) -> None:
    """``result.assert_outcomes(**outcomes)``, unless this host could not drive the load: a
    run the plugin's own check flagged client-bound twice (the load generator, not the server,
    was the limit: the point is INVALID) is the host's reason, and the test skips with it
    instead of judging figures its host could not produce."""
    try:
        result.assert_outcomes(**outcomes)
    except AssertionError:
        busy = [line.strip() for line in result.outlines if "client-bound:" in line]
        if busy:
            pytest.skip(
                f"this host was too busy to drive the load (the plugin said: {busy[0][:300]})"
            )
        raise


def processes_with(marker: str) -> list[psutil.Process]:
    """Live processes whose command line mentions ``marker`` (checked, never assumed)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(
                proc.info["cmdline"] or ()
            ):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def write_profiles(
    pytester: pytest.Pytester,
    body: str = "",
    *,
    marker: str | None = None,
    concurrency: str = "[1, 4]",
    output_len: int = 64,
    runs: int = 2,
    extra_args: str = "",
    min_requests: int = 4,
    spec_args: str = "",
) -> str:
    """A profiles.toml with sim-base / sim-spec (fast) plus ``body``; returns the model marker.

    64-token requests (about 30 ms at sim speed 20): long enough that a millisecond or two of
    client scheduling on a busy 2-core machine stays well inside the client-bound check.

    The model path carries a unique marker so the test can find (or not find) its servers
    in the process table.
    """
    marker = marker or f"marker-{uuid.uuid4().hex[:10]}"
    fast = ", ".join(f'"{a}"' for a in FAST_SIM_ARGS)
    pytester.makefile(
        ".toml",
        profiles=textwrap.dedent(f"""
        default = ["sim-base"]

        [profiles.sim-base]
        engine = "sim"
        model = "{marker}"
        args = [{fast}{", " + extra_args if extra_args else ""}]
        concurrency = {concurrency}
        runs = {runs}
        output_len = {output_len}
        min_requests = {min_requests}
        ready_timeout_s = 30
        shutdown_timeout_s = 5
        request_timeout_s = 10

        [profiles.sim-spec]
        extends = "sim-base"
        extra_args = ["--speculative-algorithm", "EAGLE3"{", " + spec_args if spec_args else ""}]
    """)
        + textwrap.dedent(body),
    )
    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\n")
    return marker


def project_with(pytester: pytest.Pytester, profiles: str, suite: str | None = None) -> None:
    """A pytester project: ``profiles`` (TOML text, dedented) as its profiles file and, when
    given, ``suite`` as test_perf.py."""
    pytester.makefile(".toml", profiles=textwrap.dedent(profiles))
    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\n")
    if suite is not None:
        pytester.makepyfile(test_perf=suite)


THROUGHPUT_SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    point = llmperf.measure(concurrency=llm_concurrency)
    llmperf.check(point)
"""

SPEEDUP_SUITE = (
    THROUGHPUT_SUITE
    + """

def test_speculative_speedup(llmperf_speedup):
    llmperf_speedup.check()
"""
)


STANDIN = Path(__file__).resolve().parent / "standin" / "launch_server.py"
#: Each tested SGLang release's option table and ServerArgs fields, read from the release itself
#: (scripts/sglang_releases.py regenerate).
RELEASES = Path(__file__).resolve().parent / "data" / "sglang-cli"


def fake_sglang(root: Path, version: str) -> Path:
    """A site directory holding a stand-in package ``sglang`` at ``version`` (with dist-info
    metadata, which is where the plugin reads the version from). Put it on PYTHONPATH."""
    site = root / f"site-{version}"
    if site.exists():
        return site
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    shutil.copy(STANDIN, site / "sglang" / "launch_server.py")
    release = RELEASES / f"{version}.json"
    if release.exists():
        shutil.copy(release, site / "sglang" / "release.json")
    info = site / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    return site


def write_sglang_profile(
    pytester: pytest.Pytester,
    args: list[str],
    *,
    version: str | None = "0.5.23",
    concurrency: str = "[1]",
    shutdown_timeout_s: float = 5,
    request_timeout_s: float = 10,
    marker: str | None = None,
    output_len: int = 128,
) -> str:
    """Profile ``gpu`` with engine = "sglang" on the stand-in package at ``version`` (None: no
    SGLang installed) and the throughput suite; returns the model marker."""
    marker = marker or f"standin-{uuid.uuid4().hex[:10]}"
    env = f'env = {{ PYTHONPATH = "{fake_sglang(pytester.path, version)}" }}' if version else ""
    quoted = ", ".join(f'"{a}"' for a in args)
    pytester.makefile(
        ".toml",
        profiles=textwrap.dedent(f"""
        default = ["gpu"]

        [profiles.gpu]
        engine = "sglang"
        model = "{marker}"
        args = [{quoted}]
        {env}
        concurrency = {concurrency}
        runs = 2
        output_len = {output_len}
        min_requests = 4
        ready_timeout_s = 30
        shutdown_timeout_s = {shutdown_timeout_s}
        request_timeout_s = {request_timeout_s}
    """),
    )
    pytester.makeini("[pytest]\nllmperf_profiles_file = profiles.toml\n")
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)
    return marker


class Throttle:
    """Slow an unmodified server from outside: SIGSTOP ``pid`` for ``share`` of every period.

    llama-server wants a long period (0.5 s): every stop also costs llama.cpp's spin-waiting
    threads a resynchronisation, so with a 50 ms period a 3 % share slowed the server by 12 %;
    at 0.5 s that overhead is a tenth and the slowdown is close to the share.

    Stops and continues are scheduled on absolute deadlines: with relative sleeps, a late wake-up
    (the server's spinning threads hold both cores) lengthened the running phase, and a 30 % share
    slowed llama-server by only 20 % on CI. ``stopped_share`` is what was really applied.
    """

    def __init__(self, pid: int, share: float, period_s: float = 0.5) -> None:
        self.pid, self.share, self.period = pid, share, period_s
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.stopped_s = 0.0
        self.elapsed_s = 0.0

    def _sleep_until(self, deadline: float) -> None:
        time.sleep(max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        start = time.monotonic()
        try:
            self._throttle(start)
        except ProcessLookupError:
            pass  # the server is gone (a launched one, stopped at the end of its session)
        self.elapsed_s = time.monotonic() - start

    def _throttle(self, start: float) -> None:
        k = 0
        while not self.stopped.is_set():
            os.kill(self.pid, signal.SIGSTOP)
            stopped_at = time.monotonic()
            self._sleep_until(start + (k + self.share) * self.period)
            os.kill(self.pid, signal.SIGCONT)
            self.stopped_s += time.monotonic() - stopped_at
            k += 1
            self._sleep_until(start + k * self.period)

    @property
    def stopped_share(self) -> float:
        return self.stopped_s / self.elapsed_s if self.elapsed_s else 0.0

    def __enter__(self) -> Throttle:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)


class ThrottleEach:
    """A :class:`Throttle` on every process whose command line has ``marker`` that starts while
    this is entered: a server the plugin launches itself, slowed from outside all the same."""

    def __init__(self, marker: str, share: float, ignore: tuple[int, ...] = ()) -> None:
        self.marker, self.share, self.seen = marker, share, set(ignore)
        self.throttles: list[Throttle] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.stopped.wait(0.02):
            for proc in processes_with(self.marker):
                if proc.pid not in self.seen:
                    self.seen.add(proc.pid)
                    throttle = Throttle(proc.pid, self.share)
                    throttle.thread.start()
                    self.throttles.append(throttle)

    def __enter__(self) -> ThrottleEach:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()
        for throttle in self.throttles:
            throttle.__exit__()


def require_llama(profile) -> None:
    """Skip (or, under LLMPERF_REQUIRE_LLAMA=1, fail) when the profile's llama-server is not
    installed: scripts/install-llama-server.sh builds it."""
    from pytest_llmperf.servers.lifecycle import ServerStartError, build_command

    try:
        build_command(profile, "127.0.0.1", 1, Path.cwd())
    except ServerStartError as exc:
        if os.environ.get("LLMPERF_REQUIRE_LLAMA"):
            pytest.fail(str(exc))
        pytest.skip(f"llama-server is not installed here: {exc}")
