"""Profiles: named server configurations and their workload, as data.

A profile says which engine to start, with which model, flags and environment, which API
to speak and how to load it (concurrency levels, runs, output length). ``extends`` makes a
profile inherit another's fields, so two profiles differ in exactly what is compared:
lists are replaced, ``extra_args`` is appended to the inherited ``args``, ``env`` is merged.

The body of :class:`Profile` is the table of fields: each attribute made by
:func:`~pytest_llmperf.profile_fields.setting` is one field, with its default, its check, its
conversion, its help text and its group. :func:`build_profiles` turns a file's tables into
profiles from it (each field alone, then the fields that depend on each other), and
:func:`profile_table` turns a profile back into its table. What an engine accepts is checked a
step above, where the engines are known (:mod:`pytest_llmperf.profiles_file`, which reads a
file).

Every error names the file, the profile, the field and what is allowed.
"""

from __future__ import annotations

import difflib
import enum
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf import topology
from pytest_llmperf.core.lengths import Lengths
from pytest_llmperf.core.metrics import SLO_KEYS
from pytest_llmperf.core.schedule import ARRIVALS
from pytest_llmperf.core.startup import KINDS as STARTUP_KINDS
from pytest_llmperf.errors import ProfileError
from pytest_llmperf.profile_fields import (
    APIS,
    ENV_NAME,
    STR_LIST,
    Setting,
    as_toml,
    check,
    is_distinct,
    is_fraction,
    is_int,
    is_int_at_least,
    is_number,
    is_pos_int,
    is_seconds,
    is_seconds_or_zero,
    is_str,
    is_str_list,
    is_str_map,
    lengths,
    lengths_toml,
    optional,
    setting,
    settings_of,
)
from pytest_llmperf.topology import RouterSpec

if TYPE_CHECKING:
    from pytest_llmperf.core.schedule import Arrivals

#: Profile names become file and directory names (goldens, logs): no separators, no "..".
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
PROFILE_NAME_RULE = (
    "1-64 characters from letters, digits, '-', '_' and '.', starting with a letter or digit"
)
SECONDS = "a number of seconds > 0"
SECONDS_OR_ZERO = "a number of seconds >= 0"


class CopyKind(enum.Enum):
    """Why a run measures a profile again under another name (selection.py makes the copies)."""

    #: A recording's later launch (``NAME@launch2``, …): its runs join NAME's golden.
    LATER_LAUNCH = "later launch"
    #: A/B/A (``--perf-aba``): the base measured again after its speculative profile, for the
    #: base's drift between the two; stored, judged by nobody.
    AFTER = "after"
    #: A fresh launch that confirms the points a night's launches left undecided
    #: (``NAME@confirm1``, …): its runs join those points, judged over tonight's launches.
    CONFIRMATION = "confirmation"
    #: The engine channel (``pin_acceptance``): a speculative profile launched again with its
    #: acceptance pinned at its golden accept length (``NAME@pinned``), its closed-loop levels
    #: only; stored, judged through its speedup over the base (fixtures/speedup.py).
    PINNED = "pinned"


@dataclass(frozen=True)
class ProfileCopy:
    """What a profile is a copy of, and why."""

    of: str
    kind: CopyKind

    @property
    def records(self) -> bool:
        """Whether its points are recorded or judged as the original's (else only stored)."""
        return self.kind not in (CopyKind.AFTER, CopyKind.PINNED)


