"""Server lifecycle: launch a profile's server, wait until it is ready, stop it for good.

- The server runs in its own session (process group), so one ``killpg`` reaches every
  process it spawned; descendants that left the group are snapshotted and killed by pid.
- Its output goes to ``<run dir>/<profile>.log`` (never to a pipe nobody drains), and the
  exact command line, with secrets masked, to ``<run dir>/<profile>.cmd``.
- Ready means: the process is alive and the engine's health endpoint answers 200. SGLang binds
  its port only after loading, so "connection refused" means "still loading" while the process
  lives, and an exit while loading fails at once with the log's tail.
- Stop: SIGTERM to the group, a grace period, SIGKILL to the group and to every snapshotted
  descendant, then reap. ``--llm-server-url`` attaches instead: nothing launched, nothing killed.
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from pytest_llmperf import engines
from pytest_llmperf.errors import ProfileError, ServerDiedError, ServerError, ServerStartError
from pytest_llmperf.files import confined, write_text
from pytest_llmperf.profiles import Profile
from pytest_llmperf.secrets import Redactor, resolve
from pytest_llmperf.servers import readiness
from pytest_llmperf.servers.logs import RedactingLog

LOG_TAIL_LINES = 25
_LIVE: dict[int, ServerHandle] = {}  # servers this process launched and has not stopped


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def build_command(profile: Profile, host: str, port: int, run_dir: Path) -> list[str]:
    """The exact command line that starts ``profile``'s server on ``host:port``."""
    return engines.of(profile).command(profile, host, port, run_dir)


