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
from pytest_llmperf.core.schedule import ARRIVALS
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
    "request_rate": (
        lambda v: (
            isinstance(v, list) and all(is_number(r) and r > 0 for r in v) and len(set(v)) == len(v)
        ),
        "a list of distinct arrival rates in requests/s, e.g. [0.5, 1, 2, 5]",
    ),
    "arrival": (
        lambda v: v in ARRIVALS,
        '"poisson" (the default), "gamma" (with `burstiness`) or "constant"',
    ),
    "burstiness": (lambda v: is_number(v) and v > 0, "a number > 0 (1 is Poisson, < 1 burstier)"),
    "max_concurrency": (
        lambda v: v is None or is_pos_int(v),
        "a positive integer: at most this many requests in flight at a rate level",
    ),
    "slo_percentile": (
        lambda v: is_number(v) and 0 < v <= 100,
        "a percentile in (0, 100], e.g. 99",
    ),
    "trace": (
        lambda v: v is None or is_str(v),
        'a Mooncake-format JSONL trace, relative to this file, e.g. "traces/conversation.jsonl"',
    ),
    "time_scale": (lambda v: is_number(v) and v > 0, "a number > 0 (2 replays at half speed)"),
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
    "request_rate": lambda v: tuple(float(r) for r in v),
    "burstiness": float,
    "slo_percentile": float,
    "time_scale": float,
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


