"""SGLang's resolved server settings (``/server_info``) as a fingerprint sees them.

- **hard** (a golden with another value is INCOMPARABLE): every flag the profile sets, as the
  server resolved it, and PERFORMANCE_KEYS, which decide speed even when defaulted.
- **soft** (diffed, never blocking): every other field. VOLATILE_SERVER_KEYS describe the
  process (its port, its start time), not its configuration, and are dropped.
- Fields SGLang renamed are compared under their new names (RENAMED_SERVER_KEYS), a switch it
  replaced by a setting as that setting (REPLACED_SERVER_SWITCHES).

Any server that answers /server_info like SGLang (the simulated engine, a stand-in) is read so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
        "tp_size",
        "pp_size",
        "dp_size",
        "ep_size",
        "enable_dp_attention",
        "nnodes",
        "attention_backend",
        "prefill_attention_backend",
        "decode_attention_backend",
        "sampling_backend",
        "mm_attention_backend",
        "moe_runner_backend",
        "moe_a2a_backend",
        "kv_cache_dtype",
        "dtype",
        "quantization",
        "revision",
        "load_format",
        "cuda_graph_max_bs_decode",
        "cuda_graph_bs",
        "cuda_graph_config",
        "disable_cuda_graph",
        "disable_cuda_graph_padding",
        "mem_fraction_static",
        "max_running_requests",
        "max_total_tokens",
        "max_prefill_tokens",
        "chunked_prefill_size",
        "schedule_policy",
        "schedule_conservativeness",
        "disable_overlap_schedule",
        "disable_radix_cache",
        "stream_interval",
        "disable_custom_all_reduce",
        "flashinfer_allreduce_fusion_backend",
        "enable_torch_compile",
        "torch_compile_max_bs",
        "speculative_algorithm",
        "speculative_draft_model_path",
        "speculative_draft_model_revision",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "speculative_attention_mode",
        "enable_spec_v2",
    }
)
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


def flag_fields(args: Sequence[str]) -> frozenset[str]:
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


def normalized_server_args(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sorted(info.items()) if k not in VOLATILE_SERVER_KEYS}


def split(
    server_info: Mapping[str, Any], args: Sequence[str]
) -> tuple[dict[str, Any], dict[str, Any], frozenset[str]]:
    """``(hard, soft, profile_keys)`` of a server's /server_info, for a profile with ``args``."""
    profile_keys = flag_fields(tuple(args))
    hard, soft = split_server_args(normalized_server_args(dict(server_info)), profile_keys)
    return hard, soft, profile_keys
