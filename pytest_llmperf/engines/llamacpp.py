"""llama.cpp's ``llama-server``.

A profile names the executable (``binary``: a path relative to the profiles file, or a name on
PATH) and a GGUF ``model``; the plugin adds ``-m``, ``--host`` and ``--port``. llama.cpp answers
``/health`` with 503 while it loads and 200 once it serves, speaks the OpenAI API (its stream
counts tokens only in the final event), and reports its slots and context on ``/props`` (the
fingerprint). Two builds of one llama.cpp commit report the same version but may serve at
different speeds: the executable's digest joins the soft fingerprint.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pytest_llmperf.engines.base import Engine, executable_digest
from pytest_llmperf.errors import ServerStartError

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile


class LlamaCppEngine(Engine):
    name: ClassVar[str] = "llamacpp"
    health_path: ClassVar[str] = "/health"
    speculative_flags: ClassVar[tuple[str, ...]] = ("-md", "--model-draft")
    reserved_flags: ClassVar[tuple[str, ...]] = ("--port", "--host", "-m", "--model")

    def command(self, profile: Profile, host: str, port: int, run_dir: Path) -> list[str]:
        return [
            executable(profile),
            "-m",
            model_path(profile),
            "--host",
            host,
            "--port",
            str(port),
            *profile.args,
        ]

    def binary(self, command: Sequence[str]) -> str | None:
        return executable_digest(command)

    def info_paths(self) -> tuple[str, ...]:
        return ("/props", "/v1/models")


def executable(profile: Profile) -> str:
    """The ``binary`` the profile names, resolved; a ServerStartError says what to fix."""
    binary = profile.path_field(profile.binary, command=True)
    found = shutil.which(binary)
    if found is None:
        where = "is not an executable file" if os.sep in binary else "is not on PATH"
        raise ServerStartError(
            f"{profile.name}: llama-server {binary} {where} ({profile.source}, profile {profile.name!r}, "
            "field 'binary'). Build llama.cpp's llama-server and set `binary` to its path (relative paths are "
            "relative to the profiles file)."
        )
    return found


def model_path(profile: Profile) -> str:
    model = profile.path_field(profile.model)
    if not os.path.isfile(model):
        raise ServerStartError(
            f"{profile.name}: the GGUF model {model} does not exist ({profile.source}, profile {profile.name!r}, "
            "field 'model'). Set `model` to a .gguf file (relative paths are relative to the profiles file)."
        )
    return model
