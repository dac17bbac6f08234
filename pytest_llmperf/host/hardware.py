"""The hardware a launched server runs on, as the key of its golden file.

The key is made from what changes a figure, so a golden recorded on other hardware is
INCOMPARABLE (with the diff) instead of a false FAIL:

- on GPUs (NVML): the model and count of the GPUs the server uses, the driver, the CUDA version
  the driver supports, the power limit and the maximum SM clock (the lowest of its GPUs');
- on a CPU: the architecture, the vendor's family and model numbers (the microarchitecture:
  "AMD EPYC" names every generation alike), the vector extensions that decide a CPU engine's
  speed (AVX2, AVX-512, AVX-512 BF16, AMX; SVE on Arm), the cores this process may use and the
  memory, in GiB.

What does not decide speed (the marketing name of the CPU) goes to the soft fingerprint
(:func:`soft_facts`).
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: cpuinfo flags that change what a CPU engine's kernels can use, in the order the key names them.
CPU_FEATURES = (
    ("avx2", "avx2"),
    ("avx512f", "avx512"),
    ("avx512_bf16", "avx512bf16"),
    ("amx_tile", "amx"),
    ("sve", "sve"),
    ("sve2", "sve2"),
)


def probe(profile_env: Mapping[str, str], gpus: bool = False) -> dict[str, Any]:
    """The GPUs a server with ``profile_env`` uses (its CUDA_VISIBLE_DEVICES), else the CPU.
    ``gpus``: the engine runs on this host's GPUs, so without them resolved the key says so
    (``gpus-unresolved``) instead of taking the CPU's: a golden of one GPU model must never be
    compared with another's because the same CPU hosts both."""
    facts, why = gpu_facts({**os.environ, **profile_env})
    if facts:
        return facts
    if gpus:
        return {"key": "gpus-unresolved", "gpus_unresolved": why}
    return cpu_facts()


def gpu_facts(env: Mapping[str, str]) -> tuple[dict[str, Any] | None, str]:
    """The key and facts of the GPUs ``env`` names, or (None, why not). A MIG slice is keyed by
    its profile ("…-mig-1g-10gb") and read for the rest on its parent GPU."""
    from pytest_llmperf.host.nvml import session, text

    with session() as (nv, why_not):
        if nv is None:
            return None, str(why_not)
        gpus, problems = nv.gpus(env)
        if not gpus:
            return None, "; ".join(problems + nv.warnings) or "NVML lists no GPU"
        first = gpus[0]
        name = text(nv.read(first.label, "its name", "nvmlDeviceGetName", first.parent) or "?")
        if first.mig:
            name = f"{name} MIG {first.mig}"
        driver = text(nv.read("NVML", "the driver version", "nvmlSystemGetDriverVersion") or "?")
        cuda = nv.read("NVML", "the CUDA version", "nvmlSystemGetCudaDriverVersion_v2")
        # The lowest over the GPUs: one capped GPU holds a tensor-parallel server back.
        power_mw = _lowest(
            nv.read(g.label, "its power limit", "nvmlDeviceGetPowerManagementLimit", g.parent,
                    optional=True) for g in gpus
        )  # fmt: skip
        sm_mhz = _lowest(
            nv.read(g.label, "its max SM clock", "nvmlDeviceGetMaxClockInfo", g.parent,
                    getattr(nv.nv, "NVML_CLOCK_SM", 1), optional=True) for g in gpus
        )  # fmt: skip
    power_w = power_mw // 1000 if power_mw else None
    cuda_version = f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else "?"
    parts = [f"{len(gpus)}x{slug(name)}", f"drv{driver}", f"cuda{cuda_version}"]
    parts += [f"{power_w}w"] if power_w else []
    parts += [f"{sm_mhz}mhz"] if sm_mhz else []
    return {
        "key": "-".join(parts),
        "gpu_model": name,
        "gpu_count": len(gpus),
        "driver": driver,
        "cuda_driver": cuda_version,
        "power_limit_w": power_w,
        "max_sm_clock_mhz": sm_mhz,
    }, ""


def cpu_facts(cpuinfo: str | None = None) -> dict[str, Any]:
    """The CPU's facts and key, from /proc/cpuinfo (or the text ``cpuinfo``)."""
    info = _cpuinfo(cpuinfo)
    arch = platform.machine() or "unknown"
    vendor = info.get("vendor_id", "")
    family, model = info.get("cpu family"), info.get("model")
    uarch = f"{slug(vendor.replace('Authentic', '').replace('Genuine', ''))}{family}.{model}"
    flags = set(info.get("flags", info.get("Features", "")).split())
    features = [name for flag, name in CPU_FEATURES if flag in flags]
    cores = _cores()
    memory = _memory_gib()
    parts = [arch, uarch] if family else [arch]
    parts += ["-".join(features) or "base", f"{cores}c", f"{memory}g"]
    return {
        "key": "-".join(p for p in parts if p),
        "cpu_arch": arch,
        "cpu_id": f"{vendor} {family}/{model}" if family else vendor or arch,
        "cpu_features": features,
        "cpu_cores": cores,
        "memory_gib": memory,
    }


def soft_facts() -> dict[str, Any]:
    """Recorded with a fingerprint, never blocking: the CPU's name."""
    return {"cpu_model": cpu_model()}


def nvidia_versions() -> dict[str, Any]:
    from pytest_llmperf.host.nvml import session, text

    with session() as (nv, _):
        if nv is None:
            return {}
        driver = nv.read("NVML", "the driver version", "nvmlSystemGetDriverVersion")
        cuda = nv.read("NVML", "the CUDA version", "nvmlSystemGetCudaDriverVersion_v2")
    versions = {"driver": text(driver) if driver else None}
    versions["cuda_driver"] = f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None
    return {k: v for k, v in versions.items() if v}


def cpu_model() -> str:
    return _cpuinfo().get("model name") or platform.processor() or platform.machine() or "unknown"


def _lowest(values: Iterable[Any]) -> Any:
    known = [v for v in values if v]
    return min(known) if known else None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def _cpuinfo(text: str | None = None) -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    if text is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                text = f.read()
        except OSError:
            return {}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _memory_gib() -> int:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20)
    except (OSError, ValueError, IndexError):
        pass
    return 0
