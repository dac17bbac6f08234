"""A profile's servers beyond one process: SGLang's router in front of data-parallel workers.

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