@dataclass(frozen=True)
class Profile:
    """One resolved profile (``extends`` already applied); its body is the table of fields."""

    name: str
    source: Path
    # -- the server ----------------------------------------------------------------------
    extends: str | None = setting(
        None,
        "inherit another profile; lists are replaced, `extra_args` is appended to the "
        "inherited `args`, `env` is merged",
        "server",
        essential=True,
        inherited=False,
        check=optional(is_str),
        allowed="the name of another profile in this file",
    )
    description: str = setting(
        "",
        "what the profile is, in words",
        "server",
        check=lambda v: isinstance(v, str),
        allowed="a string",
    )
    engine: str = setting(
        "sim",
        '`"sglang"`: `<python> -m sglang.launch_server`; `"sim"`: the simulated engine; '
        '`"llamacpp"`: llama.cpp\'s `llama-server` (`binary`, `model`); `"command"`: `command` '
        'as given; `"remote"`: a server at `url`; or `"package.module:Class"`, an `Engine` '
        "subclass of your own",
        "server",
        essential=True,
        check=is_str,
        allowed="an engine's name",
    )
    python: str | None = setting(
        None,
        "interpreter for `sglang`/`sim` (SGLang usually lives in its own venv)",
        "server",
        essential=True,
        check=optional(is_str),
        allowed="a path to a Python interpreter (relative to this file, or a name on PATH)",
    )
    model: str = setting(
        "sim-model",
        "passed as `--model-path` (`llamacpp`: a GGUF file, relative to the "
        "profiles file, passed as `-m`)",
        "server",
        essential=True,
        check=is_str,
        allowed="a non-empty string (passed as --model-path)",
    )
    args: tuple[str, ...] = setting(
        [], "server flags", "server", essential=True, check=is_str_list, allowed=STR_LIST
    )
    extra_args: tuple[str, ...] = setting(
        [],
        "flags appended to the inherited `args`",
        "server",
        essential=True,
        check=is_str_list,
        allowed=STR_LIST,
        appends_to="args",
        inherited=False,
    )
    env: Mapping[str, str] = setting(
        {},
        'environment variables for the server, e.g. `{ NCCL_PROTO = "LL" }`; `${NAME}` '
        "takes a value from pytest's environment (see *Secrets*)",
        "server",
        essential=True,
        merge=True,
        check=is_str_map,
        allowed='a table of string values, e.g. { NCCL_PROTO = "LL" }',
    )
    url: str | None = setting(
        None,
        'the base URL of a server someone else runs (any engine; `engine = "remote"` for '
        "a server of no built-in kind): nothing is launched or stopped, readiness is waited for "
        "up to `ready_timeout_s`, the fingerprint comes from its own `/server_info`, and its "
        "hardware key is `remote`",
        "server",
        essential=True,
        check=optional(lambda v: isinstance(v, str) and v.startswith(("http://", "https://"))),
        allowed='the server\'s base URL, e.g. "http://10.0.0.5:30000" (the profile attaches to '
        "it and launches nothing)",
    )
    command: tuple[str, ...] | None = setting(
        None,
        '`engine = "command"` only; placeholders `{host}` `{port}` `{model}` `{python}` '
        "`{run_dir}`; `{port}` is required (the plugin picks a free port)",
        "server",
        check=optional(is_str_list),
        allowed=STR_LIST,
        convert=lambda v: tuple(v) if v is not None else None,
    )
    binary: str = setting(
        "llama-server",
        '`engine = "llamacpp"`: the executable, a path relative to the profiles '
        "file or a name on PATH",
        "server",
        check=is_str,
        allowed="the llama-server executable: a path (relative to this file) or a name on PATH",
    )
    host: str = setting(
        "127.0.0.1",
        "the port is always a free one chosen by the plugin",
        "server",
        check=is_str,
        allowed='a host name or address, e.g. "127.0.0.1"',
    )
    health_path: str | None = setting(
        None,
        "the URL path that answers 200 once the server is ready: `/health_generate` for "
        "`sglang`/`sim`, `/health` for `llamacpp`/`command`",
        "server",
        check=optional(lambda v: isinstance(v, str) and v.startswith("/")),
        allowed='a URL path that answers 200 once the server is ready, e.g. "/health"',
    )
    api_key_env: str | None = setting(
        None,
        "the environment variable whose value the client sends as `Authorization: "
        "Bearer`; default: the value of `--api-key` in `args`",
        "server",
        check=optional(lambda v: isinstance(v, str) and ENV_NAME.fullmatch(v)),
        allowed='the name of an environment variable that holds the API key, e.g. "SGLANG_API_KEY"',
    )
    speculative_setting: bool | None = setting(
        None,
        "whether the server speculates (pairs it with its base for the speedup analysis): "
        "`--speculative-algorithm` in the args (`sglang`, `sim`, `command`), "
        "`-md`/`--model-draft` (`llamacpp`); set `true`/`false` for any other server",
        "server",
        key="speculative",
        check=optional(lambda v: isinstance(v, bool)),
        allowed="true or false (default: detected from the engine's flags)",
    )
    base_profile: str | None = setting(
        None,
        "a speculative profile's base for the speedup analysis; default: the nearest "
        "non-speculative profile along `extends`",
        "server",
        check=optional(is_str),
        allowed="the name of a profile in this file",
    )
    differs_from_base: str | None = setting(
        None,
        "a speculative profile that differs from its base beyond speculation on purpose "
        "says why here; the plan states it once instead of a warning at every launch",
        "server",
        check=optional(is_str),
        allowed="a sentence that says why this profile differs from its base beyond speculation",
    )
    # -- the workload --------------------------------------------------------------------
    api: str = setting(
        "sglang",
        '`"sglang"` (native `/generate`), `"openai"` (`/v1/completions`) or `"chat"` '
        "(`/v1/chat/completions`)",
        "workload",
        essential=True,
        check=lambda v: v in APIS,
        allowed=f"one of {', '.join(map(repr, APIS))}",
    )
    #: Output tokens per request: a fixed length or a seeded distribution.
    output: Lengths = setting(
        512,
        "tokens per request, with `ignore_eos`: a number, `{ uniform = [LOW, HIGH] }` or "
        "`{ values = [...], weights = [...] }` (see *Workloads*)",
        "workload",
        essential=True,
        key="output_len",
        convert=lengths,
        to_toml=lengths_toml,
    )
    #: Synthetic prompts of exactly these lengths in tokens, sent as token ids (None: text).
    input_len: Lengths | None = setting(
        None,
        "exact prompt tokens, sent as token ids (a number or a distribution, as "
        "`output_len`); default: the built-in text prompts",
        "workload",
        essential=True,
        convert=lengths,
        to_toml=lengths_toml,
    )
    dataset: str | None = setting(
        None,
        "a JSONL or ShareGPT file of requests, relative to the profiles file",
        "workload",
        essential=True,
        check=optional(is_str),
        allowed="a path to a JSONL or ShareGPT file, relative to this file, e.g. "
        '"data/requests.jsonl"',
    )
    shared_prefix_len: int = setting(
        0,
        "with `input_len`: the first tokens every request shares, to measure prefix caching "
        "on purpose",
        "workload",
        check=lambda v: is_int(v) and v >= 0,
        allowed="an integer >= 0",
    )
    seed: int = setting(
        0,
        "seeds the synthetic ids and every length drawn from a distribution",
        "workload",
        check=is_int,
        allowed="an integer",
    )
    #: [low, high): where synthetic token ids are drawn from (None: TOKEN_ID_RANGE, which
    #: every modern vocabulary covers; a tiny test model's may be smaller).
    token_id_range: tuple[int, int] | None = setting(
        None,
        "where synthetic ids are drawn from (`LOW <= id < HIGH`), inside every modern "
        "vocabulary; a tiny test model's may need less",
        "workload",
        check=optional(
            lambda v: (
                isinstance(v, list)
                and len(v) == 2
                and all(is_int(x) for x in v)
                and 0 <= v[0] < v[1]
            )
        ),
        allowed="[LOW, HIGH], token ids LOW <= id < HIGH inside the model's vocabulary, e.g. "
        "[1000, 30000]",
        convert=lambda v: tuple(v) if v else None,
    )
    #: A thinking model's chat-template switch (None: the model's default, nothing sent).
    thinking: bool | None = setting(
        None,
        "a thinking model's mode on the chat API: true or false sets the chat template's "
        "switch on every request (`chat_template_kwargs`: Kimi-K2's `thinking`, Qwen3's "
        "`enable_thinking`); unset sends nothing (the model's default). Part of the workload's "
        "fingerprint, so thinking-on and thinking-off goldens are kept apart: make a profile "
        "per mode (each with its own accept_length_floor)",
        "workload",
        check=lambda v: v is None or isinstance(v, bool),
        allowed="true or false (or leave it out for the model's default)",
    )
    #: Extra JSON fields merged into every request body (engine-specific sampling or cache knobs).
    extra_body: Mapping[str, Any] = setting(
        {},
        "JSON fields added to every request (merged like `env`), e.g. llama.cpp's "
        "`{ cache_prompt = false }`; part of the workload's fingerprint",
        "workload",
        merge=True,
        check=lambda v: isinstance(v, dict),
        allowed="a table of JSON fields added to every request, e.g. { cache_prompt = false }",
    )
    trace: str | None = setting(
        None,
        "a Mooncake-format JSONL trace (`timestamp` ms, `input_length`, `output_length`, "
        "`hash_ids`) that `llmperf.replay()` sends at its own times, shared hash blocks as "
        "shared prefixes (see *Open-loop load*)",
        "workload",
        check=optional(is_str),
        allowed="a Mooncake-format JSONL trace, relative to this file, e.g. "
        '"traces/conversation.jsonl"',
    )
    time_scale: float = setting(
        1.0,
        "a trace's times are multiplied by this (2: half the rate)",
        "workload",
        check=lambda v: is_number(v) and v > 0,
        allowed="a number > 0 (2 replays at half speed)",
    )
    # -- levels and runs -------------------------------------------------------------------
    concurrency: tuple[int, ...] = setting(
        [1, 2, 5, 10, 30, 70, 100, 250],
        "the concurrency levels C, requests in flight (closed-loop tests, `llm_concurrency`)",
        "load",
        essential=True,
        check=lambda v: bool(v) and is_distinct(is_pos_int)(v),
        allowed="a non-empty list of distinct positive integers, e.g. [1, 2, 5, 10]",
    )
    runs: int = setting(
        3,
        "measured runs per level before the verdict may ask for more; 2 when the golden is "
        "precise enough that 2 decide (see *Golden baselines and verdicts*)",
        "load",
        essential=True,
        check=is_pos_int,
        allowed="a positive integer",
    )
    #: Measure each run over a steady-state window of this many seconds (staggered closed
    #: loop, window after the first prefills, in-flight requests cancelled at its close)
    #: instead of N = max(min_requests, 4·C) whole requests. None: whole requests.
    window_s: float | None = setting(
        None,
        "measure each run over a steady-state window of this many seconds instead of N "
        "whole requests (see *Steady-state windows*)",
        "load",
        essential=True,
        check=optional(is_seconds),
        allowed="a number of seconds > 0 (the steady-state window of each run), e.g. 20",
        convert=lambda v: float(v) if v is not None else None,
    )
    request_rate: tuple[float, ...] = setting(
        [],
        "open-loop rate levels in requests/s for `llm_request_rate` tests (arrivals on a "
        "seeded schedule, latency from the arrival; see *Open-loop load*)",
        "load",
        essential=True,
        check=is_distinct(lambda r: is_number(r) and r > 0),
        allowed="a list of distinct arrival rates in requests/s, e.g. [0.5, 1, 2, 5]",
        convert=lambda v: tuple(float(r) for r in v),
    )
    record_launches: int | None = setting(
        None,
        "server launches a `--perf-update` records, each with its runs, so that the golden knows "
        "how far launches differ (the verdict allows for it); default for a launched server 2, "
        "4 where launch_cv is over 0.05, 6 over 0.08 (a golden of too few launches cannot FAIL a "
        "collapse on launches that far apart), 1 for one the plugin attaches to (see *Golden "
        "baselines and verdicts*)",
        "load",
        check=optional(is_pos_int),
        allowed="a positive integer: the launches a recording makes",
    )
    min_requests: int = setting(
        16,
        "floor of N = max(floor, 4·C) (runs of whole requests)",
        "load",
        check=is_pos_int,
        allowed="a positive integer",
    )
    #: After a run whose requests were cut at its window's close, the next run's window opens no
    #: earlier than this after the run began: SGLang 0.5.6 aborts a disconnected request 2 s
    #: later (0.5.19+ at once).
    settle_s: float = setting(
        3.0,
        "with `window_s`: after a run whose requests were cut, the next window opens no "
        "earlier than this after its run began (SGLang 0.5.6 aborts a disconnected request 2 s "
        "later, 0.5.19+ at once)",
        "load",
        check=is_seconds_or_zero,
        allowed=SECONDS_OR_ZERO,
    )
    warmup: bool = setting(
        True,
        "warm up at C before each level",
        "load",
        check=lambda v: isinstance(v, bool),
        allowed="true or false",
    )
    arrival: str = setting(
        "poisson",
        'how requests arrive at a rate level: `"poisson"`, `"gamma"` or `"constant"`',
        "load",
        check=lambda v: v in ARRIVALS,
        allowed='"poisson" (the default), "gamma" (with `burstiness`) or "constant"',
    )
    burstiness: float = setting(
        1.0,
        '`arrival = "gamma"`: the shape; 1 is Poisson, below 1 burstier',
        "load",
        check=lambda v: is_number(v) and v > 0,
        allowed="a number > 0 (1 is Poisson, < 1 burstier)",
    )
    #: Open loop: at most this many requests in flight; later arrivals wait for a slot.
    max_concurrency: int | None = setting(
        None,
        "at a rate level, at most this many requests in flight; later arrivals wait for a "
        "slot (their wait is queue time, part of their TTFT from the arrival)",
        "load",
        check=optional(is_pos_int),
        allowed="a positive integer: at most this many requests in flight at a rate level",
    )
    # -- verdicts --------------------------------------------------------------------------
    fail_margin: float = setting(
        0.15,
        "the verdict fails a point significantly slower than its golden by more than this "
        "fraction (see *Golden baselines and verdicts*)",
        "verdict",
        essential=True,
        check=is_fraction,
        allowed="a fraction between 0 and 1, e.g. 0.15",
    )
    warn_margin: float = setting(
        0.05,
        "the verdict warns beyond this fraction",
        "verdict",
        essential=True,
        check=is_fraction,
        allowed="a fraction between 0 and 1, e.g. 0.15",
    )
    #: The margins of latency checks (``check(point, metric="ttft_p99_s")``): a tail moves more
    #: from launch to launch than throughput does.
    launch_cv: float = setting(
        0.03,
        "how far a launch of this server is expected to move a figure (a coefficient of "
        "variation): the verdict's prior for the spread between launches, weighed beside the "
        "launches the golden (or the history) measured as six launches' worth; raise it for a "
        "server whose launches differ more (a CPU engine on shared cores: 0.08): a recording "
        "says how far its launches differed",
        "verdict",
        check=is_fraction,
        allowed="a fraction between 0 and 1, e.g. 0.03",
    )
    confirm_launches: int | None = setting(
        None,
        "fresh launches a night may make to decide the points its launches' noise left "
        "undecided (past the fail margin but not surely, or a collapse not ruled out): after the "
        "profile's tests, the server is launched again and only those points measured again, "
        "then judged over tonight's launches; default 1 for a launched server, 0 for one the "
        "plugin attaches to (it cannot launch that one again: its undecided points WARN)",
        "verdict",
        check=optional(is_int_at_least(0)),
        allowed="a whole number of launches, 0 or more",
    )
    parity_prompts: int = setting(
        8,
        "greedy parity (perf_suites/test_outputs.py): how many of the built-in prompts a "
        "speculative profile and its base answer at temperature 0, one at a time",
        "verdict",
        check=is_pos_int,
        allowed="a positive integer, e.g. 8",
    )
    parity_tokens: int = setting(
        32,
        "greedy parity: the tokens asked for per prompt; the continuations are compared token "
        "by token",
        "verdict",
        check=is_pos_int,
        allowed="a positive integer, e.g. 32",
    )
    parity_tie_gap: float = setting(
        0.1,
        "greedy parity: a divergence where the base's top two candidates were within this "
        "log-probability gap is a floating-point near-tie, reported and excused; any other FAILs",
        "verdict",
        check=lambda v: is_number(v) and v >= 0,
        allowed="a log-probability gap of 0 or more, e.g. 0.1",
    )
    accuracy_tasks: str | None = setting(
        None,
        "accuracy (perf_suites/test_outputs.py): a JSONL task file, one item a line "
        "(`question`, `answer`, optional `category`), relative to the profiles file; unset: the "
        "built-in arithmetic set (60 items, no download)",
        "verdict",
        check=optional(is_str),
        allowed="a path to a .jsonl file",
    )
    accuracy_tokens: int = setting(
        16,
        "accuracy: the tokens asked for per item (the answer is the response's last number)",
        "verdict",
        check=is_pos_int,
        allowed="a positive integer, e.g. 16",
    )
    accuracy_margin: float = setting(
        0.03,
        "accuracy: a significant drop (McNemar on the golden's own items, p < 0.001) of at "
        "least this share of the items FAILs; any other drop significant at p < 0.01 WARNs",
        "verdict",
        check=is_fraction,
        allowed="a fraction between 0 and 1, e.g. 0.03 (3 points)",
    )
    pin_acceptance: bool = setting(
        False,
        "a speculative profile's engine channel: launch it once more with its acceptance pinned "
        "at its golden accept length (SGLang's `SGLANG_SIMULATE_ACC_LEN`, which the simulated "
        "engine models) and gate that speedup over the base: the engine's speed without the "
        "drafter's luck, beside the real speedup. One more launch a night, its closed-loop "
        "levels only; SGLang-family engines only (elsewhere the channel says it is not available)",
        "verdict",
        check=lambda v: isinstance(v, bool),
        allowed="true or false",
    )
    accept_length_floor: float | None = setting(
        None,
        "a speculative profile's least accept length (tokens a verify step, the engine's own "
        "count): a level whose mean falls below it FAILs, golden or not (SGLang's nightly holds "
        "Kimi-K2.5 with EAGLE-3 at 2.8); unset: judged against its golden only",
        "verdict",
        check=optional(lambda v: is_number(v) and v >= 1),
        allowed="a number of at least 1, e.g. 2.8",
    )
    latency_fail_margin: float = setting(
        0.30,
        'the fail margin of latency checks (`check(point, metric="ttft_p99_s")`): a '
        "latency fails when significantly more than this much slower",
        "verdict",
        check=is_fraction,
        allowed="a fraction between 0 and 1, e.g. 0.15",
    )
    latency_warn_margin: float = setting(
        0.10,
        "the warn margin of latency checks",
        "verdict",
        check=is_fraction,
        allowed="a fraction between 0 and 1, e.g. 0.15",
    )
    #: Per-request limits (``ttft_s``, ``itl_s``, ``tpot_s``, ``e2e_s``) for ``goodput_req_s``.
    slo: Mapping[str, float] = setting(
        {},
        "per-request limits for `goodput_req_s`: `ttft_s`, `itl_s`, `tpot_s`, `e2e_s` (seconds)",
        "verdict",
        essential=True,
        check=lambda v: (
            isinstance(v, dict)
            and all(k in SLO_KEYS and is_number(x) and x > 0 for k, x in v.items())
        ),
        allowed=f"a table of limits in seconds > 0 with keys {', '.join(SLO_KEYS)}, "
        "e.g. { ttft_s = 2.0, itl_s = 0.05 }",
        convert=lambda v: {k: float(x) for k, x in v.items()},
    )
    #: The percentile at which a rate level must meet every ``slo`` limit (capacity search).
    slo_percentile: float = setting(
        99.0,
        "the percentile at which a rate level must meet every `slo` limit (the capacity search)",
        "verdict",
        check=lambda v: is_number(v) and 0 < v <= 100,
        allowed="a percentile in (0, 100], e.g. 99",
    )
    # -- scale out -------------------------------------------------------------------------
    router: RouterSpec | None = setting(
        None,
        "SGLang's router in front of data-parallel workers: `{ workers = 2, policy = "
        '"round_robin" }` launches the workers and the router (`sglang-router` from PyPI, in '
        "`python`, or the table's own `python`); with a `url`, the url is a router someone else "
        "runs, whose workers are asked for (`router = {}`). Also `args`: more router flags. "
        "See *Scale out*",
        "scale",
        convert=topology.router_spec,
        to_toml=lambda r: r.as_table() if r is not None else None,
    )
    #: "local" (a process on this machine) or "srun": one rank per node through Slurm
    #: (servers/srun.py), ``nodes`` of them, with ``srun_args`` (partition, GPUs, time, …).
    launcher: str = setting(
        "local",
        '`"local"` (a process on this machine) or `"srun"`: one rank per node through '
        "Slurm, inside the allocation pytest runs in (`salloc`, `sbatch`) or one srun requests; "
        "every rank gets `--nnodes`, `--node-rank $SLURM_NODEID` and `--dist-init-addr` (the "
        "first node); requests go to rank 0; teardown cancels the job step. See *Scale out*",
        "scale",
        check=lambda v: v in topology.LAUNCHERS,
        allowed='"local" (the default: a process on this machine) or "srun" (one rank per node '
        "through Slurm)",
    )
    nodes: int = setting(
        1,
        '`launcher = "srun"`: the number of nodes, one rank each',
        "scale",
        check=is_pos_int,
        allowed="a positive integer",
    )
    srun_args: tuple[str, ...] = setting(
        [],
        '`launcher = "srun"`: more srun options, e.g. `["--partition=gpu", '
        '"--gpus-per-node=8", "--time=60"]`',
        "scale",
        check=is_str_list,
        allowed='a list of srun options, e.g. ["--partition=gpu", "--gpus-per-node=8", '
        '"--time=60"]',
    )
    # -- launch, wait and stop -------------------------------------------------------------
    ready_timeout_s: float = setting(
        1800.0, "loading may take this long", "lifecycle", check=is_seconds, allowed=SECONDS
    )
    shutdown_timeout_s: float = setting(
        60.0,
        "SIGTERM grace before SIGKILL of the process group",
        "lifecycle",
        check=is_seconds_or_zero,
        allowed=SECONDS_OR_ZERO,
    )
    request_timeout_s: float = setting(
        600.0,
        "a stream silent this long has stalled",
        "lifecycle",
        check=is_seconds,
        allowed=SECONDS,
    )
    gpu_wait_s: float = setting(
        0.0,
        '`engine = "sglang"`: wait this long for other processes to free the GPUs before '
        "failing the launch",
        "lifecycle",
        check=is_seconds_or_zero,
        allowed=SECONDS_OR_ZERO,
    )
    metrics_interval_s: float = setting(
        0.5,
        "sample the server's /metrics gauges (running and queued requests, KV-cache use, "
        "throughput, cache hits, accept length) this often through each point's runs, from a "
        "process of its own; a FAIL or WARN names what they show (a full KV cache, a growing "
        "queue); 0: no series",
        "load",
        check=is_seconds_or_zero,
        allowed=SECONDS_OR_ZERO,
    )
    startup: str = setting(
        "warm",
        "what a launch of this profile is on its runner, for `llmperf.check_startup`: "
        '"cold" (nothing cached: a fresh runner, weights read from disk, kernels compiled; '
        'only a session\'s first launch counts) or "warm" (weights in the page cache, '
        "compile caches filled); part of the startup golden's key",
        "load",
        check=lambda v: v in STARTUP_KINDS,
        allowed='"cold" or "warm"',
    )
    startup_cv: float = setting(
        0.1,
        "how far one launch's startup moves from another's, as a fraction (the prior the "
        "startup verdict pools with what the golden's launches measured; see "
        "*Golden baselines and verdicts*)",
        "verdict",
        check=is_fraction,
        allowed="a fraction between 0 and 1, e.g. 0.1",
    )
    profiler_steps: int = setting(
        32,
        "with `--perf-profile-on`: the server's profiler (SGLang's `/start_profile`) records "
        "this many forward steps of one more run of a point, then stops by itself (an unbounded "
        "trace of a busy server runs to tens of GB)",
        "load",
        check=is_pos_int,
        allowed="a positive integer: forward steps",
    )
    # -- resolved where the engines are known (profiles_file.py), not fields --------------
    #: Whether the server speculates: ``speculative``, else detected from the engine's flags.
    speculative: bool = False
    #: What answers 200 once the server serves: ``health_path``, else a router's
    #: ``/readiness`` (its workers are healthy), else the engine's.
    readiness_path: str = "/health"
    #: Set on a copy the run makes of a profile (a recording's later launch, A/B/A's second
    #: base): what it is a copy of, and why.
    copy_of: ProfileCopy | None = None

    @property
    def origin(self) -> str:
        """The profile this one is a copy of (A/B/A, a recording's later launch), else itself."""
        return self.copy_of.of if self.copy_of is not None else self.name

    @property
    def measures_open_loop(self) -> bool:
        """Whether this launch measures the open-loop points (rate levels, the capacity search):
        every launch but a recording's later ones (``NAME@launch2``, …). Those re-measure the
        closed-loop levels, whose margins are narrow beside how far launches differ; an
        open-loop window waits for its arrivals (tens of seconds a run at a low rate) and a
        capacity search probes rate after rate, so they are recorded on the first launch alone
        and judged with the launch spread the profile's ``launch_cv`` allows."""
        return self.copy_of is None or self.copy_of.kind not in (
            CopyKind.LATER_LAUNCH,
            CopyKind.PINNED,
        )

    @property
    def pinned(self) -> bool:
        """Whether this is the engine channel's launch (``NAME@pinned``)."""
        return self.copy_of is not None and self.copy_of.kind is CopyKind.PINNED

    def copy(self, kind: CopyKind, name: str) -> Profile:
        """This profile measured again under ``name``, as a copy of ``kind``."""
        from dataclasses import replace

        return replace(self, name=name, copy_of=ProfileCopy(self.name, kind))

    @property
    def launches_to_confirm(self) -> int:
        """``confirm_launches``, else 1 for a server the plugin launches, 0 for one it attaches
        to (it cannot launch that one again)."""
        if self.confirm_launches is not None:
            return self.confirm_launches
        return 0 if self.url is not None else 1

    @property
    def launches_to_record(self) -> int:
        """``record_launches``, else 1 for a server the plugin attaches to (it cannot launch
        that one again) and, for one it launches, as many as its ``launch_cv`` needs: 2 up to
        5 %, 4 up to 8 %, 6 above (core/staging.py)."""
        from pytest_llmperf.core.staging import launches_to_record

        if self.record_launches is not None:
            return self.record_launches
        return 1 if self.url is not None else launches_to_record(self.launch_cv)

    @property
    def output_len(self) -> int:
        """Output tokens per request: the fixed length, or the mean of ``output_lengths``."""
        return round(self.output.mean)

    @property
    def output_lengths(self) -> Lengths | None:
        """The output lengths drawn per request (seeded), when ``output_len`` is a distribution."""
        return None if self.output.is_fixed else self.output

    def requests_per_run(self, concurrency: int) -> int:
        """N = max(floor, 4·C): enough waves that the ramp-down tail stays small."""
        return max(self.min_requests, 4 * concurrency)

    def arrivals(self, rate: float) -> Arrivals:
        """How requests arrive at rate level ``rate``."""
        from pytest_llmperf.core.schedule import Arrivals

        return Arrivals(rate, self.arrival, self.burstiness)

    def measured_over(self, concurrency: int) -> dict[str, Any]:
        """What a run is measured over, for the golden's workload fingerprint: N whole requests,
        or a steady-state window (its length is not part of it: the steady state's tok/s does
        not depend on how long it is watched, only its precision does)."""
        if self.window_s is None:
            return {"requests_per_run": self.requests_per_run(concurrency)}
        return {"measured_over": "steady-state window"}

    @property
    def dataset_path(self) -> Path | None:
        return Path(self.path_field(self.dataset)) if self.dataset else None

    @property
    def interpreter(self) -> str:
        """The Python that runs the server (``python``; relative to the profiles file), or ours."""
        return self.path_field(self.python, command=True) if self.python else sys.executable

    @property
    def model_argument(self) -> str:
        """``model`` as the server gets it. A model written as a relative path (``./``, ``../``)
        or with ``~`` is a local directory, relative to the profiles file; anything else (a hub
        id such as ``org/name``, an absolute path) is passed as written. llama.cpp's GGUF path
        is always a file path (see engines/llamacpp.py)."""
        if self.model.startswith(("./", "../", "~")):
            return self.path_field(self.model)
        return self.model

    def path_field(self, value: str, *, command: bool = False) -> str:
        """A path written in the profile: ``~`` expanded, relative to the profiles file. With
        ``command``, a bare name (no ``/``) stays as it is, to be looked up on PATH."""
        expanded = os.path.expanduser(value)
        if os.path.isabs(expanded) or (command and os.sep not in expanded):
            return expanded
        return str(self.source.parent / expanded)

    @property
    def where(self) -> str:
        """How an error names this profile: ``<file>: profile 'NAME'``."""
        return f"{self.source}: profile {self.name!r}"


