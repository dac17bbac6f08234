"""Environment fingerprint: what a measurement is comparable with.

- **hard** keys must match a golden's for a verdict (else INCOMPARABLE, with the diff): the
  hardware (GPU model and count, or ``sim``, or the CPU model), the engine and model, and of
  the server's resolved arguments (SGLang's ``/server_info``) only what decides speed: every
  flag the profile sets, as the server resolved it, and the documented PERFORMANCE_KEYS, which
  matter even when defaulted. Per point, the workload (API, output length, requests per run,
  prompt-set hash) is hard too. A field that one side has and the other does not (SGLang adds
  and removes dozens with every release) is never hard.
- **soft** keys are recorded and diffed, never blocking: versions of the server, sglang,
  flashinfer, torch, CUDA, the driver, NCCL, Python and this plugin, and for a launched
  ``llamacpp`` or ``command`` engine the digest of its executable (two builds of one llama.cpp
  commit report the same version but may serve at different speeds), and every other server
  field. The nightly tests new SGLang versions, so neither a version nor a new or removed field
  may block; they are diffed and shown with a failing verdict, new and removed fields counted.

GPU facts come from NVML (``nvidia-ml-py``, optional, imported lazily).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from pytest_llmperf import __version__
from pytest_llmperf.engines import llamacpp
from pytest_llmperf.profiles import Profile

#: /server_info fields that describe this process or its runtime state, not its configuration.
VOLATILE_SERVER_KEYS = frozenset(
    {
        "host",
        "port",
        "nccl_port",
        "dist_init_addr",
        "internal_states",
        "status",
        "version",
        "launch_command",
        "startup_time",
        "kv_events",
        "frontend",
        "api_key",
        "admin_api_key",
        "log_level",
        "log_level_http",
        "decode_log_interval",
        "enable_metrics",
        "served_model_name",
        "max_total_num_tokens",
        "max_req_input_len",
        "skip_server_warmup",
        "warmups",
        "random_seed",
        "engine",
        "file_storage_path",
        "model_path",
    }
)
#: Resolved server settings that decide speed even when the profile leaves them at their
#: defaults: parallelism, attention and sampling backends, KV-cache and model dtypes,
#: quantization, CUDA graphs, memory, batching limits, chunked prefill, scheduling, overlap
#: scheduling, all-reduce, compilation and speculative decoding.
PERFORMANCE_KEYS = frozenset(
    {
        "tp_size", "pp_size", "dp_size", "ep_size", "enable_dp_attention", "nnodes",
        "attention_backend", "prefill_attention_backend", "decode_attention_backend", "sampling_backend",
        "mm_attention_backend", "moe_runner_backend", "moe_a2a_backend",
        "kv_cache_dtype", "dtype", "quantization", "revision", "load_format",
        "cuda_graph_max_bs_decode", "cuda_graph_bs", "cuda_graph_config",
        "disable_cuda_graph", "disable_cuda_graph_padding",
        "mem_fraction_static", "max_running_requests", "max_total_tokens", "max_prefill_tokens",
        "chunked_prefill_size", "schedule_policy", "schedule_conservativeness", "disable_overlap_schedule",
        "disable_radix_cache", "stream_interval", "disable_custom_all_reduce",
        "flashinfer_allreduce_fusion_backend",
        "enable_torch_compile", "torch_compile_max_bs",
        "speculative_algorithm", "speculative_draft_model_path", "speculative_draft_model_revision",
        "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
        "speculative_attention_mode", "enable_spec_v2",
    }
)  # fmt: skip
#: Fields SGLang renamed, old name → new: compared under the new name.
RENAMED_SERVER_KEYS = {
    "cuda_graph_max_bs": "cuda_graph_max_bs_decode",
    "stream_output": "incremental_streaming_output",
}
#: Switches SGLang replaced by a setting, old field → (new field, its value when the switch is on).
#: From 0.5.14 ``--enable-flashinfer-allreduce-fusion`` resolves to the backend "auto" and the old
#: field always reads false; found by tests/engines/test_sglang_releases.py in 0.5.14's own code.
REPLACED_SERVER_SWITCHES = {
    "enable_flashinfer_allreduce_fusion": ("flashinfer_allreduce_fusion_backend", "auto"),
}
#: How many added, removed or changed server fields a soft diff names before "and N more".
SOFT_FIELDS_SHOWN = 8
PACKAGES = (
    "sglang",
    "flashinfer-python",
    "torch",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "sgl-kernel",
)


@dataclass(frozen=True)
class Fingerprint:
    hard: dict[str, Any]
    soft: dict[str, Any] = field(default_factory=dict)
    #: The server fields this profile sets (as field names): hard in every SGLang version.
    profile_keys: frozenset[str] = frozenset()

    @property
    def hardware_key(self) -> str:
        return str(self.hard["hardware"]["key"])

    @property
    def server_args(self) -> dict[str, Any]:
        """Every resolved server field, hard and soft."""
        return all_server_args(self.hard, self.soft)

    @property
    def comparability_hash(self) -> str:
        """What the profile sets, on what hardware, engine and model: stable across SGLang
        releases (a speedup's golden keeps its base's hash to notice a changed base)."""
        stable = {k: v for k, v in self.hard.items() if k != "server_args"}
        if self.profile_keys and isinstance(self.hard.get("server_args"), dict):
            args = canonical(self.hard["server_args"])
            stable["server_args"] = {k: args[k] for k in sorted(self.profile_keys) if k in args}
        else:
            stable["server_args"] = self.hard.get("server_args")
        return hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {
            "hard": self.hard,
            "soft": self.soft,
            "comparability_hash": self.comparability_hash,
            "profile_keys": sorted(self.profile_keys),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fingerprint:
        return cls(
            dict(data["hard"]),
            dict(data.get("soft") or {}),
            frozenset(data.get("profile_keys") or ()),
        )


def take(
    profile: Profile, server_info: dict[str, Any], command: list[str] | None = None
) -> Fingerprint:
    """The server's fingerprint (each point adds its workload definition as a hard key);
    ``command`` is the launched command line (none when attached)."""
    sglang_info = server_info.get("/server_info") or server_info.get("/get_server_info") or {}
    props = server_info.get("/props") or {}
    hard: dict[str, Any] = {
        "hardware": hardware(profile),
        "engine": profile.engine,
        "model": profile.model,
    }
    profile_keys: frozenset[str] = frozenset()
    other: dict[str, Any] = {}
    if sglang_info:
        profile_keys = flag_fields(profile.args)
        hard["server_args"], other = split_server_args(
            normalized_server_args(sglang_info), profile_keys
        )
    else:
        hard["server_args"] = other_server_args(props, profile)
    soft: dict[str, Any] = {
        "server_args": other,
        "server_version": sglang_info.get("version") or props.get("build_info"),
        "server_binary": executable_digest(command)
        if profile.engine in ("llamacpp", "command") and command
        else None,
        "pytest_llmperf": __version__,
        "python": platform.python_version(),
        "packages": installed_versions(),
        **nvidia_versions(),
    }
    return Fingerprint(hard, {k: v for k, v in soft.items() if v not in (None, {})}, profile_keys)


def flag_fields(args: tuple[str, ...] | list[str]) -> frozenset[str]:
    """The server fields the flags in ``args`` set: ``--tp-size 8`` → ``tp_size``."""
    names = {arg[2:].split("=", 1)[0].replace("-", "_") for arg in args if arg.startswith("--")}
    renamed = {**RENAMED_SERVER_KEYS, **{k: v[0] for k, v in REPLACED_SERVER_SWITCHES.items()}}
    return frozenset(renamed.get(name, name) for name in names)


def canonical(server_args: Mapping[str, Any]) -> dict[str, Any]:
    """Server fields under their current names (a renamed field's old name when the new is
    absent), a replaced switch as the setting that replaced it."""
    out = dict(server_args)
    for old, new in RENAMED_SERVER_KEYS.items():
        if old in out:
            value = out.pop(old)
            out.setdefault(new, value)
    for old, (new, on) in REPLACED_SERVER_SWITCHES.items():
        if old in out:
            switched = out.pop(old)
            if out.get(new) is None:
                out[new] = on if switched else None
    return out


def split_server_args(
    server_args: Mapping[str, Any], profile_keys: frozenset[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(hard, soft): what decides speed (the profile's flags and PERFORMANCE_KEYS), and the rest."""
    args = canonical(server_args)
    hard_keys = profile_keys | PERFORMANCE_KEYS
    return (
        {k: v for k, v in args.items() if k in hard_keys},
        {k: v for k, v in args.items() if k not in hard_keys},
    )


