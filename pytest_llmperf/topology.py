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


def router_spec(value: Any) -> RouterSpec | None:
    """The ``router`` table as a RouterSpec (None when absent); a ValueError says what is wrong
    with it and the fix (which engines a router routes to is the engine's say, and whether
    ``workers`` is needed depends on ``url``: see :func:`check_router`)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(
            f'got {value!r}; expected a table, e.g. {{ workers = 2, policy = "round_robin" }}'
        )
    unknown = sorted(set(value) - set(ROUTER_KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; allowed: {', '.join(ROUTER_KEYS)}")
    workers = value.get("workers")
    if workers is not None and not (
        isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1
    ):
        raise ValueError(
            f"'workers' is {workers!r}; expected the number of workers to launch, a positive "
            "integer (e.g. workers = 2)"
        )
    policy = value.get("policy", "round_robin")
    if policy not in POLICIES:
        raise ValueError(
            f"'policy' is {policy!r}; expected one of {', '.join(map(repr, POLICIES))}"
        )
    python, args = value.get("python"), value.get("args", [])
    if python is not None and not (isinstance(python, str) and python):
        raise ValueError(f"'python' is {python!r}; expected a path to an interpreter")
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise ValueError(f"'args' is {args!r}; expected a list of strings")
    for flag in ("--host", "--port", "--worker-urls", "--policy", "--prometheus-port"):
        if any(a.split("=", 1)[0] == flag for a in args):
            raise ValueError(
                f"'args' sets {flag}, which the plugin sets itself; remove it"
                f"{' and use the policy key' if flag == '--policy' else ''}"
            )
    return RouterSpec(workers, policy, python, tuple(args))


def check_router(where: str, spec: RouterSpec | None, url: str | None) -> None:
    """A launched router needs its number of workers; a remote one (``url``) lists its own."""
    if spec is None:
        return
    field = f"{where}, field 'router'"
    if url is None and spec.workers is None:
        raise ProfileError(
            f"{field}: 'workers' is None; expected the number of workers to launch, a positive "
            "integer (e.g. workers = 2)."
        )
    if url is not None and spec.workers is not None:
        raise ProfileError(
            f"{field}: 'workers' is set, but this profile's url is a router someone else runs, "
            "whose workers are asked for (GET /workers); remove workers."
        )


#: Flags the srun launcher sets on every rank (servers/srun.py).
RANK_FLAGS = ("--nnodes", "--node-rank", "--dist-init-addr")
#: srun options the launcher sets itself.
SRUN_OWN = ("--nodes", "-N", "--ntasks", "-n", "--ntasks-per-node", "--label", "--job-name", "-J")
LAUNCHERS = ("local", "srun")


def check_launcher(
    where: str,
    launcher: str,
    nodes: int,
    srun_args: tuple[str, ...],
    args: tuple[str, ...],
    launched_elsewhere: str | None,
) -> None:
    """``launcher``, ``nodes`` and ``srun_args`` together (which engines have ranks to launch
    is the engine's say); ``launched_elsewhere``: "url" or "router" when the profile has one."""
    if launcher == "local" and (nodes > 1 or srun_args):
        field = "nodes" if nodes > 1 else "srun_args"
        raise ProfileError(
            f"{where}, field '{field}': only used with launcher = \"srun\" (a local server runs "
            'on one machine); set launcher = "srun" or remove it.'
        )
    if launcher != "srun":
        return
    if launched_elsewhere is not None:
        raise ProfileError(
            f"{where}, field 'launcher': \"srun\" launches the server; a profile with a "
            f"{launched_elsewhere} cannot also; remove one."
        )
    for flag in (*RANK_FLAGS, *SRUN_OWN):
        table = "args" if flag in RANK_FLAGS else "srun_args"
        if any(a.split("=", 1)[0] == flag for a in (args if table == "args" else srun_args)):
            raise ProfileError(
                f"{where}, field '{table}': {flag} is set by the srun launcher (from "
                "nodes and the allocation); remove it."
            )
