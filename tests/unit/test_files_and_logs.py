"""Paths confined to their directory, writability tried for real, and the masking log copier
(a real pipe and thread, no process)."""

from __future__ import annotations

import os
import time

import pytest

from pytest_llmperf.files import OutsideDirectoryError, check_writable, confined, write_atomic
from pytest_llmperf.secrets import Redactor
from pytest_llmperf.servers.logs import MAX_LINE, RedactingLog


def test_confined_accepts_names_and_refuses_every_escape(tmp_path):
    assert confined(tmp_path, "sim-base", "sim.json") == tmp_path / "sim-base" / "sim.json"
    for parts in (("..", "x"), ("/etc", "passwd"), ("a", "..", "..", "b"), (".",), ("",)):
        with pytest.raises(OutsideDirectoryError, match="outside"):
            confined(tmp_path, *parts)
    (tmp_path / "link").symlink_to("/tmp")  # a symlink out is an escape too
    with pytest.raises(OutsideDirectoryError):
        confined(tmp_path, "link", "x.json")


def test_check_writable_says_why(tmp_path):
    (tmp_path / "file").write_text("x")
    assert check_writable(tmp_path / "new" / "deeper" / "out.json") is None  # creatable
    assert check_writable(tmp_path / "dir", directory=True) is None
    assert check_writable(tmp_path) == "it is a directory; give a file path"
    assert check_writable(tmp_path / "file", directory=True) == "it is a file, not a directory"
    assert check_writable(tmp_path / "file" / "out.json") == (
        f"{tmp_path / 'file'} is a file, so no directory can be created under it"
    )
    assert not list(tmp_path.glob(".llmperf-probe-*"))  # the probe is removed


def test_write_atomic_honours_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "a.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640


def copy_through(chunks: list[bytes], secrets: list[str], tmp_path) -> str:
    log = RedactingLog(tmp_path / "server.log", Redactor(secrets))
    write_fd = os.dup(log.write_fd)  # the "server's" copy of the write end
    log.start()
    for chunk in chunks:
        os.write(write_fd, chunk)
        time.sleep(0.01)  # separate reads
    os.close(write_fd)
    log.drain(timeout_s=5)
    return (tmp_path / "server.log").read_bytes().decode()  # \r kept as written


def test_a_secret_split_across_reads_is_masked(tmp_path):
    text = copy_through(
        [b"server_args={'api_key': 'sk-sec", b"ret-1234', 'tp': 1}\n", b"loading 50%\r", b"done"],
        ["sk-secret-1234"],
        tmp_path,
    )
    assert text == "server_args={'api_key': '***', 'tp': 1}\nloading 50%\rdone"


def test_a_line_longer_than_the_buffer_is_written_not_held(tmp_path):
    text = copy_through([b"x" * (MAX_LINE + 10), b"\nend\n"], ["unused-secret"], tmp_path)
    assert text == "x" * (MAX_LINE + 10) + "\nend\n"