def all_server_args(hard: Mapping[str, Any], soft: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved server fields of a fingerprint, wherever they are stored (a golden recorded
    before the hard/soft split holds all of them under ``hard``)."""
    hard_args, soft_args = hard.get("server_args"), soft.get("server_args")
    return canonical({**(soft_args if isinstance(soft_args, dict) else {}),
                      **(hard_args if isinstance(hard_args, dict) else {})})  # fmt: skip


def hard_changes(golden: Mapping[str, Any], current: Fingerprint) -> list[str]:
    """What makes a golden INCOMPARABLE: a differing hardware, engine or model, or a differing
    value of a server field that decides speed and that both sides have."""
    top = diff({k: v for k, v in golden.items() if k != "server_args"},
               {k: v for k, v in current.hard.items() if k != "server_args"})  # fmt: skip
    old, new = golden.get("server_args"), current.hard.get("server_args")
    if not current.profile_keys or not isinstance(old, dict) or not isinstance(new, dict):
        return top + [f"server_args.{line}" for line in diff(_dict(old), _dict(new))]
    hard_keys = current.profile_keys | PERFORMANCE_KEYS
    old, new = canonical(old), canonical(new)
    both = {k for k in hard_keys if k in old and k in new}
    return top + [
        f"server_args.{line}" for line in diff({k: old[k] for k in both}, {k: new[k] for k in both})
    ]


def soft_changes(golden: Mapping[str, Any], current: Fingerprint) -> list[str]:
    """What changed since the golden that does not block: versions and binaries (one line each),
    then the server fields added and removed (counted, the first few named) and changed."""
    lines = diff(
        {k: v for k, v in golden.get("soft", {}).items() if k != "server_args"},
        {k: v for k, v in current.soft.items() if k != "server_args"},
    )
    old = all_server_args(golden.get("hard", {}), golden.get("soft", {}))
    new = current.server_args
    if not old or not new or not current.profile_keys:
        return lines
    hard_keys = current.profile_keys | PERFORMANCE_KEYS
    added, removed = sorted(set(new) - set(old)), sorted(set(old) - set(new))
    changed = sorted(k for k in set(old) & set(new) if k not in hard_keys and old[k] != new[k])
    if added:
        lines.append(f"{len(added)} server field(s) added: {_some(added)}")
    if removed:
        lines.append(f"{len(removed)} server field(s) removed: {_some(removed)}")
    lines += [
        f"server_args.{k}: {_show(old[k])} → {_show(new[k])}" for k in changed[:SOFT_FIELDS_SHOWN]
    ]
    if len(changed) > SOFT_FIELDS_SHOWN:
        lines.append(f"and {len(changed) - SOFT_FIELDS_SHOWN} more changed server field(s)")
    return lines


def _some(names: list[str]) -> str:
    more = f", and {len(names) - SOFT_FIELDS_SHOWN} more" if len(names) > SOFT_FIELDS_SHOWN else ""
    return ", ".join(names[:SOFT_FIELDS_SHOWN]) + more


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"value": value}


def executable_digest(command: list[str]) -> str | None:
    """``name sha256:<16 hex>`` of the file ``command`` executes, or None if it is not a file."""
    path = shutil.which(command[0]) or command[0]
    if not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return f"{os.path.basename(path)} sha256:{digest.hexdigest()[:16]}"


def normalized_server_args(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sorted(info.items()) if k not in VOLATILE_SERVER_KEYS}


def other_server_args(props: dict[str, Any], profile: Profile) -> dict[str, Any]:
    """llama.cpp's ``/props``: slots and context; other servers: the profile's own command line."""
    if props:
        return llamacpp.server_args(props)
    return {"command": list(profile.command or ()), "args": list(profile.args)}


def hardware(profile: Profile) -> dict[str, Any]:
    """What the numbers depend on: ``sim`` for the simulation, GPUs via NVML, else the CPU."""
    if profile.engine == "sim":
        return {"key": "sim"}
    gpus = nvml_gpus({**os.environ, **profile.env})
    if gpus:
        name = gpus[0]
        return {"key": f"{len(gpus)}x{_slug(name)}", "gpu_model": name, "gpu_count": len(gpus)}
    cpu = cpu_model()
    return {"key": _slug(cpu), "cpu_model": cpu}


def nvml_gpus(env: Mapping[str, str]) -> list[str]:
    """Names of the GPUs a server with ``env`` uses (respecting CUDA_VISIBLE_DEVICES), or []."""
    from pytest_llmperf.engines.gpu import nvml, visible_indices

    with nvml() as (pynvml, _):
        if pynvml is None:
            return []
        names = []
        for i in visible_indices(pynvml.nvmlDeviceGetCount(), env):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return names


def nvidia_versions() -> dict[str, Any]:
    from pytest_llmperf.engines.gpu import nvml

    with nvml() as (pynvml, _):
        if pynvml is None:
            return {}
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        return {
            "driver": driver.decode() if isinstance(driver, bytes) else driver,
            "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
        }


def installed_versions() -> dict[str, str]:
    """Versions of the serving stack importable here (the server's own version is in server_version)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown-cpu"


def diff(golden: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``key: golden → now`` for every leaf that differs (dotted keys)."""
    a, b = _flatten(golden), _flatten(current)
    lines = []
    for key in sorted(set(a) | set(b)):
        if a.get(key, _MISSING) != b.get(key, _MISSING):
            lines.append(f"{key}: {_show(a.get(key, _MISSING))} → {_show(b.get(key, _MISSING))}")
    return lines


_MISSING = object()


def _show(value: Any) -> str:
    return "(absent)" if value is _MISSING else json.dumps(value)


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"
