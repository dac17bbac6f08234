"""The profiled run's protocol (servers/profiler.py) against small HTTP servers that answer as
SGLang does, and as broken ones do: a trace written at the step limit is read and summed up
without asking the server to stop; a profiler that writes nothing is asked to stop and then
said to have written nothing; a server without the endpoint is one line; a run that fails
under the profiler is said, not raised. The real SGLang's profiler is tested in
tests/engines/test_sglang_cpu.py."""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_llmperf.servers import profiler

TRACE = {"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 30},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 40, "dur": 10},
]}  # fmt: skip


class Server:
    """``mode``: "sglang" writes the trace when started (its step limit reached during the
    run), "silent" accepts and writes nothing, "absent" answers 404."""

    def __init__(self, mode: str) -> None:
        self.mode, self.calls = mode, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.calls.append((self.path, json.loads(body) if body else None))
                if outer.mode == "absent":
                    self.send_response(404)
                    self.end_headers()
                    self.wfile.write(b'{"detail":"Not Found"}')
                    return
                if self.path == "/start_profile" and outer.mode == "sglang":
                    out = Path(outer.calls[-1][1]["output_dir"])
                    out.mkdir(parents=True, exist_ok=True)
                    (out / "17.5-TP-0.trace.json.gz").write_bytes(
                        gzip.compress(json.dumps(TRACE).encode())
                    )
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok\n")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(request):
    s = Server(request.param)
    yield s
    s.close()


def body(directory: Path) -> dict:
    return {"output_dir": str(directory), "num_steps": 8, "activities": ["CPU"]}


@pytest.mark.parametrize("server", ["sglang"], indirect=True)
def test_a_trace_written_at_the_step_limit_is_summed_up_and_no_stop_is_asked(server, tmp_path):
    ran = []
    got = profiler.capture(
        server.url, {}, body(tmp_path / "p"), tmp_path / "p", lambda: ran.append(1)
    )
    assert ran == [1] and got.problem is None and got.trace.name == "17.5-TP-0.trace.json.gz"
    assert got.summary.ops == (("aten::mm", 30.0), ("aten::add", 10.0))
    assert [path for path, _ in server.calls] == ["/start_profile"]
    assert server.calls[0][1]["num_steps"] == 8


@pytest.mark.parametrize("server", ["silent"], indirect=True)
def test_no_trace_is_asked_to_stop_then_said(server, tmp_path, monkeypatch):
    monkeypatch.setattr(profiler, "FIRST_WAIT_S", 0.3)
    got = profiler.capture(
        server.url, {}, body(tmp_path / "p"), tmp_path / "p", lambda: None, wait_s=0.6
    )
    assert [path for path, _ in server.calls] == ["/start_profile", "/stop_profile"]
    assert got.trace is None and got.problem.startswith(
        f"the server wrote no trace into {tmp_path / 'p'} within 0.6 s"
    )


@pytest.mark.parametrize("server", ["absent"], indirect=True)
def test_a_server_without_the_endpoint_is_one_line_and_nothing_runs(server, tmp_path):
    ran = []
    got = profiler.capture(
        server.url, {}, body(tmp_path / "p"), tmp_path / "p", lambda: ran.append(1)
    )
    assert ran == [] and got.problem == (
        'the server did not start its profiler: /start_profile answered 404: {"detail":"Not Found"}'
    )


@pytest.mark.parametrize("server", ["sglang"], indirect=True)
def test_a_run_that_fails_under_the_profiler_is_said_not_raised(server, tmp_path):
    def dies():
        raise ConnectionError("server closed the connection")

    got = profiler.capture(server.url, {}, body(tmp_path / "p"), tmp_path / "p", dies)
    assert got.problem == "the profiled run failed: ConnectionError: server closed the connection"
