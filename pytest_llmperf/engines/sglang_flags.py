"""SGLang's launch flags: its version for a profile's interpreter, and its flags by version:
rewrite what moved, warn about what misleads, refuse what cannot work.

- ``--tp N`` works only through argparse prefix matching (there is no ``--tp`` flag); it is
  rewritten to ``--tp-size N`` in every version.
- ``--cuda-graph-max-bs``: 0.5.6–0.5.13 the flag; 0.5.14–0.5.19 a deprecated alias of
  ``--cuda-graph-max-bs-decode``; 0.5.20+ removed (argparse: "ambiguous option", exit 2).
  Rewritten to ``--cuda-graph-max-bs-decode`` from 0.5.14 on.
- ``--enable-flashinfer-allreduce-fusion``: deprecated from 0.5.14 in favour of
  ``--flashinfer-allreduce-fusion-backend auto``; rewritten there.
- ``--stream-output`` became ``--incremental-streaming-output`` in 0.5.11 (a deprecated alias
  until 0.5.20, where it is gone: exit 2); either name is rewritten to the one the version has.
- ``--num-continuous-decode-steps`` is parsed but has no effect in any version: a warning.
- ``--speculative-adaptive`` (and its config) exists only from 0.5.11: refused before.
- A speculative server caps running requests at 48 unless ``--max-running-requests`` is set:
  a warning, because above C = 48 the comparison measures the cap, not speculation.

The flag functions are pure: the launcher applies them with the version that
:func:`installed_version` asked the profile's interpreter for.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_llmperf.core.versions import parse_version
from pytest_llmperf.errors import ServerStartError

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile

#: Flags that make a profile speculative; a fair comparison differs from its base only in these.
SPECULATIVE_PREFIX = "--speculative-"
#: /server_info fields that name a server rather than configure it.
SERVER_IDENTITY_KEYS = frozenset(
    {"model_path", "served_model_name", "host", "port", "nccl_port", "random_seed"}
)


@dataclass
class Adapted:
    args: list[str]
    notes: list[str] = field(default_factory=list)  # what was rewritten, and warnings


def _long_flag(arg: str) -> bool:
    return arg.startswith("--")


def _split(
    args: Sequence[str], is_flag: Callable[[str], bool] = _long_flag
) -> list[tuple[str, str | None, bool]]:
    """(flag, value, written with '=') per option; a bare value stays with its flag."""
    out: list[tuple[str, str | None, bool]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if is_flag(arg) and "=" in arg:
            flag, value = arg.split("=", 1)
            out.append((flag, value, True))
        elif is_flag(arg) and i + 1 < len(args) and not is_flag(args[i + 1]):
            out.append((arg, args[i + 1], False))
            i += 1
        else:
            out.append((arg, None, False))
        i += 1
    return out


def _join(parts: list[tuple[str, str | None, bool]]) -> list[str]:
    out: list[str] = []
    for flag, value, eq in parts:
        if value is None:
            out.append(flag)
        elif eq:
            out.append(f"{flag}={value}")
        else:
            out += [flag, value]
    return out


def adapt(args: Sequence[str], version: str | None, *, where: str) -> Adapted:
    """``args`` as SGLang ``version`` understands them, with a note for every change or doubt."""
    v = parse_version(version)
    parts = _split(args)
    notes: list[str] = []
    flags = {flag for flag, _, _ in parts}
    out: list[tuple[str, str | None, bool]] = []
    for flag, value, eq in parts:
        if flag == "--tp":
            notes.append(
                "--tp rewritten to --tp-size (SGLang has no --tp flag; it only matched by prefix)"
            )
            flag = "--tp-size"
        elif flag == "--cuda-graph-max-bs" and v is not None and v >= (0, 5, 14):
            state = "removed in 0.5.20" if v >= (0, 5, 20) else "deprecated since 0.5.14"
            notes.append(
                f"--cuda-graph-max-bs rewritten to --cuda-graph-max-bs-decode ({state}; SGLang {version})"
            )
            flag = "--cuda-graph-max-bs-decode"
        elif flag == "--enable-flashinfer-allreduce-fusion" and v is not None and v >= (0, 5, 14):
            notes.append(
                "--enable-flashinfer-allreduce-fusion rewritten to --flashinfer-allreduce-fusion-backend "
                f"auto (deprecated since 0.5.14; SGLang {version})"
            )
            flag, value, eq = "--flashinfer-allreduce-fusion-backend", "auto", False
        elif flag == "--stream-output" and v is not None and v >= (0, 5, 11):
            state = "removed in 0.5.20" if v >= (0, 5, 20) else "deprecated since 0.5.11"
            notes.append(
                f"--stream-output rewritten to --incremental-streaming-output ({state}; SGLang {version})"
            )
            flag = "--incremental-streaming-output"
        elif flag == "--incremental-streaming-output" and v is not None and v < (0, 5, 11):
            notes.append(
                "--incremental-streaming-output rewritten to --stream-output (its name before 0.5.11; "
                f"SGLang {version})"
            )
            flag = "--stream-output"
        elif flag == "--num-continuous-decode-steps":
            notes.append(
                "warning: --num-continuous-decode-steps has no effect in any SGLang version (a dead flag); "
                "remove it so nobody reads a difference into it"
            )
        elif flag.startswith("--speculative-adaptive") and v is not None and v < (0, 5, 11):
            raise ServerStartError(
                f"{where}: {flag} needs SGLang 0.5.11 or later; this interpreter has SGLang {version}. "
                "Remove the flag or point the profile's `python` at a newer SGLang."
            )
        out.append((flag, value, eq))
    if any(f == "--speculative-algorithm" for f in flags) and "--max-running-requests" not in flags:
        notes.append(
            "warning: speculative SGLang servers cap running requests at 48 unless --max-running-requests "
            "is set; above C = 48 requests queue and the comparison measures the cap. Set "
            "--max-running-requests (and the CUDA-graph max bs) identically on both profiles"
        )
    if v is None and version:
        notes.append(f"SGLang version {version!r} not understood; flags passed unchanged")
    return Adapted(_join(out), notes)


def on_cpu(args: Sequence[str]) -> bool:
    """Whether the flags put SGLang on the CPU (``--device cpu``): no GPU to check or wait for."""
    parts = _split(args)
    return any(flag == "--device" and value == "cpu" for flag, value, _ in parts)


def server_differences(
    base: dict[str, Any], spec: dict[str, Any], *, skip: frozenset[str] | set[str] = frozenset()
) -> list[str]:
    """Resolved server settings that differ between a base server and its speculative
    counterpart, beyond the speculative ones and ``skip``: ``field: base → speculative``."""
    lines = []
    for key in sorted(set(base) | set(spec)):
        if key.startswith("speculative_") or key in skip or key in SERVER_IDENTITY_KEYS:
            continue
        if base.get(key) != spec.get(key):
            lines.append(f"{key}: {json.dumps(base.get(key))} \u2192 {json.dumps(spec.get(key))}")
    return lines


def unfair_differences(
    spec_args: Sequence[str],
    base_args: Sequence[str],
    *,
    is_flag: Callable[[str], bool] = _long_flag,
    speculative: Callable[[str], bool] = lambda flag: flag.startswith(SPECULATIVE_PREFIX),
) -> list[str]:
    """What a speculative profile changes beyond the speculative flags, one line per flag
    (SGLang's flags by default; another engine says what its flags and its speculative ones
    look like)."""

    def options(args: Sequence[str]) -> dict[str, str | None]:
        return {
            flag: value
            for flag, value, _ in _split(args, is_flag)
            if not speculative(flag) and is_flag(flag)
        }

    spec, base = options(spec_args), options(base_args)
    lines = []
    for flag in sorted(set(spec) | set(base)):
        if spec.get(flag, "<unset>") != base.get(flag, "<unset>") or (flag in spec) != (
            flag in base
        ):
            before = (
                "<unset>"
                if flag not in base
                else (base[flag] if base[flag] is not None else "<on>")
            )
            after = (
                "<unset>"
                if flag not in spec
                else (spec[flag] if spec[flag] is not None else "<on>")
            )
            lines.append(f"{flag}: {before} \u2192 {after}")
    return lines


def installed_version(profile: Profile, timeout_s: float = 60.0) -> str:
    """The SGLang version installed for the profile's interpreter (package metadata: no import,
    which would take seconds and need the GPU stack), or a ServerStartError saying what to do."""
    python = profile.interpreter
    probe = (
        "import importlib.metadata as m\ntry:\n    print(m.version('sglang'))\n"
        "except m.PackageNotFoundError:\n    print('')"
    )
    try:
        out = subprocess.run(
            [python, "-c", probe],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, **profile.env},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerStartError(
            f"{profile.name}: could not ask {python!r} for its SGLang version: {exc}. "
            "Set the profile's `python` to the interpreter of SGLang's environment."
        ) from None
    version = out.stdout.strip()
    if out.returncode != 0 or not version:
        raise ServerStartError(
            f"{profile.name}: SGLang is not installed for {python} ({profile.source}, profile {profile.name!r}, "
            "field 'python'). Install it there (pip install 'sglang[all]') or point `python` at the interpreter "
            "of the environment that has it."
            + (f"\n{out.stderr.strip()[-1000:]}" if out.stderr.strip() else "")
        )
    return version
