"""The checks of a profile's fields: each field alone (FIELD_CHECKS, a predicate and how what
it allows is said), the workload fields together, and the conversions into a Profile.

Every error names the file, the profile (``where``), the field and what is allowed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pytest_llmperf.core.lengths import Lengths, LengthsError, parse_lengths
from pytest_llmperf.core.metrics import SLO_KEYS
from pytest_llmperf.errors import ProfileError

APIS = ("sglang", "openai", "chat")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_pos_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_str(v: Any) -> bool:
    return isinstance(v, str) and bool(v)


def is_fraction(v: Any) -> bool:
    return is_number(v) and 0 < v < 1


#: One check per field whose value is judged alone: what it must be, and how that is said.
FIELD_CHECKS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "api": (lambda v: v in APIS, f"one of {', '.join(map(repr, APIS))}"),
    "model": (is_str, "a non-empty string (passed as --model-path)"),
    "python": (
        lambda v: v is None or is_str(v),
        "a path to a Python interpreter (relative to this file, or a name on PATH)",
    ),
    "host": (is_str, 'a host name or address, e.g. "127.0.0.1"'),
    "description": (lambda v: isinstance(v, str), "a string"),
    "binary": (
        is_str,
        "the llama-server executable: a path (relative to this file) or a name on PATH",
    ),
    "health_path": (
        lambda v: v is None or (isinstance(v, str) and v.startswith("/")),
        'a URL path that answers 200 once the server is ready, e.g. "/health"',
    ),
    "speculative": (
        lambda v: v is None or isinstance(v, bool),
        "true or false (default: detected from the engine's flags)",
    ),
    "concurrency": (
        lambda v: (
            isinstance(v, list) and v and all(is_pos_int(c) for c in v) and len(set(v)) == len(v)
        ),
        "a non-empty list of distinct positive integers, e.g. [1, 2, 5, 10]",
    ),
    "runs": (is_pos_int, "a positive integer"),
    "min_requests": (is_pos_int, "a positive integer"),
    "window_s": (
        lambda v: v is None or (is_number(v) and v > 0),
        "a number of seconds > 0 (the steady-state window of each run), e.g. 20",
    ),
    "warmup": (lambda v: isinstance(v, bool), "true or false"),
    **{
        key: (lambda v: is_number(v) and v > 0, "a number of seconds > 0")
        for key in ("ready_timeout_s", "request_timeout_s")
    },
    **{
        key: (lambda v: is_number(v) and v >= 0, "a number of seconds >= 0")
        for key in ("shutdown_timeout_s", "gpu_wait_s", "settle_s")
    },
    **{
        key: (is_fraction, "a fraction between 0 and 1, e.g. 0.15")
        for key in ("fail_margin", "warn_margin", "latency_fail_margin", "latency_warn_margin")
    },
    "differs_from_base": (
        lambda v: v is None or is_str(v),
        "a sentence that says why this profile differs from its base beyond speculation",
    ),
    "api_key_env": (
        lambda v: v is None or (isinstance(v, str) and ENV_NAME.fullmatch(v)),
        'the name of an environment variable that holds the API key, e.g. "SGLANG_API_KEY"',
    ),
}
#: Fields converted on the way into a Profile (the rest are taken as they are).
CONVERSIONS: dict[str, Callable[[Any], Any]] = {
    "args": tuple,
    "env": dict,
    "extra_body": dict,
    "command": lambda v: tuple(v) if v is not None else None,
    "concurrency": tuple,
    "token_id_range": lambda v: tuple(v) if v else None,
    "slo": lambda v: {k: float(x) for k, x in v.items()},
    "window_s": lambda v: float(v) if v is not None else None,
    **{
        key: float
        for key in (
            "settle_s", "ready_timeout_s", "shutdown_timeout_s", "request_timeout_s",
            "fail_margin", "warn_margin", "latency_fail_margin", "latency_warn_margin",
            "gpu_wait_s",
        )
    },
}  # fmt: skip


def lengths(where: str, key: str, value: Any) -> Lengths | None:
    if value is None and key == "input_len":
        return None
    try:
        return parse_lengths(value)
    except LengthsError as exc:
        raise ProfileError(f"{where}, field {key!r}: {exc}.") from None


def check_workload(where: str, f: dict[str, Any], input_len: Lengths | None) -> None:
    """The workload fields, each alone and together: one prompt source, what the API can send."""
    prefix = f["shared_prefix_len"]
    check(where, "shared_prefix_len", prefix, lambda v: is_int(v) and v >= 0, "an integer >= 0")
    check(where, "seed", f["seed"], is_int, "an integer")
    check(
        where,
        "token_id_range",
        f["token_id_range"],
        lambda v: (
            v is None
            or (
                isinstance(v, list)
                and len(v) == 2
                and all(is_int(x) for x in v)
                and 0 <= v[0] < v[1]
            )
        ),
        "[LOW, HIGH], token ids LOW <= id < HIGH inside the model's vocabulary, e.g. [1000, 30000]",
    )
    check(
        where,
        "dataset",
        f["dataset"],
        lambda v: v is None or (isinstance(v, str) and v),
        'a path to a JSONL or ShareGPT file, relative to this file, e.g. "data/requests.jsonl"',
    )
    slo = f["slo"]
    check(
        where,
        "slo",
        slo,
        lambda v: (
            isinstance(v, dict)
            and all(k in SLO_KEYS and is_number(x) and x > 0 for k, x in v.items())
        ),
        f"a table of limits in seconds > 0 with keys {', '.join(SLO_KEYS)}, "
        "e.g. { ttft_s = 2.0, itl_s = 0.05 }",
    )
    if input_len is not None and f["dataset"] is not None:
        raise ProfileError(
            f"{where}, fields 'input_len' and 'dataset': a request's prompt comes from one of "
            "them; remove one."
        )
    if input_len is not None and f["api"] == "chat":
        raise ProfileError(
            f"{where}, field 'input_len': synthetic prompts are token ids, which the chat API "
            '(messages of text) cannot take; use api = "sglang" or "openai", or a dataset.'
        )
    if prefix and input_len is None:
        raise ProfileError(
            f"{where}, field 'shared_prefix_len': applies to synthetic prompts; set input_len too."
        )
    if input_len is not None and prefix >= input_len.smallest:
        raise ProfileError(
            f"{where}, field 'shared_prefix_len': {prefix} leaves no token of its own to the "
            "shortest prompt of input_len; make it smaller than every input length."
        )


def check(where: str, key: str, value: Any, ok: Callable[[Any], Any], allowed: str) -> None:
    if not ok(value):
        raise ProfileError(f"{where}, field {key!r}: got {value!r}; expected {allowed}.")


def str_list(where: str, key: str, value: Any) -> list[str]:
    check(
        where,
        key,
        value,
        lambda v: isinstance(v, list) and all(isinstance(a, str) for a in v),
        'a list of strings, e.g. ["--tp-size", "8"]',
    )
    return list(value)


def is_str_map(v: Any) -> bool:
    return isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(x, str) for k, x in v.items()
    )
