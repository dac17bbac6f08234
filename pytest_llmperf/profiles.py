"""Profiles: named server configurations and their workload, read from a TOML file.

A profile says which engine to start, with which model, flags and environment, which API
to speak and how to load it (concurrency levels, runs, output length). ``extends`` makes a
profile inherit another's fields, so two profiles differ in exactly what is compared:
lists are replaced, ``extra_args`` is appended to the inherited ``args``, ``env`` is merged.

Engines: ``sglang`` (``<python> -m sglang.launch_server``), ``sim`` (the simulated engine),
``llamacpp`` (llama.cpp's ``llama-server``: ``binary`` and a GGUF ``model``) and ``command``
(any server, started from ``command`` with ``{host}``/``{port}`` placeholders). Relative
``binary`` paths, and a ``llamacpp`` model path, are relative to the profiles file.

Every error names the file, the profile, the field and what is allowed.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf import engines, topology
from pytest_llmperf import profile_fields as fields
from pytest_llmperf.core.lengths import Lengths
from pytest_llmperf.engines import Engine
from pytest_llmperf.errors import ProfileError
from pytest_llmperf.topology import RouterSpec

if TYPE_CHECKING:
    from pytest_llmperf.core.schedule import Arrivals

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: Profile names become file and directory names (goldens, logs): no separators, no "..".
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
PROFILE_NAME_RULE = (
    "1-64 characters from letters, digits, '-', '_' and '.', starting with a letter or digit"
)

#: Fields and their defaults; a field missing here is not a profile field.
DEFAULTS: dict[str, Any] = {
    "description": "",
    "engine": "sim",
    "python": None,
    "model": "sim-model",
    "args": [],
    "extra_args": [],
    "env": {},
    "extra_body": {},
    "command": None,
    "binary": "llama-server",
    "health_path": None,
    "url": None,
    "speculative": None,
    "host": "127.0.0.1",
    "api": "sglang",
    "concurrency": [1, 2, 5, 10, 30, 70, 100, 250],
    "runs": 3,
    "output_len": 512,
    "input_len": None,
    "shared_prefix_len": 0,
    "dataset": None,
    "seed": 0,
    "token_id_range": None,
    "slo": {},
    "min_requests": 16,
    "window_s": None,
    "settle_s": 3.0,
    "warmup": True,
    "ready_timeout_s": 1800.0,
    "shutdown_timeout_s": 60.0,
    "request_timeout_s": 600.0,
    "fail_margin": 0.15,
    "warn_margin": 0.05,
    "latency_fail_margin": 0.30,
    "latency_warn_margin": 0.10,
    "base_profile": None,
    "differs_from_base": None,
    "gpu_wait_s": 0.0,
    "api_key_env": None,
    "request_rate": [],
    "arrival": "poisson",
    "burstiness": 1.0,
    "max_concurrency": None,
    "slo_percentile": 99.0,
    "trace": None,
    "time_scale": 1.0,
    "router": None,
    "launcher": "local",
    "nodes": 1,
    "srun_args": [],
}
PROFILE_FIELDS = ("extends", *DEFAULTS)


@dataclass(frozen=True)
class Profile:
    """One resolved profile (``extends`` already applied)."""

    name: str
    source: Path
    description: str = ""
    engine: str = "sim"
    python: str | None = None
    model: str = "sim-model"
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    #: Extra JSON fields merged into every request body (engine-specific sampling or cache knobs).
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    command: tuple[str, ...] | None = None
    #: engine = "llamacpp": the ``llama-server`` executable (a path, or a name on PATH).
    binary: str = "llama-server"
    #: The readiness endpoint; None: the engine's.
    health_path: str | None = None
    #: engine = "remote": the base URL of the server someone else runs.
    url: str | None = None
    #: Whether the server speculates; None: detected from the engine's flags.
    speculative_setting: bool | None = None
    host: str = "127.0.0.1"
    api: str = "sglang"
    concurrency: tuple[int, ...] = (1, 2, 5, 10, 30, 70, 100, 250)
    runs: int = 3
    #: Output tokens per request: the fixed length, or the mean of ``output_lengths``.
    output_len: int = 512
    #: Output lengths drawn per request (seeded), when ``output_len`` is a distribution.
    output_lengths: Lengths | None = None
    #: Synthetic prompts of exactly these lengths in tokens, sent as token ids (None: text).
    input_len: Lengths | None = None
    #: Tokens at the start of every synthetic prompt that are the same for all requests.
    shared_prefix_len: int = 0
    #: A request file (JSONL or ShareGPT), relative to the profiles file.
    dataset: str | None = None
    #: Seeds the synthetic prompts and every length drawn from a distribution.
    seed: int = 0
    #: [low, high): where synthetic token ids are drawn from (None: TOKEN_ID_RANGE, which
    #: every modern vocabulary covers; a tiny test model's may be smaller).
    token_id_range: tuple[int, int] | None = None
    #: Per-request limits (``ttft_s``, ``itl_s``, ``tpot_s``, ``e2e_s``) for ``goodput_req_s``.
    slo: Mapping[str, float] = field(default_factory=dict)
    min_requests: int = 16
    #: Measure each run over a steady-state window of this many seconds (staggered closed
    #: loop, window after the first prefills, in-flight requests cancelled at its close)
    #: instead of N = max(min_requests, 4·C) whole requests. None: whole requests.
    window_s: float | None = None
    #: After a run whose requests were cut at its window's close, the next run's window opens no
    #: earlier than this after the run began: SGLang 0.5.6 aborts a disconnected request 2 s
    #: later (0.5.19+ at once).
    settle_s: float = 3.0
    warmup: bool = True
    ready_timeout_s: float = 1800.0
    shutdown_timeout_s: float = 60.0
    request_timeout_s: float = 600.0
    fail_margin: float = 0.15
    warn_margin: float = 0.05
    #: The margins of latency checks (``check(point, metric="ttft_p99_s")``): a tail moves more
    #: from launch to launch than throughput does.
    latency_fail_margin: float = 0.30
    latency_warn_margin: float = 0.10
    #: A speculative profile's non-speculative counterpart (explicit, or found along ``extends``).
    base_profile: str | None = None
    #: Why a speculative profile differs from its base beyond speculation, on purpose (the
    #: plan says so once instead of a warning per launch).
    differs_from_base: str | None = None
    #: engine = "sglang": wait this long for other processes to free the GPUs before failing.
    gpu_wait_s: float = 0.0
    #: The environment variable whose value the client sends as ``Authorization: Bearer``
    #: (None: the value of ``--api-key`` in ``args``, if any).
    api_key_env: str | None = None
    #: Open-loop rate levels, requests/s (``llm_request_rate``; see load/open_loop.py).
    request_rate: tuple[float, ...] = ()
    #: How requests arrive at a rate level: "poisson", "gamma" (with ``burstiness``), "constant".
    arrival: str = "poisson"
    burstiness: float = 1.0
    #: Open loop: at most this many requests in flight; later arrivals wait for a slot.
    max_concurrency: int | None = None
    #: The percentile at which a rate level must meet every ``slo`` limit (capacity search).
    slo_percentile: float = 99.0
    #: A Mooncake-format JSONL trace to replay at its own times (``llmperf.replay()``),
    #: relative to the profiles file; ``time_scale`` stretches (> 1) or compresses its times.
    trace: str | None = None
    time_scale: float = 1.0
    #: SGLang's router in front of data-parallel workers (pytest_llmperf/topology.py).
    router: RouterSpec | None = None
    #: "local" (a process on this machine) or "srun": one rank per node through Slurm
    #: (servers/srun.py), ``nodes`` of them, with ``srun_args`` (partition, GPUs, time, …).
    launcher: str = "local"
    nodes: int = 1
    srun_args: tuple[str, ...] = ()
    extends: str | None = None
    #: Set on the second copy of a base profile under --perf-aba (A/B/A): its points are
    #: measured for the drift between the two base measurements, not gated.
    remeasure_of: str | None = None

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
    def output_spec(self) -> Lengths:
        return self.output_lengths or Lengths.fixed(self.output_len)

    @property
    def kind(self) -> Engine:
        """The engine that serves this profile (see pytest_llmperf/engines/)."""
        return engines.get(self.engine)

    @property
    def speculative(self) -> bool:
        if self.speculative_setting is not None:
            return self.speculative_setting
        return self.kind.is_speculative(self.args, self.command or ())

    @property
    def readiness_path(self) -> str:
        """What answers 200 once the server serves: ``health_path``, else a router's
        ``/readiness`` (its workers are healthy), else the engine's."""
        if self.health_path:
            return self.health_path
        return "/readiness" if self.router is not None else self.kind.health_path

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
                hint = _did_you_mean(name, self.profiles)
                raise ProfileError(
                    f"unknown profile {name!r} in {self.path}.{hint} "
                    f"Available profiles: {', '.join(self.names())}."
                )
            chosen.append(self.profiles[name])
        return chosen


