"""Engines: what is specific to each kind of server (the interface is :class:`~.base.Engine`).

A profile's ``engine = "NAME"`` is the :class:`~.base.Engine` subclass named NAME in module
``pytest_llmperf.engines.NAME`` (``sglang``, ``sim``, ``llamacpp``, ``command``, ``remote``), so
a new engine is one new module here; ``engine = "package.module:Class"`` names a subclass
anywhere else (a project's own engine, a test's). The other modules are what engines share (``base``) and
SGLang's flags, server fields and loading log (``sglang_flags``, ``sglang_args``,
``sglang_log``); what the host is and what its GPUs do is :mod:`pytest_llmperf.host`'s.

Nothing here imports the layers above (profiles, servers, load): engine modules are imported on
first use and are cheap to import.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from typing import TYPE_CHECKING

from pytest_llmperf.engines.base import Engine
from pytest_llmperf.errors import ProfileError

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile

__all__ = ["Engine", "get", "names", "of"]

_NAME = re.compile(r"[a-z][a-z0-9_]*")


@functools.cache
def get(name: str) -> Engine:
    """The engine a profile's ``engine`` field names; a ProfileError lists those available."""
    if ":" in name:
        return _import(name)
    module = None
    if _NAME.fullmatch(name):
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    found = _defined_in(module, name) if module is not None else None
    if found is None:
        raise ProfileError(
            f"got {name!r}; expected one of {', '.join(map(repr, names()))}, or "
            '"package.module:Class" for an Engine subclass of your own'
        )
    return found


def of(profile: Profile) -> Engine:
    """The engine that serves ``profile`` (its ``engine`` field, checked when it was read)."""
    return get(profile.engine)


def greedy_api(profile: Profile) -> str:
    """The API that returns token ids and top-2 log-probabilities for this profile's server
    (load/greedy.py): the engine's own, else SGLang's native one or OpenAI completions."""
    return of(profile).greedy_api or ("sglang" if profile.api == "sglang" else "openai")


@functools.lru_cache(maxsize=1)
def names() -> tuple[str, ...]:
    """The built-in engines: every module of this package that defines one under its name."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if _defined_in(module, info.name) is not None:
            found.append(info.name)
    return tuple(sorted(found))


def _defined_in(module: object, name: str) -> Engine | None:
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, Engine)
            and value.name == name
            and value.__module__ == getattr(module, "__name__", None)
        ):
            return value()
    return None


def _import(spec: str) -> Engine:
    """``package.module:Class``: an Engine subclass outside this package."""
    module_name, _, class_name = spec.partition(":")
    try:
        value = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ProfileError(
            f"got {spec!r}, which cannot be imported ({type(exc).__name__}: {exc}); expected "
            '"package.module:Class" importable from where pytest runs (see pytest\'s pythonpath)'
        ) from None
    if not (isinstance(value, type) and issubclass(value, Engine)):
        raise ProfileError(
            f"got {spec!r}, which is not a subclass of pytest_llmperf.engines.Engine"
        )
    return value()