#: The profile fields, by TOML key: ``{key: (attribute, Setting)}``.
SETTINGS: dict[str, tuple[str, Setting]] = settings_of(Profile)


@dataclass(frozen=True)
class ProfileSet:
    """All profiles of one file, plus the file's default selection."""

    path: Path
    profiles: Mapping[str, Profile]
    default: tuple[str, ...] = ()

    def names(self) -> list[str]:
        return sorted(self.profiles)

    def select(self, names: list[str]) -> list[Profile]:
        """The named profiles, in order; an unknown name lists the available ones."""
        chosen = []
        for name in names:
            if name not in self.profiles:
                hint = did_you_mean(name, self.profiles)
                raise ProfileError(
                    f"unknown profile {name!r} in {self.path}.{hint} "
                    f"Available profiles: {', '.join(self.names())}."
                )
            chosen.append(self.profiles[name])
        return chosen


def profile_table(profile: Profile) -> dict[str, Any]:
    """The profile as its TOML table (every field, ``extends`` applied): what a profile that
    extends it starts from."""
    table = {}
    for key, (attribute, s) in SETTINGS.items():
        value = getattr(profile, attribute)
        table[key] = s.to_toml(value) if s.to_toml is not None else as_toml(value)
    return table


def build_profiles(path: Path, tables: Mapping[str, Any]) -> dict[str, Profile]:
    """Every profile of a file's ``[profiles]`` tables, ``extends`` applied, each field checked
    alone and together (not yet against its engine: see profiles_file.py)."""
    for name, table in tables.items():
        if not PROFILE_NAME.fullmatch(name):
            raise ProfileError(
                f"{path}: profile name {name!r} is not allowed: a name is used in file and "
                f"directory names, so it is {PROFILE_NAME_RULE}. Rename [profiles.{json.dumps(name)}]."
            )
        if not isinstance(table, dict):
            raise ProfileError(
                f"{path}: profiles.{name} must be a table, got {type(table).__name__}."
            )
    built: dict[str, Profile] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> Profile:
        if name in chain:
            cycle = " -> ".join((*chain, name))
            raise ProfileError(f"{path}: profile {name!r}, field 'extends': cycle {cycle}.")
        if name not in built:
            parent = tables[name].get("extends")
            if parent is not None and (not isinstance(parent, str) or parent not in tables):
                raise ProfileError(
                    f"{path}: profile {name!r}, field 'extends': {parent!r} is not a profile in "
                    f"this file. Available profiles: {', '.join(sorted(tables))}."
                )
            inherited = profile_table(resolve(parent, (*chain, name))) if parent else None
            built[name] = build(path, name, tables[name], inherited)
        return built[name]

    for name in tables:
        resolve(name, ())
    return {name: built[name] for name in tables}


