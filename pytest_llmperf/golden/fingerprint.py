"""Environment fingerprint: what a measurement is comparable with.

- **hard** keys must match a golden's for a verdict (else INCOMPARABLE, with the diff): the
  hardware (host/hardware.py: the GPUs, driver, CUDA, power limit and clocks, or the CPU's
  microarchitecture, vector extensions, cores and memory, or ``sim``), the engine and model, and of
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

GPU facts come from NVML (``nvidia-ml-py``, optional, imported lazily). Which server fields
decide speed, under which names, and which packages are its serving stack is the knowledge of
the engine that read the server (:meth:`~pytest_llmperf.engines.base.Engine.reading`: SGLang's
/server_info, llama.cpp's /props), kept with the fingerprint as ``reads_as``.
"""

from __future__ import annotations

import hashlib
import json
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from pytest_llmperf import __version__, engines
from pytest_llmperf.errors import ProfileError
from pytest_llmperf.host import hardware as hardware_probe
from pytest_llmperf.profiles import Profile
from pytest_llmperf.topology import TOPOLOGY_HARD_KEYS

#: How many added, removed or changed server fields a soft diff names before "and N more".
SOFT_FIELDS_SHOWN = 8


@dataclass(frozen=True)
class Fingerprint:
    hard: dict[str, Any]
    soft: dict[str, Any] = field(default_factory=dict)
    #: The server fields this profile sets (as field names): hard in every SGLang version.
    profile_keys: frozenset[str] = frozenset()
    #: The engine whose readings its server fields are ("": the profile's engine): a
    #: ``command`` or ``remote`` server that answers as SGLang is read as SGLang.
    reads_as: str = ""

    @property
    def reader(self) -> engines.Engine:
        """The engine that knows its server fields' names and which of them decide speed."""
        name = self.reads_as or str(self.hard.get("engine") or "")
        try:
            return engines.get(name)
        except ProfileError:  # an engine of a project not importable here: its fields as they are
            return engines.Engine()

    @property
    def hardware_key(self) -> str:
        return str(self.hard["hardware"]["key"])

    @property
    def server_args(self) -> dict[str, Any]:
        """Every resolved server field, hard and soft."""
        return all_server_args(self.hard, self.soft, self.reader)

    @property
    def comparability_hash(self) -> str:
        """What the profile sets, on what hardware, engine and model: stable across SGLang
        releases (a speedup's golden keeps its base's hash to notice a changed base)."""
        stable = {k: v for k, v in self.hard.items() if k != "server_args"}
        if self.profile_keys and isinstance(self.hard.get("server_args"), dict):
            args = self.reader.canonical(self.hard["server_args"])
            stable["server_args"] = {k: args[k] for k in sorted(self.profile_keys) if k in args}
        else:
            stable["server_args"] = self.hard.get("server_args")
        return hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()

    def to_json(self) -> dict[str, Any]:
        """As a golden and the results keep it (``reads_as`` only where it is not the engine)."""
        return {
            "hard": self.hard,
            "soft": self.soft,
            "comparability_hash": self.comparability_hash,
            "profile_keys": sorted(self.profile_keys),
            **({"reads_as": self.reads_as} if self.reads_as else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fingerprint:
        return cls(
            dict(data["hard"]),
            dict(data.get("soft") or {}),
            frozenset(data.get("profile_keys") or ()),
            str(data.get("reads_as") or ""),
        )


def take(
    profile: Profile,
    server_info: dict[str, Any],
    command: list[str] | None = None,
    topology: Mapping[str, Any] | None = None,
) -> Fingerprint:
    """The server's fingerprint (each point adds its workload definition as a hard key);
    ``command`` is the launched command line (none when attached), ``topology`` how several
    servers make one (a router: its policy, worker count and DP size are hard keys, its version
    soft). What each part is comes from the profile's engine (pytest_llmperf/engines/)."""
    engine = engines.of(profile)
    reader = engine.reading(server_info)
    hardware = engine.hardware(profile)
    server_args, other, profile_keys = reader.fingerprint_args(server_info, profile)
    hard: dict[str, Any] = {
        "hardware": hardware,
        "engine": profile.engine,
        "model": profile.model,
        "server_args": server_args,
    }
    if topology:
        hard["topology"] = {k: v for k, v in topology.items() if k in TOPOLOGY_HARD_KEYS}
    soft: dict[str, Any] = {
        "server_args": other,
        "server_version": reader.server_version(server_info),
        "server_binary": engine.binary(command) if command else None,
        "router_version": (topology or {}).get("router_version"),
        "pytest_llmperf": __version__,
        "python": platform.python_version(),
        "packages": installed_versions(reader.packages),
        **hardware_probe.nvidia_versions(),
        **(hardware_probe.soft_facts() if "cpu_arch" in hardware else {}),
        # The host the client (and a simulated engine) ran on, whatever the hardware key.
        "host": hardware_probe.cpu_facts()["key"],
    }
    soft = {k: v for k, v in soft.items() if v not in (None, {})}
    reads_as = reader.name if reader is not engine else ""
    return Fingerprint(hard, soft, profile_keys, reads_as)


def all_server_args(
    hard: Mapping[str, Any], soft: Mapping[str, Any], reader: engines.Engine
) -> dict[str, Any]:
    """The resolved server fields of a fingerprint, wherever they are stored (a golden recorded
    before the hard/soft split holds all of them under ``hard``), under ``reader``'s names."""
    hard_args, soft_args = hard.get("server_args"), soft.get("server_args")
    return reader.canonical(
        {
            **(soft_args if isinstance(soft_args, dict) else {}),
            **(hard_args if isinstance(hard_args, dict) else {}),
        }
    )


def hard_changes(golden: Mapping[str, Any], current: Fingerprint) -> list[str]:
    """What makes a golden INCOMPARABLE: a differing hardware, engine or model, or a differing
    value of a server field that decides speed and that both sides have."""
    top = diff(
        {k: v for k, v in golden.items() if k != "server_args"},
        {k: v for k, v in current.hard.items() if k != "server_args"},
    )
    old, new = golden.get("server_args"), current.hard.get("server_args")
    if not current.profile_keys or not isinstance(old, dict) or not isinstance(new, dict):
        return top + [f"server_args.{line}" for line in diff(_dict(old), _dict(new))]
    reader = current.reader
    hard_keys = current.profile_keys | reader.performance_keys
    old, new = reader.canonical(old), reader.canonical(new)
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
    old = all_server_args(golden.get("hard", {}), golden.get("soft", {}), current.reader)
    new = current.server_args
    if not old or not new or not current.profile_keys:
        return lines
    hard_keys = current.profile_keys | current.reader.performance_keys
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


def installed_versions(packages: tuple[str, ...]) -> dict[str, str]:
    """Versions of the serving stack importable here (the server's own version is in
    server_version): ``packages``, as the engine names them."""
    found = {}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


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
