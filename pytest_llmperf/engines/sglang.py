"""SGLang: ``<python> -m sglang.launch_server``, in the interpreter the profile names.

Before the launch the interpreter is asked for its SGLang version (package metadata, no
import) and the flags are adapted to it (:mod:`~pytest_llmperf.engines.sglang_flags`); on a GPU
node the GPUs must be free (NVML). Ready means ``/health_generate`` answers 200 (a real
one-token generation; SGLang binds its port only after loading, 10-15 minutes for a large
model), and the loading stage is read from its log
(:mod:`~pytest_llmperf.engines.sglang_log`). SGLang is stopped by SIGTERM to its launcher
alone, which then stops its scheduler and detokenizer; afterwards the GPUs must be released.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_llmperf.engines.base import Engine, Prepared

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile


class SGLangEngine(Engine):
    name: ClassVar[str] = "sglang"
    health_path: ClassVar[str] = "/health_generate"
    speculative_flags: ClassVar[tuple[str, ...]] = ("--speculative-algorithm",)
    reserved_flags: ClassVar[tuple[str, ...]] = ("--port", "--host", "--model-path", "--model")
    routable: ClassVar[bool] = True
    multi_node: ClassVar[bool] = True
    uses_local_gpus: ClassVar[bool] = True
    profiler: ClassVar[str | None] = "SGLang's /start_profile (torch.profiler)"
    #: The module the interpreter runs (the simulated engine has its own).
    module: ClassVar[str] = "sglang.launch_server"

    def prepare(self, profile: Profile) -> Prepared:
        from pytest_llmperf.engines import sglang_flags

        version = sglang_flags.installed_version(profile)
        where = f"{profile.source}: profile {profile.name!r}, field 'args'"
        adapted = sglang_flags.adapt(profile.args, version, where=where)
        return Prepared(replace(profile, args=tuple(adapted.args)), adapted.notes, version)

    def on_local_gpus(self, profile: Profile) -> bool:
        from pytest_llmperf.engines import sglang_flags

        return super().on_local_gpus(profile) and not sglang_flags.on_cpu(profile.args)

    def preflight(self, profile: Profile, env: Mapping[str, str]) -> list[str]:
        from pytest_llmperf.engines import sglang_flags
        from pytest_llmperf.host import gpu

        if sglang_flags.on_cpu(profile.args):
            return []
        return gpu.preflight(profile.name, env, profile.gpu_wait_s)

    def profiler_request(self, profile: Profile, output_dir: Path, steps: int) -> dict[str, Any]:
        # Fields every release since 0.5.6 takes; no stacks or shapes: a small trace, and
        # the summary needs neither.
        from pytest_llmperf.engines import sglang_flags

        return {
            "output_dir": str(output_dir),
            "num_steps": steps,
            "activities": ["CPU"] if sglang_flags.on_cpu(profile.args) else ["CPU", "GPU"],
            "with_stack": False,
            "record_shapes": False,
        }

    def command(self, profile: Profile, host: str, port: int, run_dir: Path) -> list[str]:
        return [
            profile.interpreter,
            "-m",
            self.module,
            "--model-path",
            profile.model_argument,
            "--host",
            host,
            "--port",
            str(port),
            *profile.args,
        ]

    def loading_stage(self, log_path: Path | None) -> str | None:
        from pytest_llmperf.engines.sglang_log import read_stage

        return read_stage(log_path)

    def stop_signal_to_group(self) -> bool:
        # SGLang shuts down cleanly when its launcher alone gets SIGTERM: the launcher stops its
        # scheduler and detokenizer, then multiprocessing's resource tracker (which ignores
        # SIGTERM) unlinks the semaphores they leaked (sem.mp-*). SIGTERM to the whole group
        # instead kills the scheduler first, which the launcher treats as a crash (5 s of
        # "crash diagnostics", then it SIGKILLs its own tree, tracker included).
        return False

    def after_stop(self, profile: Profile, pids: Sequence[int]) -> list[str]:
        from pytest_llmperf.engines import sglang_flags
        from pytest_llmperf.host import gpu

        if sglang_flags.on_cpu(profile.args):
            return []
        return gpu.wait_released(profile.name, pids, profile.env)

    def server_differences(
        self, base: Mapping[str, Any], spec: Mapping[str, Any], skip: frozenset[str]
    ) -> list[str]:
        from pytest_llmperf.engines.sglang_flags import server_differences

        return server_differences(dict(base), dict(spec), skip=skip)
