"""``python -m pytest_llmperf.sim``: an SGLang-compatible server that needs no GPU.

It takes ``sglang.launch_server``'s flags, logs like SGLang while it "loads" (and binds its
port only afterwards), then serves SGLang's native and OpenAI endpoints from the scheduler in
:mod:`pytest_llmperf.sim.engine`. Flags it does not model are accepted and listed in its log, if SGLang has them: a flag
that no tested SGLang release has is refused (exit 2), as SGLang refuses it, and with
``--sim-release`` exactly what that release's parser refuses is.
Options starting with ``--sim-`` are its own: the speed factor, the accept length, load time
and the fault knobs the plugin's tests use.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from aiohttp import web

from pytest_llmperf import __version__
from pytest_llmperf.core.versions import parse_version
from pytest_llmperf.sim import textgen
from pytest_llmperf.sim.engine import Engine, Faults, SimRequest
from pytest_llmperf.sim.model import (
    DEFAULT_ACCEPT_LENGTH,
    DEFAULT_SPEED,
    SPEC_MAX_RUNNING_REQUESTS,
    CostModel,
    Speculation,
)
from pytest_llmperf.sim.prefix_cache import PrefixCache

log = logging.getLogger("sglang.sim")
#: The schedulers' logger: SGLang prefixes each TP rank's lines with ``TPn``.
rank_log = logging.getLogger("sglang.sim.scheduler")
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
READY_LINE = "The server is fired up and ready to roll!"
#: The shortest time /health_generate answers 503 after the port is bound (the warmup).
WARMUP_MIN_S = 0.3
#: SGLang 0.5.6 aborts a streaming request whose client went away only 2 s later (the response's
#: background task, ``TokenizerManager.create_abort_task``) and keeps decoding it until then;
#: 0.5.19+ abort it at once (``generate_request``'s ``except BaseException``). The sim keeps the
#: older, less kind behaviour, on its own clock (÷ --sim-speed, like everything else it does).
ABORT_DELAY_S = 2.0
_JSON: dict[str, Any] = {"separators": (",", ":")}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_llmperf.sim", description=__doc__.split("\n\n")[0]
    )
    # SGLang flags the simulation models (names and defaults as in sglang.launch_server).
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    p.add_argument("--dp-size", "--data-parallel-size", dest="dp_size", type=int, default=1)
    p.add_argument("--max-running-requests", type=int, default=None)
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
    # The simulation's own knobs.
    g = p.add_argument_group("simulation")
    g.add_argument(
        "--sim-speed",
        type=float,
        default=DEFAULT_SPEED,
        help="speed factor: simulated tok/s = seed figures x this. Default: %(default)s",
    )
    g.add_argument(
        "--sim-accept-length",
        type=float,
        default=DEFAULT_ACCEPT_LENGTH,
        help="mean tokens per speculative step. Default: %(default)s",
    )
    g.add_argument(
        "--sim-load-time",
        type=float,
        default=0.5,
        help="seconds spent 'loading'. Default: %(default)s",
    )
    g.add_argument(
        "--sim-throughput-multiplier",
        type=float,
        default=1.0,
        help="fault knob: 0.7 makes every step 1/0.7 as long (a 30%% collapse)",
    )
    g.add_argument(
        "--sim-fail-every", type=int, default=0, help="fault knob: every Nth request fails"
    )
    g.add_argument(
        "--sim-crash-after-requests",
        type=int,
        default=0,
        help="fault knob: exit after N finished requests",
    )
    g.add_argument(
        "--sim-crash-while-loading",
        action="store_true",
        help="fault knob: exit half-way through loading",
    )
    g.add_argument(
        "--sim-stall-after-tokens",
        type=int,
        default=0,
        help="fault knob: streams hang after N tokens",
    )
    g.add_argument(
        "--sim-report-version",
        default=None,
        help="the version /server_info reports (a stand-in for a given SGLang release)",
    )
    g.add_argument(
        "--sim-release",
        default=None,
        metavar="FILE",
        help="impersonate one SGLang release, described by FILE (its option table and ServerArgs "
        "fields, as scripts/sglang_parser.py describe reads them from the release itself): refuse "
        "what its parser refuses, report its version and exactly its /server_info fields",
    )
    g.add_argument(
        "--sim-children",
        type=int,
        default=0,
        help="start N child processes, as SGLang starts its scheduler and detokenizer",
    )
    g.add_argument(
        "--sim-ignore-sigterm",
        action="store_true",
        help="fault knob: the server and its children ignore SIGTERM (only SIGKILL stops them)",
    )
    g.add_argument(
        "--sim-progress-cr",
        action="store_true",
        help="draw progress bars with carriage returns, as SGLang 0.5.23 does",
    )
    return p


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


class SimServer:
    def __init__(self, args: argparse.Namespace, unmodeled: dict[str, Any]) -> None:
        self.args = args
        self.unmodeled = unmodeled
        self.served_model_name = args.served_model_name or args.model_path
        self.speculation: Speculation | None = None
        if args.speculative_algorithm and args.speculative_algorithm != "NGRAM":
            steps = args.speculative_num_steps or 3
            self.speculation = Speculation(num_steps=steps, accept_length=args.sim_accept_length)
        max_running = args.max_running_requests
        if max_running is None:
            max_running = SPEC_MAX_RUNNING_REQUESTS if self.speculation else 4096
        self.max_running_requests = max_running
        self.engine = Engine(
            CostModel(speed=args.sim_speed, throughput_multiplier=args.sim_throughput_multiplier),
            max_running_requests=max_running,
            speculation=self.speculation,
            faults=Faults(
                args.sim_fail_every, args.sim_crash_after_requests, args.sim_stall_after_tokens
            ),
            seed=args.random_seed or 0,
            decode_log_interval=args.decode_log_interval,
        )
        self.engine.on_crash = self._crash
        self.prefix_cache = PrefixCache()
        self.up = False
        self.started = time.time()

    # ----- lifecycle -------------------------------------------------------------------

    def server_args(self) -> dict[str, Any]:
        # api_key included: SGLang reports it on /server_info and logs it at startup (0.5.23's
        # engine.py redacts only watermark secrets), so the plugin must mask it, not the server.
        info = {k: v for k, v in vars(self.args).items() if not k.startswith("sim_")}
        info["max_running_requests"] = self.max_running_requests
        if self.speculation:
            info.update(
                speculative_num_steps=self.speculation.num_steps,
                speculative_eagle_topk=self.args.speculative_eagle_topk or 1,
                speculative_num_draft_tokens=self.speculation.num_draft_tokens,
            )
        info.update(self.unmodeled)
        if self.args.sim_release_data is not None:
            info = {name: info.get(name) for name in self.args.sim_release_data["fields"]}
        # Only the speed factor is configuration; the fault knobs stay hidden, as a real
        # regression would be, so a slowed-down engine is compared (and fails), not INCOMPARABLE.
        info["sim_speed"] = self.args.sim_speed
        return info

    async def load(self) -> None:
        """Log SGLang's loading sequence over ``--sim-load-time`` seconds."""
        args = self.args
        log.info("server_args=%r", self.server_args())  # as SGLang 0.5.23 logs it: a dict
        if self.unmodeled:
            log.info(
                "simulated engine: accepted but not modeled: %s",
                " ".join(f"--{k.replace('_', '-')}" for k in self.unmodeled),
            )
        if self.speculation and args.max_running_requests is None:
            log.warning(
                "Max running requests is reset to 48 for speculative decoding. "
                "You can override this by explicitly setting --max-running-requests."
            )
        self._ranks("Init torch distributed begin.")
        self._ranks("Init torch distributed ends. mem usage=0.12 GB")
        self._ranks("Load weight begin. avail mem=138.90 GB")
        shards = 11
        pause = args.sim_load_time * 0.7 / shards
        # Multi-thread loading is SGLang's default from 0.5.11, with its own bar.
        bar = (
            "Multi-thread loading shards"
            if self._reports_at_least(0, 5, 11)
            else ("Loading safetensors checkpoint shards")
        )
        for k in range(1, shards + 1):
            await asyncio.sleep(pause)
            self._progress(
                f"{bar}: {100 * k // shards:3d}% Completed | {k}/{shards} "
                f"[00:{k:02d}<00:{shards - k:02d},  1.00s/it]"
            )
            if args.sim_crash_while_loading and k == shards // 2:
                log.error(
                    'Traceback (most recent call last):\n  File "model_loader/loader.py", line 412, '
                    "in load_weights\nRuntimeError: simulated crash while loading (--sim-crash-while-loading)"
                )
                sys.stderr.flush()
                os._exit(1)
        self._ranks(
            "Load weight end. type=SimForCausalLM, dtype=torch.bfloat16, avail mem=123.40 GB, mem usage=15.50 GB."
        )
        self._ranks("KV Cache is allocated. #tokens: 812345, K size: 49.60 GB, V size: 49.60 GB")
        if self._reports_at_least(0, 5, 14):
            target = "target verify CUDA graph" if self.speculation else "target decode CUDA graph"
            graph_phases = [target] + (
                ["draft decode CUDA graph", "draft extend CUDA graph"] if self.speculation else []
            )
        else:
            graph_phases = ["cuda graph"] + (
                ["draft cuda graph", "draft extend cuda graph"] if self.speculation else []
            )
        for phase in graph_phases:
            if "draft" in phase and phase == next(p for p in graph_phases if "draft" in p):
                # The draft model loads in the same scheduler once the target is captured.
                self._ranks("Load weight begin. avail mem=18.40 GB")
                self._progress(f"{bar}: 100% Completed | 1/1 [00:01<00:00,  1.00s/it]")
                self._ranks(
                    "Load weight end. type=SimEagle3Draft, dtype=torch.bfloat16, avail mem=17.90 GB."
                )
            self._ranks(
                f"Capture {phase} begin. This can take up to several minutes. avail mem=19.80 GB"
            )
            for i, bs in enumerate((1, 2, 4, 8), start=1):
                await asyncio.sleep(args.sim_load_time * 0.3 / (4 * len(graph_phases)))
                self._progress(
                    f"Capturing batches (bs={bs} avail_mem=19.75 GB): {25 * i:3d}%| {i}/4 [00:0{i}<00:0{4 - i}]"
                )
            self._ranks(
                f"Capture {phase} end. Time elapsed: 0.10 s. mem usage=1.30 GB. avail mem=18.50 GB."
            )
        log.info(
            "max_total_num_tokens=812345, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=%d, context_len=131072, available_gpu_mem=17.90 GB",
            self.max_running_requests,
        )

    def _ranks(self, message: str) -> None:
        """A line from every TP rank's scheduler, with SGLang's ``[time TPn]`` logger prefix."""
        for rank in range(max(1, self.args.tp_size)):
            rank_log.info(message, extra={"rank": f" TP{rank}"})

    def _reports_at_least(self, *version: int) -> bool:
        reported = parse_version(self.args.sim_report_version)
        return reported is not None and reported >= version

    def _progress(self, line: str) -> None:
        if self.args.sim_progress_cr:
            sys.stderr.write("\r" + line)
            sys.stderr.flush()
        else:
            log.info(line)

    def _crash(self) -> None:
        log.error(
            'Traceback (most recent call last):\n  File "managers/scheduler.py", line 1021, in event_loop\n'
            "RuntimeError: simulated crash after %d requests (--sim-crash-after-requests)",
            self.args.sim_crash_after_requests,
        )
        log.error("Received sigquit from a child process. It usually means the child failed.")
        sys.stderr.flush()
        os._exit(1)

    # ----- generation helpers ----------------------------------------------------------

    def _new_request(
        self, given: str | list[int], sampling: dict[str, Any], internal: bool = False
    ) -> tuple[SimRequest, tuple, tuple]:
        max_new = int(sampling.get("max_new_tokens", sampling.get("max_tokens", 128)) or 128)
        ignore_eos = bool(sampling.get("ignore_eos", False))
        cached = 0
        if isinstance(given, list):  # token ids: counted as sent, matched against the cache
            prompt = f"ids {zlib.crc32(repr(given).encode())}"
            prompt_tokens = len(given)
            if not self.unmodeled.get("disable_radix_cache"):
                cached = self.prefix_cache.match_and_insert(given)
        else:
            prompt, prompt_tokens = given, textgen.count_tokens(given)
        target = max_new if ignore_eos else textgen.natural_length(prompt, max_new)
        words, ids = textgen.continuation(prompt, target)
        req = SimRequest(
            rid=uuid.uuid4().hex,
            prompt_tokens=prompt_tokens,
            cached_tokens=cached,
            target_tokens=target,
            stopped_by_eos=target < max_new,
            received=asyncio.get_running_loop().time(),
            internal=internal,
            accept_rng=random.Random(zlib.crc32(prompt.encode()) ^ (self.args.random_seed or 0)),
        )
        return req, words, ids

    def _finish_reason(self, req: SimRequest) -> dict[str, Any] | None:
        if req.finished_at is None:
            return None
        if req.stopped_by_eos:
            return {"type": "stop", "matched": 2}
        return {"type": "length", "length": req.target_tokens}

    def _spec_meta(self, req: SimRequest) -> dict[str, Any]:
        """The final event's speculative keys, as the impersonated release names them (read in the
        0.5.6, 0.5.19 and 0.5.23 tokenizer managers): 0.5.6 always sends accept rate, accept length
        and verify count and, once a request verified, the accepted / draft token counts; later
        releases send them only when the request verified at least once, under new names, with the
        previous names as aliases until 0.5.23. ``spec_verify_ct`` is in all of them."""
        if self.speculation is None:
            return {}
        drafts = req.verify_ct * (self.speculation.num_draft_tokens - 1)
        verified = {
            "spec_accept_rate": req.accepted_drafts / drafts if drafts else 0.0,
            "spec_accept_length": req.generated / req.verify_ct if req.verify_ct else 0.0,
            "spec_verify_ct": req.verify_ct,
        }
        if not self._reports_at_least(0, 5, 9):
            return {**verified, **({"spec_accept_token_num": req.accepted_drafts, "spec_draft_token_num": drafts}
                                   if req.verify_ct else {})}  # fmt: skip
        if not req.verify_ct:
            return {}
        counts = {
            "spec_num_correct_drafts": req.accepted_drafts,
            "spec_num_proposed_drafts": drafts,
        }
        aliases = {"spec_accepted_drafts": req.accepted_drafts, "spec_proposed_drafts": drafts}
        return {**verified, **counts, **({} if self._reports_at_least(0, 5, 23) else aliases)}

    def _release_at_least(self, *version: int) -> bool:
        """Whether the release impersonated is ``version`` or newer (no release: the newest)."""
        reported = parse_version(self.args.sim_report_version)
        return reported is None or reported >= version

    def _meta(self, req: SimRequest, n: int, *, streamed: bool = True) -> dict[str, Any]:
        """``meta_info`` with the keys of the release impersonated, in its order, as read in each
        release's tokenizer_manager and compared with the real 0.5.23 on the CPU
        (tests/engines/test_standin_matches_sglang.py)."""
        at_least = self._release_at_least
        retractions = "num_retractions" if at_least(0, 5, 13) else "total_retractions"
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": None,
            "prompt_tokens": req.prompt_tokens,
            "weight_version": "default",
            retractions: 0,
            **({"reasoning_tokens": 0} if at_least(0, 5, 11) else {}),
            "completion_tokens": n,
            "cached_tokens": req.cached_tokens,
        }
        last = n >= req.generated and req.finished_at is not None
        if last and at_least(0, 5, 19):
            meta["weight_versions"] = [{"version": "default", "start": 0, "end": n}]
        if at_least(0, 5, 9):
            meta["cached_tokens_details"] = None
        if at_least(0, 5, 11):
            meta["dp_rank"] = None
        if last and req.finished_at is not None:
            meta["finish_reason"] = self._finish_reason(req)
            meta["e2e_latency"] = req.finished_at - req.received
            meta.update(self._spec_meta(req))
        if not (last and streamed):  # SGLang stamps every event but a stream's last
            meta["response_sent_to_client_ts"] = time.time()
        return meta

    async def _tokens(self, req: SimRequest) -> AsyncIterator[int]:
        """Yield the cumulative token count each time the stream should send a chunk."""
        sent = 0
        interval = max(1, self.args.stream_interval)
        while True:
            await req.wake.wait()
            req.wake.clear()
            if req.error:
                raise _RequestFailed(req.error)
            n = req.generated
            if n - sent >= interval or (req.finished_at is not None and n > sent):
                sent = n
                yield n
            if req.finished_at is not None and sent >= req.generated:
                return

    def _check_key(self, request: web.Request) -> None:
        key = self.args.api_key
        if key and request.headers.get("Authorization") != f"Bearer {key}":
            raise web.HTTPUnauthorized(
                text=json.dumps({"error": "Unauthorized"}), content_type="application/json"
            )

    # ----- endpoints -------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        if not self.up:
            return web.Response(status=503)
        if request.path == "/health_generate" or request.path == "/health":
            req, _, _ = self._new_request(
                "health", {"max_new_tokens": 1, "ignore_eos": True}, internal=True
            )
            self.engine.submit(req)
            try:
                await asyncio.wait_for(req.wake.wait(), timeout=20)
            except asyncio.TimeoutError:
                self.engine.cancel(req)
                return web.Response(status=503)
        return web.Response(status=200)

    async def model_info(self, request: web.Request) -> web.Response:
        self._check_key(request)
        if request.path == "/get_model_info":
            log.warning(
                "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                "Please use '/model_info' instead."
            )
        return web.json_response(
            {
                "model_path": self.args.model_path,
                "tokenizer_path": self.args.model_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "served_model_name": self.served_model_name,
            }
        )

    async def server_info(self, request: web.Request) -> web.Response:
        self._check_key(request)
        state: dict[str, Any] = {
            "last_gen_throughput": self.engine.last_gen_throughput,
            "memory_usage": {
                "weight": 15.5,
                "kvcache": 99.2,
                "token_capacity": 812345,
                "graph": 1.3,
            },
        }
        accept = self.engine.avg_spec_accept_length
        if accept is not None:
            state["avg_spec_accept_length"] = accept
        return web.json_response(
            {
                **self.server_args(),
                "status": "ready",
                "max_total_num_tokens": 812345,
                "max_req_input_len": 131066,
                "internal_states": [state],
                "version": self.args.sim_report_version or f"sim-{__version__}",
            }
        )

    async def flush_cache(self, request: web.Request) -> web.Response:
        self._check_key(request)
        if not self.engine.idle:
            return web.Response(
                status=400, text="Cache not flushed. There are running or waiting requests.\n"
            )
        self.engine.reset_counters()
        self.prefix_cache.clear()
        log.info("Cache flushed successfully!")
        return web.Response(
            text="Cache flushed.\nPlease check backend logs for more details. (When there are "
            "running or waiting requests, the operation will not be performed.)\n"
        )

    async def models(self, request: web.Request) -> web.Response:
        self._check_key(request)
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.served_model_name,
                        "object": "model",
                        "created": int(self.started),
                        "owned_by": "sglang",
                        "root": self.served_model_name,
                        "parent": None,
                        "max_model_len": 131072,
                    }
                ],
            }
        )

    def _release(self, req: SimRequest) -> None:
        """A stream ended: a request still generating lost its client, and is aborted
        ABORT_DELAY_S later, as SGLang does; a finished or failed one is freed at once."""
        if req.error is None and (req in self.engine.running or req in self.engine.waiting):
            delay = ABORT_DELAY_S / self.args.sim_speed
            asyncio.get_running_loop().call_later(delay, self.engine.cancel, req)
        else:
            self.engine.cancel(req)

    async def metrics(self, request: web.Request) -> web.Response:
        e = self.engine
        labels = f'{{model_name="{self.served_model_name}",engine_type="unified",tp_rank="0",pp_rank="0"}}'
        lines = [
            "# TYPE sglang:num_running_reqs gauge",
            f"sglang:num_running_reqs{labels} {len(e.running)}",
            "# TYPE sglang:num_queue_reqs gauge",
            f"sglang:num_queue_reqs{labels} {len(e.waiting)}",
            "# TYPE sglang:gen_throughput gauge",
            f"sglang:gen_throughput{labels} {e.last_gen_throughput}",
            "# TYPE sglang:prompt_tokens_total counter",
            f"sglang:prompt_tokens_total{labels} {e.prompt_tokens_total}",
            "# TYPE sglang:generation_tokens_total counter",
            f"sglang:generation_tokens_total{labels} {e.generation_tokens_total}",
            "# TYPE sglang:num_requests_total counter",
            f"sglang:num_requests_total{labels} {e.requests_total}",
        ]
        if e.avg_spec_accept_length is not None:
            lines += [
                "# TYPE sglang:spec_accept_length gauge",
                f"sglang:spec_accept_length{labels} {e.avg_spec_accept_length}",
            ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def generate(self, request: web.Request) -> web.StreamResponse:
        """SGLang's native ``POST /generate``: cumulative ``text`` and ``meta_info``."""
        self._check_key(request)
        body = await _json_body(request)
        text = body.get("text")
        if text is None and "input_ids" in body:
            text = body["input_ids"]
        if not (isinstance(text, str) or _is_ids(text)):
            return _error(400, "'text' (a string) or 'input_ids' (a list of token ids) is required")
        req, words, ids = self._new_request(
            cast("str | list[int]", text), body.get("sampling_params") or {}
        )
        self.engine.submit(req)
        if not body.get("stream"):
            return await self._unary(
                req,
                lambda n: {
                    "text": "".join(words[:n]),
                    "output_ids": list(ids[:n]),
                    "meta_info": self._meta(req, n, streamed=False),
                },
            )
        resp = await _start_stream(request)
        try:
            async for n in self._tokens(req):
                chunk = {
                    "text": "".join(words[:n]),
                    "output_ids": list(ids[:n]),
                    "meta_info": self._meta(req, n),
                }
                await resp.write(b"data: " + json.dumps(chunk, **_JSON).encode() + b"\n\n")
        except _RequestFailed as exc:
            await resp.write(
                b"data: " + json.dumps({"error": {"message": str(exc)}}).encode() + b"\n\n"
            )
        finally:
            self._release(req)
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """OpenAI ``POST /v1/completions`` and ``/v1/chat/completions``."""
        self._check_key(request)
        body = await _json_body(request)
        chat = request.path.endswith("/chat/completions")
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return _error(400, "'messages' (a non-empty list) is required")
            prompt: str | list[int] = "\n".join(
                str(m.get("content", "")) for m in messages if isinstance(m, dict)
            )
            max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 128
        else:
            given = body.get("prompt")
            if isinstance(given, list) and len(given) == 1 and not _is_ids(given):
                given = given[0]
            if not (isinstance(given, str) or _is_ids(given)):
                return _error(400, "'prompt' (a string or a list of token ids) is required")
            prompt = cast("str | list[int]", given)
            max_tokens = body.get("max_tokens") or 16
        req, words, _ = self._new_request(
            prompt, {"max_new_tokens": max_tokens, "ignore_eos": body.get("ignore_eos")}
        )
        self.engine.submit(req)
        created = int(time.time())
        cid = ("chatcmpl-" if chat else "cmpl-") + req.rid
        obj = "chat.completion" if chat else "text_completion"

        def usage(n: int) -> dict[str, Any]:
            out: dict[str, Any] = {
                "prompt_tokens": req.prompt_tokens,
                "completion_tokens": n,
                "total_tokens": req.prompt_tokens + n,
            }
            if self.unmodeled.get("enable_cache_report"):  # as SGLang: only with this flag
                out["prompt_tokens_details"] = {"cached_tokens": req.cached_tokens}
            return out

        def finish(n: int) -> str | None:
            reason = self._finish_reason(req) if n >= req.generated else None
            return None if reason is None else reason["type"]

        if not body.get("stream"):

            def whole(n: int) -> dict[str, Any]:
                text = "".join(words[:n])
                choice = (
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": finish(n),
                    }
                    if chat
                    else {"index": 0, "text": text, "logprobs": None, "finish_reason": finish(n)}
                )
                return {
                    "id": cid,
                    "object": obj,
                    "created": created,
                    "model": self.served_model_name,
                    "choices": [choice],
                    "usage": usage(n),
                }

            return await self._unary(req, whole)

        options = body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage"))
        continuous = bool(options.get("continuous_usage_stats"))
        obj_chunk = "chat.completion.chunk" if chat else "text_completion"
        resp = await _start_stream(request)

        async def send(choices: list, usage_value: dict | None) -> None:
            chunk = {
                "id": cid,
                "object": obj_chunk,
                "created": created,
                "model": self.served_model_name,
                "choices": choices,
                "usage": usage_value,
            }
            await resp.write(b"data: " + json.dumps(chunk, **_JSON).encode() + b"\n\n")

        sent = 0
        try:
            if chat:
                await send(
                    [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": ""},
                            "finish_reason": None,
                        }
                    ],
                    None,
                )
            async for n in self._tokens(req):
                delta = "".join(words[sent:n])
                sent = n
                reason = None if chat else finish(n)
                choice = (
                    {"index": 0, "delta": {"content": delta}, "finish_reason": None}
                    if chat
                    else {
                        "index": 0,
                        "text": delta,
                        "logprobs": None,
                        "finish_reason": reason,
                        "matched_stop": None,
                    }
                )
                await send([choice], usage(n) if continuous else None)
            if chat:
                await send(
                    [{"index": 0, "delta": {}, "finish_reason": finish(sent)}],
                    usage(sent) if continuous else None,
                )
            if (
                body.get("return_spec_tokens_details")
                and self.speculation
                and self._reports_at_least(0, 5, 19)
            ):
                # SGLang 0.5.19+: a response-level chunk, only when the request asks for it.
                none = {"spec_verify_ct": 0, "spec_accept_length": 0.0, "spec_accept_rate": 0.0,
                        "spec_num_correct_drafts": 0, "spec_num_proposed_drafts": 0}  # fmt: skip
                details = {**none, **self._spec_meta(req)}
                sglext = {"routed_experts": None, "cached_tokens_details": None,
                          "spec_tokens_details": {k: details[k] for k in (
                              "spec_verify_ct", "spec_accept_length", "spec_accept_rate",
                              "spec_num_correct_drafts", "spec_num_proposed_drafts")}}  # fmt: skip
                chunk = {"id": cid, "created": created, "object": obj_chunk, "choices": [],
                         "model": self.served_model_name, "sglext": sglext}  # fmt: skip
                await resp.write(b"data: " + json.dumps(chunk, **_JSON).encode() + b"\n\n")
            if include_usage:
                await send([], usage(sent))
        except _RequestFailed as exc:
            await resp.write(
                b"data: "
                + json.dumps({"error": {"message": str(exc), "code": 500}}).encode()
                + b"\n\n"
            )
        finally:
            self._release(req)
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def _unary(
        self, req: SimRequest, render: Callable[[int], dict[str, Any]]
    ) -> web.Response:
        try:
            async for _ in self._tokens(req):
                pass
        except _RequestFailed as exc:
            return _error(500, str(exc))
        finally:
            self.engine.cancel(req)
        return web.json_response(render(req.generated), dumps=lambda o: json.dumps(o, **_JSON))

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        r = app.router
        for path in ("/health", "/health_generate"):
            r.add_get(path, self.health)
        for path in ("/model_info", "/get_model_info"):
            r.add_get(path, self.model_info)
        for path in ("/server_info", "/get_server_info"):
            r.add_get(path, self.server_info)
        r.add_route("*", "/flush_cache", self.flush_cache)
        r.add_post("/generate", self.generate)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.completions)
        r.add_get("/v1/models", self.models)
        if self.args.enable_metrics:
            r.add_get("/metrics", self.metrics)
        return app


