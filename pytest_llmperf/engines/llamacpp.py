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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmperf.engines.base import Engine, executable_digest
from pytest_llmperf.errors import ServerStartError

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile


#: The draft model's flag, by llama.cpp release (``--spec-draft-model`` is the newest name).
DRAFT_MODEL_FLAGS = ("-md", "--model-draft", "--spec-draft-model")


class LlamaCppEngine(Engine):
    name: ClassVar[str] = "llamacpp"
    health_path: ClassVar[str] = "/health"
    speculative_flags: ClassVar[tuple[str, ...]] = DRAFT_MODEL_FLAGS + ("--spec-type",)
    reserved_flags: ClassVar[tuple[str, ...]] = ("--port", "--host", "-m", "--model")
    # Its native /completion gives token ids and top_logprobs; its OpenAI route gives text.
    greedy_api: ClassVar[str | None] = "llamacpp"

    def command(self, profile: Profile, host: str, port: int, run_dir: Path) -> list[str]:
        return [
            executable(profile),
            "-m",
            model_path(profile),
            "--host",
            host,
            "--port",
            str(port),
            *draft_model_resolved(profile),
        ]

    def unfair_differences(self, spec_args: Sequence[str], base_args: Sequence[str]) -> list[str]:
        from pytest_llmperf.engines.sglang_flags import unfair_differences

        return unfair_differences(
            spec_args, base_args, is_flag=_is_flag, speculative=_is_speculative
        )

    def binary(self, command: Sequence[str]) -> str | None:
        return executable_digest(command)

    def info_paths(self) -> tuple[str, ...]:
        return ("/props", "/v1/models")

    # -- what the server says of itself (/props) ----------------------------------------------

    def fingerprint_args(
        self, info: Mapping[str, Any], profile: Profile
    ) -> tuple[dict[str, Any], dict[str, Any], frozenset[str]]:
        """What ``/props`` says decides speed: the slots (parallel sequences) and the context
        size; the command line where it said nothing."""
        props = info.get("/props") or {}
        if not isinstance(props, dict) or not props:
            return super().fingerprint_args(info, profile)
        settings = props.get("default_generation_settings") or {}
        return (
            {"total_slots": props.get("total_slots"), "n_ctx": settings.get("n_ctx")},
            {},
            frozenset(),
        )

    def server_version(self, info: Mapping[str, Any]) -> str | None:
        props = info.get("/props") or {}
        build = props.get("build_info") if isinstance(props, dict) else None
        return str(build) if build else None

    def running_at_once(self, info: Mapping[str, Any]) -> int | None:
        """llama.cpp's slots (``-np``, ``total_slots`` on ``/props``)."""
        props = info.get("/props") or {}
        slots = props.get("total_slots") if isinstance(props, dict) else None
        return slots if isinstance(slots, int) and slots > 0 else None

    def context_per_request(self, info: Mapping[str, Any]) -> int | None:
        """llama.cpp's context per slot (``-c`` divided by ``-np``)."""
        props = info.get("/props") or {}
        settings = props.get("default_generation_settings") if isinstance(props, dict) else None
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        return n_ctx if isinstance(n_ctx, int) and n_ctx > 0 else None


def _is_flag(arg: str) -> bool:
    """llama-server's flags: ``--long`` and ``-short`` (``-md``), never a negative number."""
    return arg.startswith("-") and not arg[1:].replace(".", "", 1).isdigit()


def _is_speculative(flag: str) -> bool:
    """The draft's and the speculation's own flags (``--spec-*``, ``--draft-*``, and the short
    forms of the draft model's: ``-md``, ``-td``, ``-ngld``, …, which all end in ``d``)."""
    long_draft = flag.startswith(("--spec-", "--draft")) or flag.endswith("-draft")
    return flag in DRAFT_MODEL_FLAGS or long_draft or flag in SHORT_DRAFT_FLAGS


#: The short forms of llama-server's draft options (``llama-server --help``, speculative params).
SHORT_DRAFT_FLAGS = frozenset(
    "-md -td -tbd -Cd -Crd -Cbd -otd -cmoed -ncmoed -hfd -hfrd -devd -ngld -ctkd -ctvd".split()
)


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


def draft_model_resolved(profile: Profile) -> list[str]:
    """The profile's args, with the draft model's path (``--model-draft FILE``) relative to the
    profiles file, as ``model`` is, and checked: a missing draft says so before the launch."""
    args = list(profile.args)
    for k, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag not in DRAFT_MODEL_FLAGS or (not eq and k + 1 >= len(args)):
            continue
        path = profile.path_field(value if eq else args[k + 1])
        if not os.path.isfile(path):
            raise ServerStartError(
                f"{profile.name}: the draft model {path} does not exist ({profile.source}, profile "
                f"{profile.name!r}, field 'args', {flag}). Point {flag} at a .gguf file that shares "
                "the model's vocabulary (relative paths are relative to the profiles file)."
            )
        if eq:
            args[k] = f"{flag}={path}"
        else:
            args[k + 1] = path
    return args
