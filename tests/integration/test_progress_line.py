"""The live measurement line, end to end: pytest in a pseudo-terminal rewrites one line with
the run, the requests done and in flight and the tok/s so far; in a pipe (CI) a run shorter than
30 s prints one plain line, not one a second."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

from tests.helpers import THROUGHPUT_SUITE, write_profiles

LINE = re.compile(
    r"sim-base C=2: run (\d)/2, (\d+)/(\d+) requests done, (\d+) in flight, [\d,]+ tok/s"
)


def project(pytester) -> None:
    # About 4 s per run: 40 requests of 256 tokens at C = 2 on the sim at speed 20.
    write_profiles(pytester, concurrency="[2]", runs=2, output_len=256, min_requests=40)
    pytester.makepyfile(test_perf=THROUGHPUT_SUITE)


def run_in(pytester, *, tty: bool) -> str:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--perf-update",
               "--perf-update-runs", "2"]  # fmt: skip
    if not tty:
        done = subprocess.run(
            command, cwd=pytester.path, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout[-2000:]
        return done.stdout
    main, secondary = pty.openpty()
    proc = subprocess.Popen(
        command, cwd=pytester.path, stdin=secondary, stdout=secondary, stderr=secondary
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode(errors="replace")


def test_on_a_terminal_the_measurement_line_is_rewritten_in_place(pytester):
    project(pytester)
    out = run_in(pytester, tty=True)
    shown = [m.groups() for m in LINE.finditer(out)]
    assert len(shown) >= 4, out[-3000:]  # about once a second over two runs of ~4 s
    assert {run for run, *_ in shown} == {"1", "2"}
    for _, done, total, in_flight in shown:
        assert int(total) == 40 and int(done) <= 40 and int(in_flight) <= 2
    # Time left: in the run, and in the session (no golden yet: this level's runs only).
    assert re.search(r"about \d+ s left in this run, about \d+ s in the session", out), out[-2000:]
    # Rewritten in place: the updates are separated by carriage returns, not new lines.
    assert out.count("\r") >= len(shown) - 1
    assert not re.search(r"requests done[^\r]*\n[^\r]*requests done", out)


def test_without_a_terminal_a_short_run_prints_one_plain_line(pytester):
    project(pytester)
    out = run_in(pytester, tty=False)
    assert len(LINE.findall(out)) == 1, out  # the first tick; the next would be 30 s later
    assert "\r" not in out