class _RequestFailed(Exception):
    pass


def _is_ids(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in value)
    )


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as exc:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"invalid JSON: {exc}"}), content_type="application/json"
        ) from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(
            text=json.dumps({"error": "the body must be a JSON object"}),
            content_type="application/json",
        )
    return body


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": status}}, status=status)


async def _start_stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await resp.prepare(request)
    return resp


def start_children(args: argparse.Namespace) -> list[subprocess.Popen]:
    """Idle children named after the model (so a test can find them in the process table)."""
    code = "import signal, sys, time\nwhile True: time.sleep(3600)"
    return [
        subprocess.Popen(
            [sys.executable, "-c", code, f"sim-child-{k}", args.model_path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k in range(args.sim_children)
    ]


async def serve(args: argparse.Namespace, unmodeled: dict[str, Any]) -> int:
    if args.sim_ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the children
    children = start_children(args)
    if children:
        log.info(
            "started %d child processes: %s", len(children), " ".join(str(c.pid) for c in children)
        )
    try:
        return await _serve(args, unmodeled)
    finally:
        for child in children:  # a clean shutdown takes its children with it, as SGLang's does
            child.kill()
            child.wait()


async def _serve(args: argparse.Namespace, unmodeled: dict[str, Any]) -> int:
    server = SimServer(args, unmodeled)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    scheduler = asyncio.create_task(server.engine.run())
    await server.load()
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, args.host, args.port, backlog=4096).start()
    except OSError as exc:
        log.error(
            "Failed to bind %s:%d: %s. Is another server using that port?",
            args.host,
            args.port,
            exc,
        )
        return 1
    log.info(
        "INFO:     Uvicorn running on http://%s:%d (Press CTRL+C to quit)", args.host, args.port
    )
    if not args.skip_server_warmup:
        req, _, _ = server._new_request(
            "The capital city of France is",
            {"max_new_tokens": 8, "ignore_eos": True},
            internal=True,
        )
        server.engine.submit(req)
        warmed = time.monotonic() + WARMUP_MIN_S
        while not req.finished:
            await req.wake.wait()
            req.wake.clear()
        # SGLang answers 503 from the moment it binds until its warmup is done (about 1 s on
        # the CPU); a stand-in that went from refused to 200 at once would hide that window.
        await asyncio.sleep(max(0.0, warmed - time.monotonic()))
    server.up = True
    # Like SGLang, SIGTERM before this point takes the default action (the process dies at once);
    # from here on it shuts down cleanly.
    for sig in (signal.SIGTERM, signal.SIGINT):
        if not (sig == signal.SIGTERM and args.sim_ignore_sigterm):
            loop.add_signal_handler(sig, stop.set)
    log.info(READY_LINE)
    await stop.wait()
    log.info("SIGTERM received. Shutting down the simulated server.")
    scheduler.cancel()
    await runner.cleanup()
    return 0


def main(argv: list[str] | None = None) -> int:
    args, unmodeled = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="[%(asctime)s] %(message)s",
        datefmt="%Y-%m-%d %H:%M:%S",
        stream=sys.stderr,
    )
    # SGLang's schedulers log as "[%(asctime)s TP3] %(message)s" (configure_logger's prefix).
    ranks = logging.StreamHandler(sys.stderr)
    ranks.setFormatter(
        logging.Formatter("[%(asctime)s%(rank)s] %(message)s", datefmt="%Y-%m-%d %H:%M:%S")
    )
    rank_log.addHandler(ranks)
    rank_log.propagate = False
    return asyncio.run(serve(args, unmodeled))