#: What each profile field means, for the reference (docs/reference/profiles.md is generated
#: from this table and DEFAULTS): every field has an entry, checked by a test.
FIELD_HELP: dict[str, str] = {
    "extends": (
        "inherit another profile; lists are replaced, `extra_args` is appended to the inherited "
        "`args`, `env` is merged"
    ),
    "description": ("what the profile is, in words"),
    "engine": (
        '`"sglang"`: `<python> -m sglang.launch_server`; `"sim"`: the simulated engine; '
        '`"llamacpp"`: llama.cpp\'s `llama-server` (`binary`, `model`); `"command"`: `command` as '
        'given; `"remote"`: a server at `url`; or `"package.module:Class"`, an `Engine` subclass '
        "of your own"
    ),
    "python": ("interpreter for `sglang`/`sim` (SGLang usually lives in its own venv)"),
    "model": (
        "passed as `--model-path` (`llamacpp`: a GGUF file, relative to the profiles file, passed"
        " as `-m`)"
    ),
    "args": ("server flags"),
    "extra_args": ("flags appended to the inherited `args`"),
    "env": (
        'environment variables for the server, e.g. `{ NCCL_PROTO = "LL" }`; `${NAME}` takes a '
        "value from pytest's environment (see *Secrets*)"
    ),
    "extra_body": (
        "JSON fields added to every request (merged like `env`), e.g. llama.cpp's `{ cache_prompt"
        " = false }`; part of the workload's fingerprint"
    ),
    "command": (
        '`engine = "command"` only; placeholders `{host}` `{port}` `{model}` `{python}` '
        "`{run_dir}`; `{port}` is required (the plugin picks a free port)"
    ),
    "binary": (
        '`engine = "llamacpp"`: the executable, a path relative to the profiles file or a name on'
        " PATH"
    ),
    "health_path": (
        "the URL path that answers 200 once the server is ready: `/health_generate` for "
        "`sglang`/`sim`, `/health` for `llamacpp`/`command`"
    ),
    "url": (
        'the base URL of a server someone else runs (any engine; `engine = "remote"` for a '
        "server of no built-in kind): nothing is launched or stopped, readiness is waited for up "
        "to `ready_timeout_s`, the fingerprint comes from its own `/server_info`, and its "
        "hardware key is `remote`"
    ),
    "router": (
        "SGLang's router in front of data-parallel workers: `{ workers = 2, policy = "
        '"round_robin" }` launches the workers and the router (`sglang-router` from PyPI, in '
        "`python`, or the table's own `python`); with a `url`, the url is a router someone else "
        "runs, whose workers are asked for (`router = {}`). Also `args`: more router flags. "
        "See *Scale out*"
    ),
    "launcher": (
        '`"local"` (a process on this machine) or `"srun"`: one rank per node through Slurm, '
        "inside the allocation pytest runs in (`salloc`, `sbatch`) or one srun requests; every "
        "rank gets `--nnodes`, `--node-rank $SLURM_NODEID` and `--dist-init-addr` (the first "
        "node); requests go to rank 0; teardown cancels the job step. See *Scale out*"
    ),
    "nodes": ('`launcher = "srun"`: the number of nodes, one rank each'),
    "srun_args": (
        '`launcher = "srun"`: more srun options, e.g. `["--partition=gpu", '
        '"--gpus-per-node=8", "--time=60"]`'
    ),
    "speculative": (
        "whether the server speculates (pairs it with its base for the speedup analysis): "
        "`--speculative-algorithm` in the args (`sglang`, `sim`, `command`), "
        "`-md`/`--model-draft` (`llamacpp`); set `true`/`false` for any other server"
    ),
    "host": ("the port is always a free one chosen by the plugin"),
    "api": (
        '`"sglang"` (native `/generate`), `"openai"` (`/v1/completions`) or `"chat"` '
        "(`/v1/chat/completions`)"
    ),
    "concurrency": ("levels"),
    "request_rate": (
        "open-loop rate levels in requests/s for `llm_request_rate` tests (arrivals on a seeded "
        "schedule, latency from the arrival; see *Open-loop load*)"
    ),
    "arrival": ('how requests arrive at a rate level: `"poisson"`, `"gamma"` or `"constant"`'),
    "burstiness": ('`arrival = "gamma"`: the shape; 1 is Poisson, below 1 burstier'),
    "max_concurrency": (
        "at a rate level, at most this many requests in flight; later arrivals wait for a slot "
        "(their wait is queue time, part of their TTFT from the arrival)"
    ),
    "slo_percentile": (
        "the percentile at which a rate level must meet every `slo` limit (the capacity search)"
    ),
    "trace": (
        "a Mooncake-format JSONL trace (`timestamp` ms, `input_length`, `output_length`, "
        "`hash_ids`) that `llmperf.replay()` sends at its own times, shared hash blocks as shared "
        "prefixes (see *Open-loop load*)"
    ),
    "time_scale": ("a trace's times are multiplied by this (2: half the rate)"),
    "runs": (
        "measured runs per level before the verdict may ask for more; 2 when the golden is "
        "precise enough that 2 decide (see *Golden baselines and verdicts*)"
    ),
    "output_len": (
        "tokens per request, with `ignore_eos`: a number, `{ uniform = [LOW, HIGH] }` or `{ "
        "values = [...], weights = [...] }` (see *Workloads*)"
    ),
    "input_len": (
        "exact prompt tokens, sent as token ids (a number or a distribution, as `output_len`); "
        "default: the built-in text prompts"
    ),
    "shared_prefix_len": (
        "with `input_len`: the first tokens every request shares, to measure prefix caching on "
        "purpose"
    ),
    "dataset": ("a JSONL or ShareGPT file of requests, relative to the profiles file"),
    "seed": ("seeds the synthetic ids and every length drawn from a distribution"),
    "token_id_range": (
        "where synthetic ids are drawn from (`LOW <= id < HIGH`), inside every modern vocabulary;"
        " a tiny test model's may need less"
    ),
    "slo": (
        "per-request limits for `goodput_req_s`: `ttft_s`, `itl_s`, `tpot_s`, `e2e_s` (seconds)"
    ),
    "min_requests": ("floor of N = max(floor, 4·C) (runs of whole requests)"),
    "window_s": (
        "measure each run over a steady-state window of this many seconds instead of N whole "
        "requests (see *Steady-state windows*)"
    ),
    "settle_s": (
        "with `window_s`: after a run whose requests were cut, the next window opens no earlier "
        "than this after its run began (SGLang 0.5.6 aborts a disconnected request 2 s later, "
        "0.5.19+ at once)"
    ),
    "warmup": ("warm up at C before each level"),
    "ready_timeout_s": ("loading may take this long"),
    "shutdown_timeout_s": ("SIGTERM grace before SIGKILL of the process group"),
    "request_timeout_s": ("a stream silent this long has stalled"),
    "fail_margin": (
        "the verdict fails a point significantly slower than its golden by more than this "
        "fraction (see *Golden baselines and verdicts*)"
    ),
    "warn_margin": ("the verdict warns beyond this fraction"),
    "latency_fail_margin": (
        'the fail margin of latency checks (`check(point, metric="ttft_p99_s")`): a latency fails'
        " when significantly more than this much slower"
    ),
    "latency_warn_margin": ("the warn margin of latency checks"),
    "base_profile": (
        "a speculative profile's base for the speedup analysis; default: the nearest "
        "non-speculative profile along `extends`"
    ),
    "differs_from_base": (
        "a speculative profile that differs from its base beyond speculation on purpose says why "
        "here; the plan states it once instead of a warning at every launch"
    ),
    "gpu_wait_s": (
        '`engine = "sglang"`: wait this long for other processes to free the GPUs before failing '
        "the launch"
    ),
    "api_key_env": (
        "the environment variable whose value the client sends as `Authorization: Bearer`; "
        "default: the value of `--api-key` in `args`"
    ),
}
