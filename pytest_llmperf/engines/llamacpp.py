"""llama.cpp's ``llama-server`` as a named engine.

A profile names the executable (``binary``: a path relative to the profiles file, or a name on
PATH) and a GGUF ``model``; the plugin adds ``-m``, ``--host`` and ``--port``. llama.cpp answers
``/health`` with 503 while it loads and 200 once it serves, speaks the OpenAI API, and reports
its slots and context on ``/props`` (used for the fingerprint).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from pytest_llmperf.errors import ServerStartError
from pytest_llmperf.profiles import Profile


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


def command(profile: Profile, host: str, port: int) -> list[str]:
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


def server_args(props: dict[str, Any]) -> dict[str, Any]:
    """What ``/props`` says decides speed: the slots (parallel sequences) and the context size."""
    settings = props.get("default_generation_settings") or {}
    return {"total_slots": props.get("total_slots"), "n_ctx": settings.get("n_ctx")}
