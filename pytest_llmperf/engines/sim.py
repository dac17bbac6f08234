"""The simulated engine: a stand-in for ``sglang.launch_server`` that needs no GPU.

It takes SGLang's flags, serves SGLang's native and OpenAI APIs, logs and stops as SGLang does
(:mod:`pytest_llmperf.sim`), and runs in the plugin's own interpreter. Its figures depend on the
simulation, not on the machine: its hardware key is ``sim`` everywhere (with ``--sim-on-gpus``,
standing in for a server on this host's GPUs, it is the GPUs' key). Its throughput runs on its
own clock (an absolute schedule of steps), and it counts the time its host made it fall
behind that schedule (``sglang:sim_behind_schedule_seconds_total``: a point it fell behind for
is the host's figure, reported and not gated). Its latency tails are milliseconds of Python
scheduling on the host, so they are gated only against goldens recorded on the same host
(``latency_is_the_hosts``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmperf.engines.base import Prepared
from pytest_llmperf.engines.sglang import SGLangEngine

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile


class SimEngine(SGLangEngine):
    name: ClassVar[str] = "sim"
    module: ClassVar[str] = "pytest_llmperf.sim"
    latency_is_the_hosts: ClassVar[bool] = True
    #: The simulation has no kernels to profile (it answers /start_profile 404, as a server
    #: without the endpoint would).
    profiler: ClassVar[str | None] = None

    def on_local_gpus(self, profile: Profile) -> bool:
        # It stands in for a GPU server, but a sick GPU cannot slow it: only with --sim-on-gpus
        # are the host's GPUs read around it (the GPU paths, end to end, on any GPU host).
        return "--sim-on-gpus" in profile.args and super().on_local_gpus(profile)

    def prepare(self, profile: Profile) -> Prepared:
        return Prepared(profile)  # the simulation takes every release's flags as written

    def preflight(self, profile: Profile, env: Mapping[str, str]) -> list[str]:
        return super().preflight(profile, env) if self.on_local_gpus(profile) else []

    def after_stop(self, profile: Profile, pids: Sequence[int]) -> list[str]:
        return super().after_stop(profile, pids) if self.on_local_gpus(profile) else []

    def stop_signal_to_group(self) -> bool:
        return True

    def hardware(self, profile: Profile) -> dict[str, Any]:
        return super().hardware(profile) if self.on_local_gpus(profile) else {"key": "sim"}
