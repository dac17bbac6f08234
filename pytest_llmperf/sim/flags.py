"""The simulated engine's command line: SGLang's ``launch_server`` flags, and its own.

Flags the simulation models are parsed as SGLang names and defaults them; any other flag that
a tested SGLang release has is accepted and reported as not modeled; a flag no tested release
has is refused (exit 2) as SGLang refuses it, and with ``--sim-release`` exactly what that
release's parser refuses is. Options starting with ``--sim-`` are the simulation's own: the
speed factor, the accept length, the load time and the fault knobs the plugin's tests use.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from pytest_llmperf.sim.model import DEFAULT_ACCEPT_LENGTH, DEFAULT_SPEED

DESCRIPTION = "An SGLang-compatible server that needs no GPU."
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")


#: The simulation's own options: flag → (argparse keywords). Fault knobs are hidden from the
#: fingerprint, as a real regression would be (see SimServer.server_args).
SIM_OPTIONS: dict[str, dict[str, Any]] = {
    "--sim-speed": {
        "type": float,
        "default": DEFAULT_SPEED,
        "help": "speed factor: simulated tok/s = seed figures x this. Default: %(default)s",
    },
    "--sim-accept-length": {
        "type": float,
        "default": DEFAULT_ACCEPT_LENGTH,
        "help": "mean tokens per speculative step. Default: %(default)s",
    },
    "--sim-load-time": {
        "type": float,
        "default": 0.5,
        "help": "seconds spent 'loading'. Default: %(default)s",
    },
    "--sim-warmup-time": {
        "type": float,
        "default": 0.3,
        "help": "the least seconds /health_generate answers 503 after the port is bound, while "
        "the warmup request runs (SGLang's is about 1 s on the CPU). Default: %(default)s",
    },
    "--sim-throughput-multiplier": {
        "type": float,
        "default": 1.0,
        "help": "fault knob: 0.7 makes every step 1/0.7 as long (a 30%% collapse)",
    },
    "--sim-fail-every": {"type": int, "default": 0, "help": "fault knob: every Nth request fails"},
    "--sim-kv-tokens": {
        "type": int,
        "default": 0,
        "help": "fault knob: a KV cache of N tokens, as when another process held GPU memory "
        "while SGLang sized its cache: no setting changes, so neither does the fingerprint",
    },
    "--sim-accuracy": {
        "type": float,
        "default": 0.9,
        "help": "the share of the built-in arithmetic questions answered right (by each "
        "question's hash, the same every time). Default: %(default)s",
    },
    "--sim-wrong-token-every": {
        "type": int,
        "default": 0,
        "help": "fault knob (speculative servers): a drafter whose wrong drafts are accepted: one "
        "output token in every N differs from the base's greedy choice",
    },
    "--sim-wrong-token": {
        "choices": ["runner-up", "third"],
        "default": "runner-up",
        "help": "with --sim-wrong-token-every: the token a wrong draft emits, the base's "
        "runner-up there or a third token. Default: %(default)s",
    },
    "--sim-short-logprobs": {
        "action": "store_true",
        "help": "fault knob (speculative servers): /generate's output_token_logprobs cover only "
        "the first token while completion_tokens counts them all (sgl-project/sglang#14046)",
    },
    "--sim-no-draft-counts": {
        "action": "store_true",
        "help": "fault knob (speculative servers): meta_info carries no speculative keys, as "
        "after an upgrade that renamed them (the server still speculates)",
    },
    "--sim-thinking-tokens": {
        "type": int,
        "default": 64,
        "help": "with --reasoning-parser: the tokens a chat request thinks before it answers "
        "(streamed as reasoning_content deltas, counted in usage.reasoning_tokens), unless its "
        "chat_template_kwargs turn thinking off (thinking / enable_thinking = false). "
        "Default: %(default)s",
    },
    "--sim-thinking-accept-length": {
        "type": float,
        "default": None,
        "help": "with speculation and a thinking request: mean tokens per speculative step while "
        "it thinks (its answer keeps --sim-accept-length), as a drafter's acceptance differs "
        "by thinking mode (InferenceX's Kimi-K2.5 EAGLE-3 goldens: 2.88 thinking on, 2.75 off). "
        "Default: the same as --sim-accept-length",
    },
    "--sim-crash-after-requests": {
        "type": int,
        "default": 0,
        "help": "fault knob: exit after N finished requests",
    },
    "--sim-crash-while-loading": {
        "action": "store_true",
        "help": "fault knob: exit half-way through loading",
    },
    "--sim-stall-after-tokens": {
        "type": int,
        "default": 0,
        "help": "fault knob: streams hang after N tokens",
    },
    "--sim-report-version": {
        "default": None,
        "help": "the version /server_info reports (a stand-in for a given SGLang release)",
    },
    "--sim-release": {
        "default": None,
        "metavar": "FILE",
        "help": "impersonate one SGLang release, described by FILE (its option table and ServerArgs "
        "fields, as scripts/sglang_parser.py describe reads them from the release itself): refuse "
        "what its parser refuses, report its version and exactly its /server_info fields",
    },
    "--sim-children": {
        "type": int,
        "default": 0,
        "help": "start N child processes, as SGLang starts its scheduler and detokenizer",
    },
    "--sim-ignore-sigterm": {
        "action": "store_true",
        "help": "fault knob: the server and its children ignore SIGTERM (only SIGKILL stops it)",
    },
    "--sim-on-gpus": {
        "action": "store_true",
        "help": "stand in for a server on this host's GPUs: the plugin's runner health, launch "
        "pre-flight, release wait, NVML sampling and hardware key treat it as one (the "
        "simulation itself computes nothing on them)",
    },
    "--sim-gpu-work-gib": {
        "type": float,
        "default": 0.0,
        "help": "GPU mode (needs torch): hold this many GiB of weights on --sim-gpu-device and "
        "read them once per decode step, so a step takes the device's real time "
        "(sim/gpu_work.py). Default: %(default)s (the modelled step)",
    },
    "--sim-gpu-device": {
        "default": "cuda",
        "help": "with --sim-gpu-work-gib: the torch device (cuda, cuda:1, cpu). Default: %(default)s",
    },
    "--sim-progress-cr": {
        "action": "store_true",
        "help": "draw progress bars with carriage returns, as SGLang 0.5.23 does",
    },
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pytest_llmperf.sim", description=DESCRIPTION)
    _sglang_flags(p)
    group = p.add_argument_group("simulation")
    for flag, keywords in SIM_OPTIONS.items():
        group.add_argument(flag, **keywords)
    return p


def _sglang_flags(p: argparse.ArgumentParser) -> None:
    """SGLang flags the simulation models (names and defaults as in sglang.launch_server)."""
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    p.add_argument("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    p.add_argument("--max-running-requests", type=int, default=None)
    # The KV cache's size in tokens: a request is admitted while its prompt and output fit.
    p.add_argument("--max-total-tokens", type=int, default=None)
    p.add_argument("--speculative-algorithm", default=None, choices=SPEC_ALGORITHMS)
    p.add_argument(
        "--speculative-draft-model-path",
        "--speculative-draft-model",
        dest="speculative_draft_model_path",
    )
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    p.add_argument("--random-seed", type=int, default=None)
    p.add_argument("--stream-interval", type=int, default=1)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--api-key", default=None)
    p.add_argument("--decode-log-interval", type=int, default=40)
    p.add_argument("--skip-server-warmup", action="store_true")
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--log-level", default="info")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--dist-init-addr", default=None)


def release_parser(release: dict[str, Any]) -> argparse.ArgumentParser:
    """An argparse parser with exactly a release's options (names, arities, choices, order), so
    it refuses what that release refuses with the same message: an unknown flag, a removed one
    that now only prefix-matches several ("ambiguous option"), a value outside its choices."""
    parser = argparse.ArgumentParser(prog=release.get("prog", "launch_server.py"))
    for option in release["options"]:
        if option["nargs"] == 0:
            parser.add_argument(
                *option["flags"], dest=option["dest"], action="store_const", const=True
            )
        else:
            parser.add_argument(
                *option["flags"],
                dest=option["dest"],
                nargs=option["nargs"],
                choices=option["choices"],
            )
    return parser


def check_flags(
    parser: argparse.ArgumentParser, argv: list[str], release: dict[str, Any] | None
) -> None:
    """Exit 2 with argparse's message on a flag SGLang would refuse: any flag outside the release
    impersonated (``--sim-release``) or, without one, outside every release the sim knows
    (pytest_llmperf/sim/sglang_flags.txt, from the tested releases' own parsers)."""
    ours = _without_sim_options(parser, argv)
    if release is not None:
        release_parser(release).parse_args(ours)
        return
    from importlib.resources import files

    known = set(files("pytest_llmperf.sim").joinpath("sglang_flags.txt").read_text().split())
    # argparse also takes an unambiguous prefix of a flag (``--tp`` for ``--tp-size``).
    unknown = [
        a
        for a in ours
        if a.startswith("--") and not any(k.startswith(a.split("=", 1)[0]) for k in known)
    ]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")


def _without_sim_options(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``argv`` less the simulation's own ``--sim-*`` options (and their values)."""
    sim_actions = {
        flag: action.nargs
        for action in parser._actions
        for flag in action.option_strings
        if flag.startswith("--sim-")
    }
    out, i = [], 0
    while i < len(argv):
        flag = argv[i].split("=", 1)[0]
        if flag in sim_actions:
            i += 1 if "=" in argv[i] or sim_actions[flag] == 0 else 2
            continue
        out.append(argv[i])
        i += 1
    return out


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, dict[str, Any]]:
    """Known flags, plus every other ``--flag [value]`` SGLang has (accepted, noted, reported).
    With ``--sim-release``, the release's description is read once, into ``args.sim_release_data``."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    args.sim_release_data = None
    if args.sim_release:
        with open(args.sim_release, encoding="utf-8") as f:
            args.sim_release_data = json.load(f)
    check_flags(parser, argv, args.sim_release_data)
    types: dict[str, Callable[[str], Any]] = {}
    if args.sim_release_data is not None:
        args.sim_report_version = args.sim_report_version or args.sim_release_data["version"]
        # Report an unmodeled flag's value typed as the release's parser types it (8192, not "8192").
        named = {"int": int, "human_readable_int": int, "float": float}
        types = {
            flag[2:].replace("-", "_"): named[o["type"]]
            for o in args.sim_release_data["options"]
            if o.get("type") in named
            for flag in o["flags"]
        }
    unmodeled: dict[str, Any] = {}
    i = 0
    while i < len(rest):
        token = rest[i]
        if not token.startswith("--"):
            raise SystemExit(f"python -m pytest_llmperf.sim: error: unexpected argument {token!r}")
        key, _, inline = token[2:].partition("=")
        if inline:
            unmodeled[key.replace("-", "_")] = inline
        elif i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            unmodeled[key.replace("-", "_")] = rest[i + 1]
            i += 1
        else:
            unmodeled[key.replace("-", "_")] = True
        i += 1
    for key, value in unmodeled.items():
        if key in types and isinstance(value, str):
            try:
                unmodeled[key] = types[key](value)
            except ValueError:
                parser.error(f"argument --{key.replace('_', '-')}: invalid value: {value!r}")
    return args, unmodeled