def build(
    path: Path, name: str, table: Mapping[str, Any], inherited: Mapping[str, Any] | None
) -> Profile:
    """One profile from its own ``table`` and the table of the profile it extends."""
    where = f"{path}: profile {name!r}"
    for key in table:
        if key not in SETTINGS:
            hint = did_you_mean(key, SETTINGS)
            raise ProfileError(
                f"{where}: unknown field {key!r}.{hint} Allowed fields: {', '.join(SETTINGS)}."
            )
    values: dict[str, Any] = {}
    for key, (_, s) in SETTINGS.items():
        start = inherited[key] if inherited is not None and s.inherited else as_toml(s.default)
        own = table.get(key, start)
        if s.merge and key in table:
            check(where, key, own, s.check, s.allowed)
            own = {**start, **own}
        values[key] = own
    for key, (_, s) in SETTINGS.items():
        if s.appends_to is not None:
            check(where, s.appends_to, values[s.appends_to], is_str_list, STR_LIST)
            check(where, key, values[key], s.check, s.allowed)
            values[s.appends_to] = [*values[s.appends_to], *values[key]]
    converted: dict[str, Any] = {}
    for key, (attribute, s) in SETTINGS.items():
        check(where, key, values[key], s.check, s.allowed)
        try:
            converted[attribute] = s.convert(values[key]) if s.convert else values[key]
        except ValueError as exc:
            raise ProfileError(f"{where}, field {key!r}: {exc}.") from None
    profile = Profile(name=name, source=path, **converted)
    for together in TOGETHER:
        together(profile)
    return profile


