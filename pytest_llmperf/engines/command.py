"""Any server, started from the profile's ``command``.

``command`` is run exactly as written, with ``{host}``, ``{port}``, ``{model}``, ``{python}``
and ``{run_dir}`` filled in (``{port}`` is required: the plugin picks a free port). The
server is whatever answers: it is fingerprinted from what it says of itself (SGLang's
/server_info, llama.cpp's /props), else from its command line, and its executable's digest
joins the soft fingerprint. It may be speculative by SGLang's or llama.cpp's flags, or by
``speculative = true``.
"""

from __future__ import annotations

import os
import string
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_llmperf.engines.answers import ReadByAnswers
from pytest_llmperf.engines.base import executable_digest
from pytest_llmperf.errors import ProfileError

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile

#: Placeholders a ``command`` (and its profile's ``model``) may use; the launcher fills them in.
COMMAND_PLACEHOLDERS = ("host", "port", "model", "python", "run_dir")


class CommandEngine(ReadByAnswers):
    name: ClassVar[str] = "command"
    speculative_flags: ClassVar[tuple[str, ...]] = (
        "--speculative-algorithm",
        "-md",
        "--model-draft",
    )

    def check_profile(self, where: str, profile: Profile) -> None:
        if profile.url is not None:
            return  # attached: no command to check
        command = profile.command
        if not command:
            raise ProfileError(
                f"{where}, field 'command': got {list(command) if command is not None else None!r}; "
                'expected a non-empty list of strings (engine = "command" starts exactly this).'
            )
        for arg in [*command, profile.model]:
            for _, placeholder, _, _ in string.Formatter().parse(arg):
                if placeholder is not None and placeholder not in COMMAND_PLACEHOLDERS:
                    raise ProfileError(
                        f"{where}, field 'command': unknown placeholder {{{placeholder}}} in {arg!r}; "
                        f"available: {', '.join('{' + p + '}' for p in COMMAND_PLACEHOLDERS)}."
                    )
        if not any("{port}" in arg for arg in command):
            raise ProfileError(
                f"{where}, field 'command': no {{port}} placeholder, so the server cannot be told the "
                "free port the plugin picked and would never be found ready. Pass it the way the "
                'server takes it, e.g. ["my-server", "--host", "{host}", "--port", "{port}"].'
            )

    def command(self, profile: Profile, host: str, port: int, run_dir: Path) -> list[str]:
        assert profile.command is not None
        values = {
            "host": host,
            "port": str(port),
            "python": profile.interpreter,
            "run_dir": str(run_dir),
        }
        values["model"] = string.Formatter().vformat(profile.model, (), values)
        return [
            os.path.expanduser(string.Formatter().vformat(arg, (), values))
            for arg in profile.command
        ]

    def loading_stage(self, log_path: Path | None) -> str | None:
        from pytest_llmperf.engines.sglang_log import read_stage

        return read_stage(log_path)  # any server may log as SGLang does (a stand-in, a wrapper)

    def binary(self, command: Sequence[str]) -> str | None:
        return executable_digest(command)
