"""How a profile field is described: :func:`setting`, one entry of the table that is the body of
:class:`~pytest_llmperf.profiles.Profile`, and the checks such entries use.

An entry says everything about its field once: its default, what the TOML value must be
(``check``, and ``allowed``, how an error says it), how it becomes the Profile's value
(``convert``: inferred from the default for numbers, lists and tables) and back (``to_toml``),
how ``extends`` treats it (``merge``: a table updated by the child, ``appends_to``: added to
another field, ``inherited``), its help text, its group and whether it is essential. The builder
(profiles.py), the TOML round trip and the reference (docs/reference/profiles.md) all read the
entries, so a new field is one entry.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.core.lengths import Lengths, parse_lengths
from pytest_llmperf.errors import ProfileError

APIS = ("sglang", "openai", "chat")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The reference's sections, in order.
GROUPS = {
    "server": "The server",
    "workload": "The workload",
    "load": "Levels and runs",
    "verdict": "Verdicts",
    "scale": "Scale out",
    "lifecycle": "Launch, wait and stop",
}


@dataclass(frozen=True)
class Setting:
    """One profile field (see the module's docstring)."""

    default: Any
    help: str
    group: str
    check: Callable[[Any], Any] | None = None
    allowed: str = ""
    convert: Callable[[Any], Any] | None = None
    to_toml: Callable[[Any], Any] | None = None
    essential: bool = False
    #: A table: the child's keys update the inherited table (as ``env``).
    merge: bool = False
    #: A list appended to this other field's inherited value (``extra_args`` to ``args``).
    appends_to: str | None = None
    inherited: bool = True
    #: The TOML key, when the Profile's attribute has another name.
    key: str | None = None


def setting(
    default: Any,
    help: str,
    group: str,
    *,
    check: Callable[[Any], Any] | None = None,
    allowed: str = "",
    convert: Callable[[Any], Any] | None = None,
    to_toml: Callable[[Any], Any] | None = None,
    essential: bool = False,
    merge: bool = False,
    appends_to: str | None = None,
    inherited: bool = True,
    key: str | None = None,
) -> Any:
    """A Profile attribute that is a profile field: ``runs: int = setting(3, "…", "load",
    check=is_pos_int, allowed="a positive integer")``."""
    if convert is None:
        convert = _inferred_conversion(default)
    entry = Setting(
        default,
        help,
        group,
        check,
        allowed,
        convert,
        to_toml,
        essential,
        merge,
        appends_to,
        inherited,
        key,
    )
    metadata = {"setting": entry}
    if isinstance(default, (dict, list)):
        made = dataclasses.field(default_factory=lambda: convert(default), metadata=metadata)
    else:
        made = dataclasses.field(default=convert(default), metadata=metadata)
    return made  # a dataclass field, typed (Any) as the attribute's value


def _inferred_conversion(default: Any) -> Callable[[Any], Any]:
    if isinstance(default, bool) or default is None:
        return _same
    if isinstance(default, float):
        return float
    if isinstance(default, (list, tuple)):
        return tuple
    if isinstance(default, dict):
        return dict
    return _same


def _same(value: Any) -> Any:
    return value


def as_toml(value: Any) -> Any:
    """A Profile's value as TOML writes it: tuples as lists, mappings as tables."""
    if isinstance(value, (tuple, list)):
        return [as_toml(v) for v in value]
    if isinstance(value, Mapping):
        return {k: as_toml(v) for k, v in value.items()}
    return value


def settings_of(cls: type) -> dict[str, tuple[str, Setting]]:
    """A dataclass's settings by TOML key: ``{key: (attribute, Setting)}``, in table order."""
    return {
        (s.key or f.name): (f.name, s)
        for f in dataclasses.fields(cls)
        if (s := f.metadata.get("setting")) is not None
    }


def check(where: str, key: str, value: Any, ok: Callable[[Any], Any] | None, allowed: str) -> None:
    if ok is not None and not ok(value):
        raise ProfileError(f"{where}, field {key!r}: got {value!r}; expected {allowed}.")


# -- checks -------------------------------------------------------------------------------


def is_pos_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def is_int_at_least(low: int) -> Callable[[Any], bool]:
    def check(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= low

    return check


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_str(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


def is_fraction(v: Any) -> bool:
    return is_number(v) and 0 < v < 1


def is_seconds(v: Any) -> bool:
    return is_number(v) and v > 0


def is_seconds_or_zero(v: Any) -> bool:
    return is_number(v) and v >= 0


def optional(ok: Callable[[Any], Any]) -> Callable[[Any], bool]:
    """``ok``, or absent (None)."""
    return lambda v: v is None or bool(ok(v))


def is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(a, str) for a in v)


def is_str_map(v: Any) -> bool:
    return isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(x, str) for k, x in v.items()
    )


def is_distinct(ok: Callable[[Any], Any]) -> Callable[[Any], bool]:
    """A list of distinct values, each ``ok``."""
    return lambda v: isinstance(v, list) and all(ok(x) for x in v) and len(set(v)) == len(v)


def lengths(value: Any) -> Lengths | None:
    """A length field (``output_len``, ``input_len``) as Lengths; None stays None. A value that
    is none of the forms raises LengthsError (a ValueError), which the builder names."""
    return None if value is None else parse_lengths(value)


def lengths_toml(value: Lengths | None) -> Any:
    return None if value is None else value.describe()


STR_LIST = 'a list of strings, e.g. ["--tp-size", "8"]'
