"""Environment fingerprint: what a measurement is comparable with.

- **hard** keys must match a golden's for a verdict (else INCOMPARABLE, with the diff): the
  hardware (GPU model and count, or ``sim``, or the CPU model), the engine and model, the
  server's own resolved arguments (SGLang's ``/server_info`` less volatile fields), and, per
  point, the workload (API, output length, requests per run, prompt-set hash).
- **soft** keys are recorded and diffed, never blocking: versions of the server, sglang,
  flashinfer, torch, CUDA, the driver, NCCL, Python and this plugin, and for a launched
  ``llamacpp`` or ``command`` engine the digest of its executable (two builds of one llama.cpp
  commit report the same version but may serve at different speeds). The nightly tests new
  SGLang versions, so versions must not block.

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

    @property
    def hardware_key(self) -> str:
        return str(self.hard["hardware"]["key"])

    @property
    def comparability_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.hard, sort_keys=True).encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        return {"hard": self.hard, "soft": self.soft, "comparability_hash": self.comparability_hash}


def take(
    profile: Profile, server_info: dict[str, Any], command: list[str] | None = None
) -> Fingerprint:
    """The server's fingerprint (each point adds its workload definition as a hard key);
    ``command`` is the launched command line (none when attached)."""
    sglang_info = server_info.get("/server_info") or server_info.get("/get_server_info") or {}
    props = server_info.get("/props") or {}
    hard = {
        "hardware": hardware(profile),
        "engine": profile.engine,
        "model": profile.model,
        "server_args": normalized_server_args(sglang_info)
        if sglang_info
        else other_server_args(props, profile),
    }
    soft: dict[str, Any] = {
        "server_version": sglang_info.get("version") or props.get("build_info"),
        "server_binary": executable_digest(command)
        if profile.engine in ("llamacpp", "command") and command
        else None,
        "pytest_llmperf": __version__,
        "python": platform.python_version(),
        "packages": installed_versions(),
        **nvidia_versions(),
    }
    return Fingerprint(hard, {k: v for k, v in soft.items() if v not in (None, {})})


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