def margins_in_order(p: Profile) -> None:
    for prefix in ("", "latency_"):
        warn, fail = getattr(p, f"{prefix}warn_margin"), getattr(p, f"{prefix}fail_margin")
        if warn > fail:
            raise ProfileError(
                f"{p.where}, field '{prefix}warn_margin': {warn} is larger than "
                f"{prefix}fail_margin {fail}; a warning must trigger before a failure."
            )


def one_prompt_source(p: Profile) -> None:
    """The workload fields together: one prompt source, what the API can send."""
    where, prefix, input_len = p.where, p.shared_prefix_len, p.input_len
    if input_len is not None and p.dataset is not None:
        raise ProfileError(
            f"{where}, fields 'input_len' and 'dataset': a request's prompt comes from one of "
            "them; remove one."
        )
    if input_len is not None and p.api == "chat":
        raise ProfileError(
            f"{where}, field 'input_len': synthetic prompts are token ids, which the chat API "
            '(messages of text) cannot take; use api = "sglang" or "openai", or a dataset.'
        )
    if p.thinking is not None and p.api != "chat":
        raise ProfileError(
            f"{where}, field 'thinking': the thinking switch is the chat template's, which only "
            f'the chat API applies (api is {p.api!r}); set api = "chat" or remove thinking.'
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


def attached_launches_nothing(p: Profile) -> None:
    if p.url is not None and p.command is not None:
        raise ProfileError(
            f"{p.where}, field 'command': a profile with a url launches nothing; remove command."
        )


def topology_in_order(p: Profile) -> None:
    topology.check_router(p.where, p.router, p.url)
    elsewhere = "url" if p.url is not None else "router" if p.router is not None else None
    topology.check_launcher(p.where, p.launcher, p.nodes, p.srun_args, p.args, elsewhere)


#: The checks of fields that depend on each other, in order.
TOGETHER = (margins_in_order, one_prompt_source, attached_launches_nothing, topology_in_order)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""
