"""The launcher against real processes: readiness, failure with the log's tail, teardown."""

from __future__ import annotations

import socket
import textwrap
import time
import uuid
from pathlib import Path

import httpx
import pytest

from pytest_llmperf.errors import ServerStartError
from pytest_llmperf.profiles_file import load_profiles
from pytest_llmperf.servers import lifecycle
from tests.helpers import FAST_SIM_ARGS, processes_with


def profile(tmp_path: Path, body: str, name: str = "p"):
    path = tmp_path / "profiles.toml"
    path.write_text(textwrap.dedent(body))
    return load_profiles(path).profiles[name]


def test_launch_ready_info_and_stop(tmp_path):
    marker = f"m-{uuid.uuid4().hex[:8]}"
    args = ", ".join(f'"{a}"' for a in FAST_SIM_ARGS)
    p = profile(
        tmp_path,
        f"""
        [profiles.p]
        engine = "sim"
        model = "{marker}"
        args = [{args}, "--api-key", "s3cret", "--enable-metrics"]
        env = {{ NCCL_PROTO = "LL" }}
        ready_timeout_s = 20
    """,
    )
    handle = lifecycle.launch(p, tmp_path / "run")
    try:
        lifecycle.wait_ready(handle)
        handle.info = lifecycle.fetch_info(handle)
        assert handle.info["/server_info"]["model_path"] == marker
        assert httpx.get(handle.base_url + "/v1/models").status_code == 401  # the key is required…
        # …and sent
        assert httpx.get(handle.base_url + "/v1/models", headers=handle.headers).status_code == 200
        cmd = (tmp_path / "run" / "p.cmd").read_text()
        assert cmd.startswith("NCCL_PROTO=LL ") and "--api-key '***'" in cmd and "s3cret" not in cmd
        assert "The server is fired up and ready to roll!" in handle.log_tail()
    finally:
        lifecycle.stop(handle)
    assert handle.process.returncode is not None
    assert processes_with(marker) == []


def test_exit_while_loading_fails_fast_with_the_log_tail(tmp_path):
    p = profile(
        tmp_path,
        """
        [profiles.p]
        engine = "sim"
        args = ["--sim-load-time", "0.4", "--sim-crash-while-loading"]
    """,
    )
    handle = lifecycle.launch(p, tmp_path)
    started = time.monotonic()
    with pytest.raises(ServerStartError) as excinfo:
        lifecycle.wait_ready(handle)
    assert time.monotonic() - started < 10
    message = str(excinfo.value)
    assert "p: the server exited with code 1 while loading" in message
    assert "RuntimeError: simulated crash while loading" in message
    assert f"log: {tmp_path / 'p.log'}" in message


def test_not_ready_in_time_names_the_timeout(tmp_path):
    p = profile(
        tmp_path,
        """
        [profiles.p]
        engine = "command"
        command = ["{python}", "-c", "import time; print('loading forever', flush=True); time.sleep(60)", "{port}"]
        ready_timeout_s = 1
        shutdown_timeout_s = 1
    """,
    )
    handle = lifecycle.launch(p, tmp_path)
    try:
        with pytest.raises(
            ServerStartError, match=r"not ready after 1 s \(ready_timeout_s\)(.|\n)*loading forever"
        ):
            lifecycle.wait_ready(handle)
    finally:
        lifecycle.stop(handle)


def test_stop_kills_a_group_that_ignores_sigterm_and_children_that_left_it(tmp_path):
    marker = f"m-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "stubborn.py"
    script.write_text(
        textwrap.dedent(f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # a child in the group that also ignores SIGTERM, and a grandchild in its own session
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)  # {marker}"
        subprocess.Popen([sys.executable, "-c", code])
        subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        print("children started", flush=True)
        time.sleep(300)
    """)
    )
    p = profile(
        tmp_path,
        f"""
        [profiles.p]
        engine = "command"
        command = ["{{python}}", "{script}", "{marker}", "{{port}}"]
        shutdown_timeout_s = 1
    """,
    )
    handle = lifecycle.launch(p, tmp_path)
    deadline = time.monotonic() + 10
    while len(processes_with(marker)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes_with(marker)) == 3
    started = time.monotonic()
    lifecycle.stop(handle)
    assert time.monotonic() - started < 6
    assert processes_with(marker) == []


def test_a_port_in_use_is_named_in_the_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = profile(
            tmp_path,
            f"""
            [profiles.p]
            engine = "command"
            # The plugin's free port first, then the busy one (the last --port wins): a profile
            # that also hard-codes a port someone else holds.
            command = ["{{python}}", "-m", "pytest_llmperf.sim", "--model-path", "m", "--port", "{{port}}",
                       "--port", "{port}", "--sim-load-time", "0"]
        """,
        )
        handle = lifecycle.launch(p, tmp_path)
        with pytest.raises(
            ServerStartError,
            match=rf"exited with code 1 while loading(.|\n)*Failed to bind "
            rf"127.0.0.1:{port}(.|\n)*Is another server using that port\?",
        ):
            lifecycle.wait_ready(handle)
