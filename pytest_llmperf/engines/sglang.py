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

from pytest_llmperf.core.versions import parse_version
from pytest_llmperf.engines.base import Engine, Prepared

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile

#: The first SGLang that reports speculative counts over the OpenAI API (when asked), on its
#: completions and its chat endpoint alike (``return_spec_tokens_details``).
SPEC_DETAILS_OVER_OPENAI = (0, 5, 19)
#: The profile APIs that go through SGLang's OpenAI-compatible server (completions, chat).
OPENAI_APIS = ("openai", "chat")
#: The serving stack whose versions join the soft fingerprint (the server's own version is
#: ``server_version``): a new FlashInfer or NCCL under the same SGLang is worth seeing.
PACKAGES = (
    "sglang",
    "flashinfer-python",
    "torch",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "sgl-kernel",
)
#: What a worker's summary shows of its /server_info (behind a router).
SUMMARY_KEYS = (
    "model_path",
    "tp_size",
    "dp_size",
    "attention_backend",
    "speculative_algorithm",
    "max_running_requests",
)


def server_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """SGLang's /server_info (or its deprecated alias) from what a server said of itself."""
    found = info.get("/server_info") or info.get("/get_server_info") or {}
    return found if isinstance(found, dict) else {}


class SGLangEngine(Engine):
    name: ClassVar[str] = "sglang"
    health_path: ClassVar[str] = "/health_generate"
    speculative_flags: ClassVar[tuple[str, ...]] = ("--speculative-algorithm",)
    reserved_flags: ClassVar[tuple[str, ...]] = ("--port", "--host", "--model-path", "--model")
    routable: ClassVar[bool] = True
    multi_node: ClassVar[bool] = True
    uses_local_gpus: ClassVar[bool] = True
    profiler: ClassVar[str | None] = "SGLang's /start_profile (torch.profiler)"
    #: Greedy parity and accuracy ask /generate, which every SGLang server serves beside its
    #: OpenAI API, whatever the profile's api: token ids, top-2 log-probabilities, no chat
    #: template (a thinking profile's chat API would answer with its thinking first).
    greedy_api: ClassVar[str | None] = "sglang"
    #: Read by every release of the matrix, 0.5.6 to 0.5.23 (docs/how-to/quality.md).
    pins_acceptance: ClassVar[str | None] = "SGLANG_SIMULATE_ACC_LEN"
    #: The module the interpreter runs (the simulated engine has its own).
    module: ClassVar[str] = "sglang.launch_server"
    packages: ClassVar[tuple[str, ...]] = PACKAGES

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

    # -- what the server says of itself (/server_info) ----------------------------------------

    @property
    def performance_keys(self) -> frozenset[str]:  # type: ignore[override]
        from pytest_llmperf.engines.sglang_args import PERFORMANCE_KEYS

        return PERFORMANCE_KEYS

    def fingerprint_args(
        self, info: Mapping[str, Any], profile: Profile
    ) -> tuple[dict[str, Any], dict[str, Any], frozenset[str]]:
        """/server_info split into what decides speed and the rest (engines/sglang_args.py);
        the command line where the server said nothing."""
        from pytest_llmperf.engines import sglang_args

        found = server_info(info)
        if not found:
            return super().fingerprint_args(info, profile)
        return sglang_args.split(found, profile.args)

    def canonical(self, server_args: Mapping[str, Any]) -> dict[str, Any]:
        from pytest_llmperf.engines.sglang_args import canonical

        return canonical(server_args)

    def server_version(self, info: Mapping[str, Any]) -> str | None:
        version = server_info(info).get("version")
        return str(version) if version is not None else None

    def summary(self, info: Mapping[str, Any]) -> dict[str, Any]:
        found = server_info(info)
        return {key: found[key] for key in SUMMARY_KEYS if key in found}

    def draft_shape(self, server_args: Mapping[str, Any]) -> tuple[int | None, int | None]:
        max_bs = server_args.get("cuda_graph_max_bs_decode") or server_args.get("cuda_graph_max_bs")
        return _int_or_none(server_args.get("speculative_num_steps")), _int_or_none(max_bs)

    def request_extras(self, profile: Profile, info: Mapping[str, Any]) -> dict[str, Any]:
        """Over the OpenAI APIs (completions and chat: a thinking model's), SGLang sends a
        speculative server's verify counts only when asked (0.5.19+)."""
        version = parse_version(str(server_info(info).get("version")))
        if (
            profile.api in OPENAI_APIS
            and profile.speculative
            and version
            and version >= SPEC_DETAILS_OVER_OPENAI
        ):
            return {"return_spec_tokens_details": True}
        return {}

    def accept_length_note(self, profile: Profile, info: Mapping[str, Any]) -> str | None:
        version = parse_version(str(server_info(info).get("version")))
        if (
            profile.api in OPENAI_APIS
            and profile.speculative
            and version
            and version < SPEC_DETAILS_OVER_OPENAI
        ):
            return (
                f"accept length cannot be measured over the OpenAI API on SGLang "
                f"{'.'.join(map(str, version))}: it reports speculative counts there only from "
                '0.5.19 on. Use api = "sglang" (native /generate) to measure it.'
            )
        return None

    def context_per_request(self, info: Mapping[str, Any]) -> int | None:
        """SGLang's ``max_req_input_len`` (its context length less one, or its KV cache's
        tokens), plus the one token it keeps back."""
        limit = server_info(info).get("max_req_input_len")
        return limit + 1 if isinstance(limit, int) and limit > 0 else None

    def running_at_once(self, info: Mapping[str, Any]) -> int | None:
        """``max_running_requests`` as the server reports it (set by the flag, or 48 for a
        speculative server whose flag is unset), times its ``dp_size``: each data-parallel
        scheduler runs that many. None where it reports none (SGLang then derives its cap from
        the KV cache's size)."""
        found = server_info(info)
        cap = _int_or_none(found.get("max_running_requests"))
        if cap is None or cap <= 0:
            return None
        return cap * max(1, _int_or_none(found.get("dp_size")) or 1)


def _int_or_none(value: Any) -> int | None:
    """A server setting as an int (servers that do not model a flag may echo it as a string)."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
