"""A server's output, copied to its log file with the launch's secrets masked.

SGLang logs its resolved ``server_args`` at startup, ``--api-key`` included, and any server may
echo its environment in a traceback: with secrets to mask, the server writes into a pipe and a
thread copies what it reads to ``<run dir>/<profile>.log`` line by line (``\\n`` or the ``\\r``
of a progress bar), masked. The thread keeps reading until the last writer (the server and any
child of it) has gone, so the server never blocks on a full pipe.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pytest_llmperf.secrets import Redactor

#: Bytes held back waiting for the end of a line; a longer line is masked and written in pieces.
MAX_LINE = 64 * 1024


class RedactingLog:
    def __init__(self, path: Path, redactor: Redactor) -> None:
        self.path = path
        self.redactor = redactor
        self.read_fd, self.write_fd = os.pipe()
        self._file = open(path, "wb")
        self._thread = threading.Thread(
            target=self._copy, name=f"llmperf-log-{path.name}", daemon=True
        )

    def start(self) -> None:
        """The server has its copy of the write end: close ours, so the pipe ends with the server."""
        os.close(self.write_fd)
        self._thread.start()

    def abandon(self) -> None:
        """The server never started: close everything."""
        for fd in (self.read_fd, self.write_fd):
            os.close(fd)
        self._file.close()

    def drain(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) for the copy to catch up with a server that has exited."""
        self._thread.join(timeout_s)

    def _copy(self) -> None:
        carry = b""
        try:
            while data := os.read(self.read_fd, MAX_LINE):
                data = carry + data
                cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
                if cut == 0 and len(data) < MAX_LINE:
                    carry = data
                    continue
                cut = cut or len(data)
                self._write(data[:cut])
                carry = data[cut:]
            if carry:
                self._write(carry)
        finally:
            os.close(self.read_fd)
            self._file.close()

    def _write(self, data: bytes) -> None:
        text = data.decode("utf-8", "surrogateescape")
        self._file.write(self.redactor.text(text).encode("utf-8", "surrogateescape"))
        self._file.flush()
