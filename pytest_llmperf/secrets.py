"""Secrets: where a profile takes them from, and how every file the plugin writes is kept clean
of them.

A profile never needs to hold a secret: ``${NAME}`` in ``env`` values, ``args`` and ``command``
is taken from the environment at launch, and ``api_key_env`` names the variable whose value the
client sends as ``Authorization: Bearer``. Whatever the source, a :class:`Redactor` knows every
secret value of a launch (the values of secret-named ``env`` keys and flags, every expanded
secret-named variable, the API key) and replaces each occurrence with ``***`` in the command
line, the server's log as it is written, ``/server_info``, the results JSON and the reports.

A name is secret when its last word is key, token, secret, password, … (``HF_TOKEN``,
``OPENAI_API_KEY``, ``--admin-api-key``, ``ssl_keyfile_password``), but not ``--max-total-tokens``
or ``speculative_token_map``; only string values are masked, so a numeric setting that happens to
end in ``_token`` keeps its value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pytest_llmperf.errors import ProfileError
from pytest_llmperf.profiles import Profile

MASK = "***"
#: A secret-named variable whose value is shorter than this is not masked in free text (a
#: one-character "secret" would mask every occurrence of that character); its own field is.
MIN_TEXT_SECRET_LEN = 4
_LAST_WORDS = frozenset({"key", "token", "secret", "password", "passwd", "apikey", "credentials"})
_ANY_WORDS = frozenset({"secret", "password", "passwd", "apikey", "credentials", "credential"})
_WORD = re.compile(r"[^a-z0-9]+")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def is_secret_name(name: str) -> bool:
    """``HF_TOKEN``, ``api_key``, ``--admin-api-key``, ``DB_PASSWORD``: yes; ``max_total_tokens``,
    ``tokenizer_path``, ``speculative_token_map``: no."""
    words = [w for w in _WORD.split(name.lower()) if w]
    return bool(words) and (words[-1] in _LAST_WORDS or not _ANY_WORDS.isdisjoint(words))


def references(value: str) -> list[str]:
    """The ``${NAME}`` variables a profile value takes from the environment."""
    return _REFERENCE.findall(value)


def expand(value: str, environ: Mapping[str, str], where: str) -> str:
    """``value`` with every ``${NAME}`` replaced from ``environ``; a missing one is an error
    naming the profile field (``where``) and the variable."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise KeyError(
                f"{where}: ${{{name}}} is not set in the environment; export {name} "
                "before running pytest (or remove the reference)."
            )
        return environ[name]

    return _REFERENCE.sub(one, value)


def _holds_secret(value: Any) -> bool:
    """A non-empty string that is not just a ``${NAME}`` reference."""
    return isinstance(value, str) and bool(value) and not _REFERENCE.fullmatch(value)


class Redactor:
    """Every secret value of one launch, and the means to mask them wherever they appear."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is masked whole.
        self.values = sorted(
            {v for v in values if len(v) >= MIN_TEXT_SECRET_LEN}, key=len, reverse=True
        )

    def __bool__(self) -> bool:
        return bool(self.values)

    def text(self, text: str) -> str:
        for value in self.values:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def data(self, obj: Any) -> Any:
        """A JSON-like structure with secret-named string fields masked and every secret value
        masked inside every other string (``launch_command`` repeats the flags)."""
        if isinstance(obj, dict):
            return {
                k: MASK
                if isinstance(k, str) and is_secret_name(k) and _holds_secret(v)
                else self.data(v)
                for k, v in obj.items()
            }
        if isinstance(obj, (list, tuple)):
            return [self.data(v) for v in obj]
        if isinstance(obj, str):
            return self.text(obj)
        return obj

    def command(self, command: Iterable[str]) -> list[str]:
        """A command line with the value of every secret-named flag masked (``--api-key X`` and
        ``--api-key=X``), and any other occurrence of a secret too."""
        masked = list(command)
        for i, flag in _secret_flag_values(masked):
            masked[i] = f"{flag}={MASK}" if flag else MASK
        return [self.text(a) for a in masked]

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Secret-named values masked, unless the value is only a ``${NAME}`` reference (the
        profile as written: it names where the secret comes from, and holds none)."""
        return {
            k: MASK if is_secret_name(k) and _holds_secret(v) else self.text(v)
            for k, v in env.items()
        }


def _secret_flag_values(args: list[str]) -> list[tuple[int, str | None]]:
    """Where the values of secret-named flags are: ``(i, flag)`` for ``--api-key=X`` at ``i``,
    ``(i, None)`` for the ``X`` after ``--api-key``."""
    found: list[tuple[int, str | None]] = []
    for i, arg in enumerate(args):
        flag, eq, _ = arg.partition("=")
        if not arg.startswith("-") or not is_secret_name(flag):
            continue
        if eq:
            found.append((i, flag))
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            found.append((i + 1, None))
    return found


def secret_values(
    env: Mapping[str, str], args: Iterable[str], expanded: Mapping[str, str]
) -> list[str]:
    """The secrets of a launch: values of secret-named ``env`` keys and flags, and of every
    secret-named variable a ``${NAME}`` took from the environment (``expanded``)."""
    values = [v for k, v in env.items() if is_secret_name(k)]
    values += [v for k, v in expanded.items() if is_secret_name(k)]
    args = list(args)
    for i, flag in _secret_flag_values(args):
        values.append(args[i].partition("=")[2] if flag else args[i])
    return values


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Secret-named variables of this process's environment: masked too, so a server that
    echoes its environment (or a traceback that shows it) leaks nothing."""
    environ = os.environ if environ is None else environ
    return [v for k, v in environ.items() if is_secret_name(k)]


@dataclass(frozen=True)
class Resolved:
    """A profile with its ``${NAME}`` references taken from the environment, the API key the
    client sends, and the redactor that keeps all of them out of files."""

    profile: Profile
    api_key: str | None
    redactor: Redactor


def resolve(profile: Profile, environ: Mapping[str, str] | None = None) -> Resolved:
    """Expand ``${NAME}`` in the profile's ``env``, ``args`` and ``command`` and find its API key
    (``api_key_env``, else ``--api-key`` in its args); ProfileError names the field and the
    variable that is missing."""
    environ = os.environ if environ is None else environ
    where = f"{profile.source}: profile {profile.name!r}"
    used: dict[str, str] = {}

    def one(value: str, field: str) -> str:
        for name in references(value):
            if name in environ:
                used[name] = environ[name]
        try:
            return expand(value, environ, f"{where}, field {field!r}")
        except KeyError as exc:
            raise ProfileError(str(exc.args[0])) from None

    env = {k: one(v, "env") for k, v in profile.env.items()}
    args = tuple(one(a, "args") for a in profile.args)
    command = tuple(one(a, "command") for a in profile.command) if profile.command else None
    expanded = replace(profile, env=env, args=args, command=command)
    key = _api_key(expanded, environ, where)
    values = secret_values(env, (*args, *(command or ())), used)
    values += environment_secrets(environ)
    return Resolved(expanded, key, Redactor([*values, *([key] if key else [])]))


def _api_key(profile: Profile, environ: Mapping[str, str], where: str) -> str | None:
    if profile.api_key_env:
        if not environ.get(profile.api_key_env):
            raise ProfileError(
                f"{where}, field 'api_key_env': ${profile.api_key_env} is not set (or empty); export "
                "it before running pytest, or remove the field."
            )
        return environ[profile.api_key_env]
    args = list(profile.command or profile.args)
    for i, arg in enumerate(args):
        if arg == "--api-key" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--api-key="):
            return arg.split("=", 1)[1]
    return None