@dataclass
class ServerHandle:
    """A running (or attached) server and everything needed to reproduce and stop it."""

    profile: Profile
    base_url: str
    launch_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    process: subprocess.Popen | None = None
    command: list[str] = field(default_factory=list)
    log_path: Path | None = None
    started_at: float = field(default_factory=time.monotonic)
    info: dict[str, Any] = field(default_factory=dict)
    died: str | None = None  # why it is no longer usable
    #: Stopped for good: a second stop does nothing (its pid may belong to another process by
    #: then).
    stopped: bool = False
    #: Whether it serves Prometheus /metrics that servers/metrics.py can read.
    serves_metrics: bool = False
    #: Stops the server if pytest dies without stopping it (servers/watchdog.py).
    watchdog: subprocess.Popen | None = field(default=None, repr=False)
    #: What the launcher changed in or warns about the profile's flags (SGLang version adaptation).
    notes: list[str] = field(default_factory=list)
    sglang_version: str | None = None
    #: /dev/shm files the server's processes hold (host/shm.py): removed if they outlive it.
    shm_files: set[str] = field(default_factory=set)
    #: /dev/shm as it was at launch, and when (wall clock): what appears after may be the server's.
    shm_at_launch: set[str] = field(default_factory=set)
    launched_at: float = field(default_factory=time.time)
    #: What the client sends as ``Authorization: Bearer`` (never written anywhere).
    api_key: str | None = field(default=None, repr=False)
    #: Masks this launch's secrets in everything written about it.
    redactor: Redactor = field(default_factory=Redactor, repr=False)
    #: Copies the server's output to its log with the secrets masked (None: straight to the file).
    log_writer: RedactingLog | None = field(default=None, repr=False)
    #: Behind a router: its workers (launched ones are stopped with it; servers/router.py).
    workers: list[ServerHandle] = field(default_factory=list)
    #: How the servers are arranged (router, policy, workers, DP size): hard fingerprint keys.
    topology: dict[str, Any] = field(default_factory=dict)
    #: launcher = "srun": the job step's name, whether srun requested the job, rank 0's
    #: ``JOB.STEP`` once known (servers/srun.py).
    slurm: dict[str, Any] | None = None

    def note_shm_files(self) -> None:
        """Remember the /dev/shm files the server's process tree holds now."""
        import psutil

        from pytest_llmperf.host import shm

        if self.process is None:
            return
        try:
            tree = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        self.shm_files |= shm.files_of([self.process.pid, *(p.pid for p in tree)])

    @property
    def attached(self) -> bool:
        return self.process is None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def describe(self) -> dict[str, Any]:
        """How the server ran, for the results JSON, with every secret masked."""
        profile, redactor = self.profile, self.redactor
        return redactor.data(
            {
                "engine": profile.engine,
                "model": profile.model,
                "api": profile.api,
                "args": redactor.command(profile.args),
                "env": redactor.env(profile.env),
                "launch_id": self.launch_id,
                "attached": self.attached,
                "base_url": self.base_url,
                "log": str(self.log_path) if self.log_path else None,
                "server_info": self.info,
                **({"topology": self.topology} if self.topology else {}),
                **(
                    {"workers": [w.describe_worker() for w in self.workers]} if self.workers else {}
                ),
            }
        )

    def describe_worker(self) -> dict[str, Any]:
        """One worker behind a router: its URL, version and what it says of itself that
        decides its speed (its engine reads it)."""
        engine = engines.of(self.profile).reading(self.info)
        return self.redactor.data(
            {
                "url": self.base_url,
                "version": engine.server_version(self.info),
                "server_info": engine.summary(self.info),
                "log": str(self.log_path) if self.log_path else None,
            }
        )

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if self.log_writer is not None:
            self.log_writer.drain(timeout_s=1.0 if self.exit_code() is not None else 0.2)
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        with open(self.log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
        # SGLang 0.5.23 redraws progress bars with \r: each redraw is its own line here.
        all_lines = [ln for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
        return "\n".join("    " + ln for ln in all_lines[-lines:])

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def ensure_alive(
        self,
        when: str,
        *,
        error: type[ServerError] = ServerDiedError,
        with_command: bool = False,
        who: str = "",
    ) -> None:
        """Raise ``error`` (ServerDiedError: it died while it served; ServerStartError, with
        its command: while it started), with the log's tail, if the launched process (``who``
        it is, in the message) or one of the launched workers behind it has exited."""
        code = self.exit_code()
        if code is not None:
            raise self.failure(
                error, f"{who}exited with code {code} {when}", with_command=with_command
            )
        for worker in self.workers:
            code = worker.exit_code()
            if code is not None:
                self.died = f"its worker {worker.base_url} exited with code {code} {when}"
                raise worker.failure(error, f"exited with code {code} {when}")

    def failure(
        self, error: type[ServerError], what: str, *, with_command: bool = False
    ) -> ServerError:
        """Mark the server unusable and build the error: what happened, where its log is, its tail."""
        self.died = what
        command = (
            f"  command: {shlex.join(self.redactor.command(self.command))}\n"
            if with_command
            else ""
        )
        return error(
            f"{self.profile.name}: the server {what}.\n{command}"
            f"  log: {self.log_path}\n  last lines:\n{self.log_tail()}"
        )


def launch(
    profile: Profile,
    run_dir: Path,
    *,
    command_for: Callable[[str, int], list[str]] | None = None,
    log_name: str | None = None,
) -> ServerHandle:
    """Start the profile's server in its own process group; return without waiting.

    ``command_for(host, port)`` starts another program for the profile instead (SGLang's router
    in front of its workers: servers/router.py), logged as ``log_name``.

    ``${NAME}`` references are taken from the environment here, and only here: the handle keeps
    the profile as written, and every file about the launch has the secrets masked."""
    engine = engines.of(profile)
    host = profile.host
    port = free_port(host)
    notes: list[str] = []
    version = None
    if command_for is None:
        prepared = engine.prepare(profile)
        profile, notes, version = prepared.profile, list(prepared.notes), prepared.version
    try:
        resolved = resolve(profile)
    except ProfileError as exc:
        raise ServerStartError(str(exc)) from None
    expanded, redactor = resolved.profile, resolved.redactor
    launch_id = uuid.uuid4().hex[:12]
    name = log_name or profile.name
    env = engine.environment(expanded)
    slurm: dict[str, Any] | None = None
    if command_for is not None:
        command = command_for(host, port)
    elif profile.launcher == "srun":  # the GPUs are on the allocation's nodes: no preflight here
        command, slurm = _srun_command(expanded, profile, host, port, run_dir, name, launch_id, env)
    else:
        notes += engine.preflight(profile, expanded.env)
        command = build_command(expanded, host, port, run_dir)
    log_path = confined(run_dir, f"{name}.log")
    run_dir.mkdir(parents=True, exist_ok=True)
    _write_command(confined(run_dir, f"{name}.cmd"), command, expanded, redactor)
    from pytest_llmperf.host import shm

    shm_at_launch, launched_at = shm.snapshot(), time.time()
    process, writer = _spawn(name, command, env, log_path, redactor)
    url_host = f"[{host}]" if ":" in host else host
    handle = ServerHandle(
        profile,
        f"http://{url_host}:{port}",
        launch_id=launch_id,
        slurm=slurm,
        process=process,
        command=command,
        log_path=log_path,
        notes=notes,
        sglang_version=version,
        shm_at_launch=shm_at_launch,
        launched_at=launched_at,
        api_key=resolved.api_key,
        redactor=redactor,
        log_writer=writer,
    )
    _keep_track(handle, run_dir)
    return handle


def _srun_command(
    expanded: Profile,
    profile: Profile,
    host: str,
    port: int,
    run_dir: Path,
    name: str,
    launch_id: str,
    env: dict[str, str],
) -> tuple[list[str], dict[str, Any]]:
    """One rank per node through Slurm: the srun command (``env`` gets what it needs) and what
    the handle keeps to find rank 0 and cancel the step."""
    from pytest_llmperf.servers import srun

    command, extra = srun.wrap(
        build_command(expanded, host, port, run_dir),
        profile,
        run_dir,
        name,
        launch_id,
        dist_port=free_port(host),
    )
    env.update(extra)
    slurm = {
        "name": name,
        "run_dir": run_dir,
        "port": port,
        "requested": not srun.in_allocation(),
        "step_name": srun.step_name(profile, launch_id),
        "step": None,
    }
    return command, slurm


def _keep_track(handle: ServerHandle, run_dir: Path) -> None:
    """However pytest ends, the server ends with it: a watchdog process, the exit hook's list,
    and a pid record the next run checks (servers/leftovers.py)."""
    from pytest_llmperf.servers import leftovers, watchdog

    assert handle.process is not None
    handle.watchdog = watchdog.start(handle.process.pid, handle.profile.shutdown_timeout_s)
    _LIVE[handle.process.pid] = handle
    leftovers.remember(run_dir, handle)


def _write_command(path: Path, command: list[str], expanded: Profile, redactor: Redactor) -> None:
    """``<run dir>/<profile>.cmd``: the environment the profile adds and the command, masked."""
    env_lines = "".join(
        f"{k}={shlex.quote(v)} " for k, v in sorted(redactor.env(expanded.env).items())
    )
    write_text(path, env_lines + shlex.join(redactor.command(command)) + "\n")


def _spawn(
    name: str, command: list[str], env: dict[str, str], log_path: Path, redactor: Redactor
) -> tuple[subprocess.Popen, RedactingLog | None]:
    """The server's process, in a session of its own, its output going to ``log_path``: with
    secrets to mask through a pipe that a thread copies, masked, to the log (SGLang logs its
    server_args, --api-key included); otherwise straight to the file."""
    writer = RedactingLog(log_path, redactor) if redactor else None
    log = open(log_path, "wb") if writer is None else None
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log if writer is None else writer.write_fd,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )
    except OSError as exc:
        if writer is not None:
            writer.abandon()
        raise ServerStartError(f"{name}: could not start {command[0]!r}: {exc}") from None
    finally:
        if log is not None:
            log.close()
    if writer is not None:
        writer.start()
    return process, writer


def wait_ready(
    handle: ServerHandle,
    timeout_s: float | None = None,
    poll_s: float = 0.25,
    progress: Callable[[str], None] | None = None,
) -> None:
    """Block until the health endpoint answers 200; fail fast if the process exits.

    ``progress`` gets ``"<profile>: <stage from the log>, <seconds> s"`` about once a second,
    from the second second on (a server that is up at once shows nothing).
    """
    profile = handle.profile
    timeout_s = profile.ready_timeout_s if timeout_s is None else timeout_s
    last_report = time.monotonic() + 1.0
    url = handle.base_url + profile.readiness_path

    def where() -> str:
        nonlocal url
        if handle.slurm is not None and handle.slurm["step"] is None:
            url = _find_rank0(handle) or url  # SGLang binds only after loading: until then, none
        return url

    def still_loading() -> None:
        nonlocal last_report
        elapsed = time.monotonic() - handle.started_at
        when = f"while loading ({elapsed:.1f} s after launch)"
        handle.ensure_alive(when, error=ServerStartError, with_command=True)
        if progress is not None and time.monotonic() - last_report >= 1.0:
            last_report = time.monotonic()
            stage = engines.of(profile).loading_stage(handle.log_path) or "starting"
            progress(f"{profile.name}: {stage}, {elapsed:.0f} s")

    problem = readiness.poll(
        where, timeout_s=timeout_s, headers=handle.headers, poll_s=poll_s, between=still_loading
    )
    if problem is not None:
        raise handle.failure(
            ServerStartError,
            f"was not ready after {timeout_s:g} s (ready_timeout_s): {url} never answered 200",
            with_command=True,
        )
    handle.note_shm_files()


def _find_rank0(handle: ServerHandle) -> str | None:
    """launcher = "srun": once rank 0 said where it runs, its step, and its URL when the server
    listens on every interface (the health URL to poll; None while rank 0 has not started)."""
    from pytest_llmperf.servers import srun

    assert handle.slurm is not None
    found = srun.rank0(handle.slurm["run_dir"], handle.slurm["name"])
    if found is None:
        return None
    address, handle.slurm["step"] = found
    if handle.profile.host in ("0.0.0.0", "::"):
        host = f"[{address}]" if ":" in address else address
        handle.base_url = f"http://{host}:{handle.slurm['port']}"
    return handle.base_url + handle.profile.readiness_path


def wait_for_health(url: str, path: str = "/health", timeout_s: float = 20.0) -> None:
    """Poll ``url + path`` until it answers 200 (for servers started outside the launcher)."""
    if readiness.poll(url + path, timeout_s=timeout_s, poll_s=0.1, request_timeout_s=5.0):
        raise ServerStartError(f"{url}{path} did not answer 200 within {timeout_s:g} s")


def fetch_info(handle: ServerHandle) -> dict[str, Any]:
    """What the server says about itself: SGLang's /server_info, llama.cpp's /props, /v1/models."""
    info: dict[str, Any] = {}
    with httpx.Client(base_url=handle.base_url, timeout=10.0, headers=handle.headers) as client:
        for path in engines.of(handle.profile).info_paths():
            try:
                resp = client.get(path)
            except httpx.HTTPError:
                continue
            if resp.status_code == 200 and resp.headers.get("content-type", "").startswith(
                "application/json"
            ):
                try:
                    info[path] = handle.redactor.data(resp.json())
                except ValueError:
                    continue  # not JSON after all: the server describes itself elsewhere
                if path in ("/server_info", "/get_server_info"):
                    break  # SGLang: the full resolved args and version; the deprecated alias adds nothing
    return info


def attach(profile: Profile, url: str, *, source: str = "--llm-server-url") -> ServerHandle:
    """Use a server someone else runs (at ``url``, named by ``source``): wait until its health
    endpoint answers 200, up to ``wait_s`` (none: one try), never launch or stop it."""
    try:
        resolved = resolve(profile)
    except ProfileError as exc:
        raise ServerStartError(str(exc)) from None
    handle = ServerHandle(
        profile, url.rstrip("/"), api_key=resolved.api_key, redactor=resolved.redactor
    )
    wait_s = profile.ready_timeout_s if source == "url" else 0.0
    problem = readiness.poll(
        handle.base_url + profile.readiness_path,
        timeout_s=wait_s,
        headers=handle.headers,
        poll_s=1.0,
    )
    if problem is not None:
        waited = (
            f" after {profile.ready_timeout_s:g} s (ready_timeout_s)" if source == "url" else ""
        )
        raise ServerStartError(f"{profile.name}: {source} {url} {problem}{waited}")
    return handle


def stop(handle: ServerHandle, grace_s: float | None = None) -> None:
    """SIGTERM the group (SGLang: its launcher), wait ``shutdown_timeout_s``, SIGKILL whatever is
    left, reap, and remove the /dev/shm files it left (host/shm.py). A router first, then
    each of its launched workers."""
    try:
        _stop_one(handle, grace_s)
    finally:
        for worker in handle.workers:
            _stop_one(worker, grace_s)
            handle.notes += worker.notes


def _stop_one(handle: ServerHandle, grace_s: float | None) -> None:
    import psutil  # lazily: only a launched server needs it

    process = handle.process
    if process is None or handle.stopped:
        return
    handle.stopped = True
    grace_s = handle.profile.shutdown_timeout_s if grace_s is None else grace_s
    if handle.slurm is not None:  # every rank on every node, not only the local srun
        from pytest_llmperf.servers import srun

        slurm = handle.slurm
        if slurm["step"] is None:
            _find_rank0(handle)
        handle.notes += srun.cancel(
            slurm["step"], slurm["requested"], slurm["step_name"], timeout_s=grace_s + 30
        )
    handle.note_shm_files()
    try:
        # Snapshot before signalling: children that escaped the group (setsid, reparented to
        # init) can only be found now. psutil.Process objects also guard against pid reuse.
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        descendants = []
    deadline = time.monotonic() + grace_s
    engine = engines.of(handle.profile)
    if not engine.stop_signal_to_group():
        try:
            os.kill(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    else:
        _signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
        # What is left of the grace (at most 5 s) for the rest of the group to exit on its own.
        psutil.wait_procs(descendants, timeout=max(0.0, min(5.0, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        pass
    _signal_group(process.pid, signal.SIGKILL)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILLed above
        pass
    for proc in descendants:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(descendants, timeout=10)
    _LIVE.pop(process.pid, None)
    if handle.watchdog is not None:
        from pytest_llmperf.servers import watchdog

        watchdog.release(handle.watchdog)
        handle.watchdog = None
    if handle.log_writer is not None:
        handle.log_writer.drain(timeout_s=2.0)
    from pytest_llmperf.servers import leftovers

    leftovers.forget(handle)
    if engine.leaves_shm:
        from pytest_llmperf.host import shm

        shm.remove_leftovers(
            handle.shm_files | shm.created_since(handle.shm_at_launch, handle.launched_at)
        )
    if handle.slurm is None:  # an srun's ranks ran on the allocation's nodes
        handle.notes += engine.after_stop(
            handle.profile, [process.pid, *(p.pid for p in descendants)]
        )


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@atexit.register
def _stop_leftovers() -> None:
    """Last resort (pytest killed between setup and teardown): no server outlives us."""
    for handle in list(_LIVE.values()):
        stop(handle, grace_s=2.0)
