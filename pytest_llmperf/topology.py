"""A profile's servers beyond one process: SGLang's router in front of data-parallel workers,
and one model over several nodes launched through Slurm (``launcher = "srun"``).

``router = { workers = 2, policy = "round_robin" }`` launches two workers from the profile
(each its own process on its own free port, as the profile alone would be launched) and
SGLang's router (``python -m sglang_router.launch_router``, the ``sglang-router`` package from
PyPI, in the profile's ``python``) in front of them; every request goes to the router. With a
``url``, the url is a router someone else runs: ``router = {}`` (or with a ``policy``, for the
record) makes the plugin ask it for its workers (``GET /workers``) instead of launching any.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import ProfileError

#: The router's routing policies (sglang-router 0.3's --policy choices).
POLICIES = ("random", "round_robin", "cache_aware", "power_of_two")
ROUTER_KEYS = ("workers", "policy", "python", "args")
#: Engines whose servers SGLang's router can route to (the simulated engine stands in for SGLang).
ROUTED_ENGINES = ("sglang", "sim")
#: What of a router's topology decides speed: hard fingerprint keys (a golden of 2 workers does
#: not gate 4); the router's version is soft.
TOPOLOGY_HARD_KEYS = ("router", "policy", "workers", "dp_size")


@dataclass(frozen=True)
class RouterSpec:
    """A router and its workers, as the profile's ``router`` table says."""

    #: Workers to launch (None: a remote router, whose workers are asked for).
    workers: int | None = None
    policy: str = "round_robin"
    #: The interpreter that runs the router (None: the profile's ``python``).
    python: str | None = None
    #: More flags for the router, e.g. ["--cache-threshold", "0.5"].
    args: tuple[str, ...] = ()

    def as_table(self) -> dict[str, Any]:
        table: dict[str, Any] = {"policy": self.policy, "args": list(self.args)}
        if self.workers is not None:
            table["workers"] = self.workers
        if self.python is not None:
            table["python"] = self.python
        return table


def router(where: str, value: Any, engine: str, url: str | None) -> RouterSpec | None:
    """The ``router`` field as a RouterSpec (None when absent); a ProfileError names what is
    wrong with it and the fix."""
    if value is None:
        return None
    field = f"{where}, field 'router'"
    if not isinstance(value, dict):
        raise ProfileError(
            f"{field}: got {value!r}; expected a table, e.g. "
            '{ workers = 2, policy = "round_robin" }.'
        )
    unknown = sorted(set(value) - set(ROUTER_KEYS))
    if unknown:
        raise ProfileError(f"{field}: unknown key(s) {unknown}; allowed: {', '.join(ROUTER_KEYS)}.")
    if engine not in ROUTED_ENGINES:
        raise ProfileError(
            f"{field}: SGLang's router routes to SGLang workers; this profile has engine = "
            f'{engine!r}. Use engine = "sglang" (or "sim"), or remove the router.'
        )
    workers = value.get("workers")
    if url is None and not (
        isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1
    ):
        raise ProfileError(
            f"{field}: 'workers' is {workers!r}; expected the number of workers to launch, "
            "a positive integer (e.g. workers = 2)."
        )
    if url is not None and workers is not None:
        raise ProfileError(
            f"{field}: 'workers' is set, but this profile's url is a router someone else runs, "
            "whose workers are asked for (GET /workers); remove workers."
        )
    policy = value.get("policy", "round_robin")
    if policy not in POLICIES:
        raise ProfileError(
            f"{field}: 'policy' is {policy!r}; expected one of {', '.join(map(repr, POLICIES))}."
        )
    python, args = value.get("python"), value.get("args", [])
    if python is not None and not (isinstance(python, str) and python):
        raise ProfileError(f"{field}: 'python' is {python!r}; expected a path to an interpreter.")
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise ProfileError(f"{field}: 'args' is {args!r}; expected a list of strings.")
    for flag in ("--host", "--port", "--worker-urls", "--policy", "--prometheus-port"):
        if any(a.split("=", 1)[0] == flag for a in args):
            raise ProfileError(
                f"{field}: 'args' sets {flag}, which the plugin sets itself; remove it"
                f"{' and use the policy key' if flag == '--policy' else ''}."
            )
    return RouterSpec(workers, policy, python, tuple(args))


#: Flags the srun launcher sets on every rank (servers/srun.py).
RANK_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr")
#: srun options the launcher sets itself.
SRUN_OWN = ("--nodes", "-N", "--ntasks", "-n", "--ntasks-per-node", "--label", "--job-name", "-J")


def launcher(where: str, f: dict[str, Any]) -> dict[str, Any]:
    """``launcher``, ``nodes`` and ``srun_args`` checked together; the Profile's fields."""
    kind, nodes, args = f["launcher"], f["nodes"], f["srun_args"]
    if kind not in ("local", "srun"):
        raise ProfileError(
            f"{where}, field 'launcher': got {kind!r}; expected \"local\" (the default: a "
            'process on this machine) or "srun" (one rank per node through Slurm).'
        )
    if not (isinstance(nodes, int) and not isinstance(nodes, bool) and nodes >= 1):
        raise ProfileError(f"{where}, field 'nodes': got {nodes!r}; expected a positive integer.")
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise ProfileError(
            f"{where}, field 'srun_args': got {args!r}; expected a list of srun options, e.g. "
            '["--partition=gpu", "--gpus-per-node=8", "--time=60"].'
        )
    if kind == "local" and (nodes > 1 or args):
        field = "nodes" if nodes > 1 else "srun_args"
        raise ProfileError(
            f"{where}, field '{field}': only used with launcher = \"srun\" (a local server runs "
            'on one machine); set launcher = "srun" or remove it.'
        )
    if kind == "srun":
        if f["engine"] not in ROUTED_ENGINES:
            raise ProfileError(
                f"{where}, field 'launcher': \"srun\" starts SGLang's ranks (--nnodes, "
                f"--node-rank, --dist-init-addr); this profile has engine = {f['engine']!r}. Use "
                'engine = "sglang" (or "sim").'
            )
        if f["url"] is not None or f["router"] is not None:
            raise ProfileError(
                f"{where}, field 'launcher': \"srun\" launches the server; a profile with a "
                f"{'url' if f['url'] is not None else 'router'} cannot also; remove one."
            )
        for flag in (*RANK_FLAGS, *SRUN_OWN):
            table = "args" if flag in RANK_FLAGS else "srun_args"
            if any(a.split("=", 1)[0] == flag for a in (f["args"] if table == "args" else args)):
                raise ProfileError(
                    f"{where}, field '{table}': {flag} is set by the srun launcher (from "
                    "nodes and the allocation); remove it."
                )
    return {"launcher": kind, "nodes": nodes, "srun_args": tuple(args)}