def load_profiles(path: str | Path) -> ProfileSet:
    """Read, resolve and validate every profile of a TOML file."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(
            f"profiles file {path} does not exist. Create it or point --llm-profiles-file "
            "(ini: llmperf_profiles_file) at one."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}") from None

    unknown_top = sorted(set(raw) - {"profiles", "default"})
    if unknown_top:
        raise ProfileError(
            f"{path}: unknown top-level key(s) {unknown_top}; allowed: 'profiles' (a table of "
            "profiles) and 'default' (the profile names run when none is chosen)."
        )
    tables = raw.get("profiles")
    if not isinstance(tables, dict) or not tables:
        raise ProfileError(f"{path}: no profiles; define at least one [profiles.NAME] table.")
    for name, table in tables.items():
        if not PROFILE_NAME.fullmatch(name):
            raise ProfileError(
                f"{path}: profile name {name!r} is not allowed: a name is used in file and directory "
                f"names, so it is {PROFILE_NAME_RULE}. Rename [profiles.{_toml_key(name)}]."
            )
        if not isinstance(table, dict):
            raise ProfileError(
                f"{path}: profiles.{name} must be a table, got {type(table).__name__}."
            )

    profiles = {name: _resolve(path, tables, name, ()) for name in tables}
    profiles = {name: _with_base(path, profiles, profile) for name, profile in profiles.items()}

    default = raw.get("default", [])
    if isinstance(default, str):
        default = [default]
    if not isinstance(default, list) or not all(isinstance(d, str) for d in default):
        raise ProfileError(f"{path}: 'default' must be a list of profile names, got {default!r}.")
    for name in default:
        if name not in profiles:
            raise ProfileError(
                f"{path}: 'default' names unknown profile {name!r}. "
                f"Available profiles: {', '.join(sorted(profiles))}."
            )
    return ProfileSet(path=path, profiles=profiles, default=tuple(default))


def _resolve(path: Path, tables: dict[str, dict], name: str, chain: tuple[str, ...]) -> Profile:
    if name in chain:
        cycle = " -> ".join((*chain, name))
        raise ProfileError(f"{path}: profile {name!r}, field 'extends': cycle {cycle}.")
    table = tables[name]
    where = f"{path}: profile {name!r}"
    for key in table:
        if key not in PROFILE_FIELDS:
            hint = _did_you_mean(key, PROFILE_FIELDS)
            raise ProfileError(
                f"{where}: unknown field {key!r}.{hint} Allowed fields: {', '.join(PROFILE_FIELDS)}."
            )

    parent_name = table.get("extends")
    if parent_name is None:
        merged = {**DEFAULTS, "args": [], "extra_args": [], "env": {}, "extra_body": {}}
    else:
        if not isinstance(parent_name, str) or parent_name not in tables:
            raise ProfileError(
                f"{where}, field 'extends': {parent_name!r} is not a profile in this file. "
                f"Available profiles: {', '.join(sorted(tables))}."
            )
        parent = _resolve(path, tables, parent_name, (*chain, name))
        merged = _as_fields(parent)

    for key, value in table.items():
        if key == "extends":
            continue
        if key == "env":
            fields.check(
                where,
                key,
                value,
                fields.is_str_map,
                'a table of string values, e.g. { NCCL_PROTO = "LL" }',
            )
            merged["env"] = {**merged["env"], **value}
        elif key == "extra_body":
            fields.check(
                where,
                key,
                value,
                lambda v: isinstance(v, dict),
                "a table of JSON fields added to every request, e.g. { cache_prompt = false }",
            )
            merged["extra_body"] = {**merged["extra_body"], **value}
        else:
            merged[key] = value
    merged["args"] = fields.str_list(where, "args", merged["args"]) + fields.str_list(
        where, "extra_args", table.get("extra_args", [])
    )
    merged.pop("extra_args", None)
    return _build(path, name, parent_name, merged)


def _with_base(path: Path, profiles: Mapping[str, Profile], profile: Profile) -> Profile:
    """Resolve ``base_profile``: explicit, else the nearest non-speculative ancestor."""
    where = f"{path}: profile {profile.name!r}, field 'base_profile'"
    base = profile.base_profile
    if base is not None:
        if not profile.speculative:
            raise ProfileError(
                f"{where}: only a speculative profile (with --speculative-algorithm, or "
                "speculative = true) has a base; remove the field."
            )
        if not isinstance(base, str) or base not in profiles:
            raise ProfileError(
                f"{where}: {base!r} is not a profile in this file. "
                f"Available profiles: {', '.join(sorted(profiles))}."
            )
        if profiles[base].speculative:
            raise ProfileError(
                f"{where}: {base!r} is speculative itself; name the non-speculative profile "
                "that this one is compared with."
            )
        return profile
    if not profile.speculative:
        return profile
    parent = profiles.get(profile.extends) if profile.extends else None
    while parent is not None and parent.speculative:
        parent = profiles.get(parent.extends) if parent.extends else None
    return replace(profile, base_profile=parent.name) if parent is not None else profile


def _as_fields(profile: Profile) -> dict[str, Any]:
    fields = {
        key: getattr(profile, key) for key in DEFAULTS if key not in ("extra_args", "speculative")
    }
    fields["speculative"] = profile.speculative_setting
    fields["args"] = list(profile.args)
    fields["concurrency"] = list(profile.concurrency)
    fields["request_rate"] = list(profile.request_rate)
    fields["env"] = dict(profile.env)
    fields["extra_body"] = dict(profile.extra_body)
    fields["output_len"] = profile.output_spec.describe()
    fields["input_len"] = profile.input_len.describe() if profile.input_len else None
    fields["slo"] = dict(profile.slo)
    fields["token_id_range"] = list(profile.token_id_range) if profile.token_id_range else None
    fields["command"] = list(profile.command) if profile.command is not None else None
    fields["router"] = profile.router.as_table() if profile.router else None
    fields["srun_args"] = list(profile.srun_args)
    return fields


def _build(path: Path, name: str, parent: str | None, f: dict[str, Any]) -> Profile:
    """The profile of the merged fields ``f``: each field checked (FIELD_CHECKS), then the
    fields that depend on each other, then what the engine refuses."""
    where = f"{path}: profile {name!r}"
    engine = _engine(where, f["engine"])
    for key, (ok, allowed) in fields.FIELD_CHECKS.items():
        fields.check(where, key, f[key], ok, allowed)
    output = fields.lengths(where, "output_len", f["output_len"])
    assert output is not None
    input_len = fields.lengths(where, "input_len", f["input_len"])
    fields.check_workload(where, f, input_len)
    for prefix in ("", "latency_"):
        if f[f"{prefix}warn_margin"] > f[f"{prefix}fail_margin"]:
            raise ProfileError(
                f"{where}, field '{prefix}warn_margin': {f[f'{prefix}warn_margin']} is larger than "
                f"{prefix}fail_margin {f[f'{prefix}fail_margin']}; a warning must trigger before a "
                "failure."
            )
    engine.check_fields(where, f)
    taken = {
        key: fields.CONVERSIONS.get(key, lambda v: v)(f[key])
        for key in DEFAULTS
        if key
        not in (
            "extra_args",
            "speculative",
            "output_len",
            "input_len",
            "router",
            "launcher",
            "nodes",
            "srun_args",
        )
    }
    return Profile(
        name=name,
        source=path,
        **taken,
        speculative_setting=f["speculative"],
        output_len=round(output.mean),
        output_lengths=None if output.is_fixed else output,
        input_len=input_len,
        router=topology.router(where, f["router"], f["engine"], f["url"]),
        **topology.launcher(where, f),
        extends=parent,
    )


def _engine(where: str, name: Any) -> Engine:
    if not isinstance(name, str):
        raise ProfileError(f"{where}, field 'engine': got {name!r}; expected an engine's name.")
    try:
        return engines.get(name)
    except ProfileError as exc:
        raise ProfileError(f"{where}, field 'engine': {exc}.") from None


def _toml_key(name: str) -> str:
    return json.dumps(name)


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""
