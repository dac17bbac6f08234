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
from typing import TYPE_CHECKING, Any, cast

from aiohttp import web

from pytest_llmperf import __version__
from pytest_llmperf.core.versions import parse_version
from pytest_llmperf.sim import openai, textgen
from pytest_llmperf.sim.engine import Engine, Faults, SimRequest
from pytest_llmperf.sim.flags import parse_args
from pytest_llmperf.sim.http import (
    RequestFailed,
    as_uvicorn_says_it,
    error,
    event,
    is_ids,
    json_body,
    start_stream,
)
from pytest_llmperf.sim.model import (
    SPEC_MAX_RUNNING_REQUESTS,
    CostModel,
    Speculation,
)
from pytest_llmperf.sim.prefix_cache import PrefixCache

if TYPE_CHECKING:
    from pytest_llmperf.sim.gpu_work import GpuWork

log = logging.getLogger("sglang.sim")
#: The schedulers' logger: SGLang prefixes each TP rank's lines with ``TPn``.
rank_log = logging.getLogger("sglang.sim.scheduler")
READY_LINE = "The server is fired up and ready to roll!"
#: SGLang 0.5.6 aborts a streaming request whose client went away only 2 s later (the response's
#: background task, ``TokenizerManager.create_abort_task``) and keeps decoding it until then;
#: 0.5.19+ abort it at once (``generate_request``'s ``except BaseException``). The sim keeps the
#: older, less kind behaviour, on its own clock (÷ --sim-speed, like everything else it does).
ABORT_DELAY_S = 2.0
#: The KV cache's tokens without --max-total-tokens (what /server_info has always said).
DEFAULT_TOTAL_TOKENS = 812345


def forced_tokens() -> bool:
    """SGLANG_SIMULATE_ACC_TOKEN_MODE (0.5.23): "fixed" (the default) writes one id over every
    forced token; "real-draft-token" keeps the drafter's chain (still unchecked)."""
    import os

    return os.environ.get("SGLANG_SIMULATE_ACC_TOKEN_MODE", "fixed") != "real-draft-token"


def pinned_acceptance(args: Any) -> dict[str, Any]:
    """SGLang's forced acceptance from the environment, as the impersonated release reads it:
    SGLANG_SIMULATE_ACC_LEN (unset or ≤ 0: off), SGLANG_SIMULATE_ACC_METHOD (its default
    "multinomial" in 0.5.6, "match-expected" from 0.5.11; read in each release's environ.py)."""
    import os

    try:
        length = float(os.environ.get("SGLANG_SIMULATE_ACC_LEN", "-1"))
    except ValueError:
        length = -1.0
    if length <= 0:
        return {}
    reported = parse_version(args.sim_report_version)
    default = "multinomial" if reported is not None and reported < (0, 5, 11) else "match-expected"
    method = os.environ.get("SGLANG_SIMULATE_ACC_METHOD", default)
    return {"pinned": length, "pinned_method": method}


class SimServer:
    def __init__(self, args: argparse.Namespace, unmodeled: dict[str, Any]) -> None:
        self.args = args
        self.unmodeled = unmodeled
        self.served_model_name = args.served_model_name or args.model_path
        textgen.ACCURACY["rate"] = args.sim_accuracy  # one model per process
        self.speculation: Speculation | None = None
        if args.speculative_algorithm and args.speculative_algorithm != "NGRAM":
            steps = args.speculative_num_steps or 3
            self.speculation = Speculation(
                num_steps=steps,
                accept_length=args.sim_accept_length,
                thinking_accept_length=args.sim_thinking_accept_length,
                **pinned_acceptance(args),
            )
        max_running = args.max_running_requests
        if max_running is None:
            max_running = SPEC_MAX_RUNNING_REQUESTS if self.speculation else 4096
        self.max_running_requests = max_running
        self.engine = Engine(
            CostModel(speed=args.sim_speed, throughput_multiplier=args.sim_throughput_multiplier),
            max_running_requests=max_running,
            max_total_tokens=args.max_total_tokens or args.sim_kv_tokens or DEFAULT_TOTAL_TOKENS,
            speculation=self.speculation,
            faults=Faults(
                args.sim_fail_every, args.sim_crash_after_requests, args.sim_stall_after_tokens
            ),
            seed=args.random_seed or 0,
            decode_log_interval=args.decode_log_interval,
            gpu=_gpu_work(args),
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
        if self.args.sim_gpu_work_gib:  # GPU mode: the weights a step reads are configuration
            info["sim_gpu_work_gib"] = self.args.sim_gpu_work_gib
        return info

    async def load(self) -> None:
        """Log SGLang's loading sequence over ``--sim-load-time`` seconds (sim/loading.py)."""
        from pytest_llmperf.sim.loading import log_loading

        await log_loading(self)

    def reports_at_least(self, *version: int) -> bool:
        """Whether ``--sim-report-version`` names ``version`` or newer (none given: the wording
        of the oldest release modelled, as the sim logged before it impersonated releases)."""
        reported = parse_version(self.args.sim_report_version)
        return reported is not None and reported >= version

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
        # A prompt that extends a remembered one by its continuation goes on from there.
        root, done = textgen.resolve(prompt) if isinstance(given, str) else (prompt, 0)
        target = max_new if ignore_eos else min(max_new, textgen.eos_at(root, done))
        words, ids = textgen.continuation(root, done + target)
        words, ids = words[done:], ids[done:]
        spec = self.speculation
        if spec is not None and spec.pinned is not None and not internal and forced_tokens():
            # Forced acceptance commits the drafts unchecked and, in SGLang's default token
            # mode, fills every verified token with one id (spec_utils: predict.fill_(100)).
            words, ids = words[:1] + (" <100>",) * (len(ids) - 1), ids[:1] + (100,) * (len(ids) - 1)
        every = self.args.sim_wrong_token_every
        if self.speculation is not None and every > 0 and not internal:
            third = self.args.sim_wrong_token == "third"
            words, ids = self._wrong_drafts(root, words, ids, every, third, done)
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

    @staticmethod
    def _wrong_drafts(
        prompt: str, words: tuple[str, ...], ids: tuple[int, ...], every: int, third: bool = False,
        start: int = 0,
    ) -> tuple[tuple[str, ...], tuple[int, ...]]:  # fmt: skip
        """The fault knob --sim-wrong-token-every: one token in every ``every`` is the
        runner-up's (``third``: a third token's), where the prompt's hash puts it, as an
        accepted wrong draft would be (``start``: the tokens ``prompt``'s continuation had
        before ``words``, so a continuation's faults sit where they sat)."""
        offset = zlib.crc32(prompt.encode()) % every
        out_words, out_ids = list(words), list(ids)
        wrong = textgen.third_token if third else textgen.wrong_token
        for k in range(len(ids)):
            if (start + k + offset) % every == every - 1:
                out_words[k], out_ids[k] = wrong(ids[k])
        return tuple(out_words), tuple(out_ids)

    @staticmethod
    def logprobs(given: str | list[int], ids: tuple[int, ...], n: int, with_text: bool,
                 top: int) -> dict[str, Any]:  # fmt: skip
        """``return_logprob``'s keys of ``meta_info``, as SGLang's tokenizer manager builds them:
        ``[logprob, token id, text or None]`` per output token and, with ``top_logprobs_num``,
        the top candidates per position (here the base's choice and its runner-up)."""
        prompt = given if isinstance(given, str) else f"ids {zlib.crc32(repr(given).encode())}"
        root, done = textgen.resolve(prompt) if isinstance(given, str) else (prompt, 0)
        pairs = textgen.top2_logprobs(root, done + n)[done:]
        every_word, every_id = textgen.continuation(root, done + n)
        words, truth = every_word[done:], every_id[done:]
        chosen, tops = [], []
        for k in range(n):
            best_lp, second_lp = pairs[k]
            second_word, second_id = textgen.wrong_token(truth[k])
            best = [best_lp, truth[k], words[k] if with_text else None]
            runner = [second_lp, second_id, second_word if with_text else None]
            if ids[k] == truth[k]:
                chosen.append(best)
            elif ids[k] == second_id:
                chosen.append(runner)
            else:  # a third token: less likely than the runner-up
                third_word, _ = textgen.third_token(truth[k])
                chosen.append([second_lp - 3.0, ids[k], third_word if with_text else None])
            tops.append([best, runner][: max(0, top)])
        out: dict[str, Any] = {
            "input_token_logprobs": [],
            "output_token_logprobs": chosen,
            "output_token_logprobs_length": n,
        }
        if top > 0:
            out.update(input_top_logprobs=[], output_top_logprobs=tops)
        return out

    def finish_reason(self, req: SimRequest) -> dict[str, Any] | None:
        if req.finished_at is None:
            return None
        if req.stopped_by_eos:
            return {"type": "stop", "matched": 2}
        return {"type": "length", "length": req.target_tokens}

    def spec_meta(self, req: SimRequest) -> dict[str, Any]:
        """The final event's speculative keys, as the impersonated release names them (read in the
        0.5.6, 0.5.19 and 0.5.23 tokenizer managers): 0.5.6 always sends accept rate, accept length
        and verify count and, once a request verified, the accepted / draft token counts; later
        releases send them only when the request verified at least once, under new names, with the
        previous names as aliases until 0.5.23. ``spec_verify_ct`` is in all of them."""
        if self.speculation is None or self.args.sim_no_draft_counts:
            return {}
        drafts = req.verify_ct * (self.speculation.num_draft_tokens - 1)
        verified = {
            "spec_accept_rate": req.accepted_drafts / drafts if drafts else 0.0,
            "spec_accept_length": req.generated / req.verify_ct if req.verify_ct else 0.0,
            "spec_verify_ct": req.verify_ct,
        }
        if not self.reports_at_least(0, 5, 9):
            return {
                **verified,
                **(
                    {"spec_accept_token_num": req.accepted_drafts, "spec_draft_token_num": drafts}
                    if req.verify_ct
                    else {}
                ),
            }
        if not req.verify_ct:
            return {}
        counts = {
            "spec_num_correct_drafts": req.accepted_drafts,
            "spec_num_proposed_drafts": drafts,
        }
        aliases = {"spec_accepted_drafts": req.accepted_drafts, "spec_proposed_drafts": drafts}
        return {**verified, **counts, **({} if self.reports_at_least(0, 5, 23) else aliases)}

    def release_at_least(self, *version: int) -> bool:
        """Whether the release impersonated is ``version`` or newer (no release: the newest)."""
        reported = parse_version(self.args.sim_report_version)
        return reported is None or reported >= version

    def _meta(self, req: SimRequest, n: int, *, streamed: bool = True) -> dict[str, Any]:
        """``meta_info`` with the keys of the release impersonated, in its order, as read in each
        release's tokenizer_manager and compared with the real 0.5.23 on the CPU
        (tests/engines/test_standin_matches_sglang.py)."""
        at_least = self.release_at_least
        retractions = "num_retractions" if at_least(0, 5, 13) else "total_retractions"
        metrics = bool(self.args.enable_metrics)
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": None,
            "prompt_tokens": req.prompt_tokens,
            "weight_version": "default",
            retractions: 0,
            **(self._scheduler_times(req) if metrics else {}),
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
            meta["finish_reason"] = self.finish_reason(req)
            meta["e2e_latency"] = req.finished_at - req.received
            meta.update(self.spec_meta(req))
            if metrics:
                meta.update(self._request_times(req, n, streamed=streamed))
        if not (last and streamed):  # SGLang stamps every event but a stream's last
            meta["response_sent_to_client_ts"] = time.time()
        return meta

    @staticmethod
    def _wall(at: float) -> float:
        """A loop time (monotonic) as the wall-clock timestamp SGLang reports."""
        return time.time() - (time.monotonic() - at)

    def _scheduler_times(self, req: SimRequest) -> dict[str, Any]:
        """The scheduler's time stats SGLang 0.5.23 puts in every event's ``meta_info`` under
        ``--enable-metrics`` (observed on the real one: tests/engines/test_standin_matches_sglang.py)."""
        times: dict[str, Any] = {"storage_prefetch_wait": 0.0, "storage_staging_wait": 0.0}
        times["forward_entry_time"] = self._wall(req.received)
        if req.first_token_at is not None:
            times["prefill_finished_time"] = self._wall(req.first_token_at)
        times["queue_time"] = 0.0
        return times

    def _request_times(self, req: SimRequest, n: int, *, streamed: bool) -> dict[str, Any]:
        """The tokenizer manager's time stats a finished request's ``meta_info`` gains under
        ``--enable-metrics``; a unary answer is stamped as sent after them."""
        assert req.finished_at is not None
        times: dict[str, Any] = {"request_received_ts": self._wall(req.received)}
        if req.first_token_at is not None:
            times["first_token_latency"] = req.first_token_at - req.received
        times["api_server_dispatch_finish_ts"] = self._wall(req.received)
        if streamed:
            times["response_sent_to_client_ts"] = time.time()
        times["request_finished_ts"] = self._wall(req.finished_at)
        if req.first_token_at is not None and n > 1 and req.finished_at > req.first_token_at:
            times["decode_throughput"] = (n - 1) / (req.finished_at - req.first_token_at)
        return times

    async def tokens(self, req: SimRequest) -> AsyncIterator[int]:
        """Yield the cumulative token count each time the stream should send a chunk."""
        sent = 0
        interval = max(1, self.args.stream_interval)
        while True:
            await req.wake.wait()
            req.wake.clear()
            if req.error:
                raise RequestFailed(req.error)
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
                "max_total_num_tokens": self.engine.max_total_tokens,
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
            "# TYPE sglang:token_usage gauge",
            f"sglang:token_usage{labels} {e.token_usage:.4f}",
            "# TYPE sglang:prompt_tokens_total counter",
            f"sglang:prompt_tokens_total{labels} {e.prompt_tokens_total}",
            "# TYPE sglang:generation_tokens_total counter",
            f"sglang:generation_tokens_total{labels} {e.generation_tokens_total}",
            "# TYPE sglang:num_requests_total counter",
            f"sglang:num_requests_total{labels} {e.requests_total}",
            # The simulation's own: SGLang has no such counter.
            "# TYPE sglang:sim_behind_schedule_seconds_total counter",
            f"sglang:sim_behind_schedule_seconds_total{labels} {e.behind_schedule_s_total}",
        ]
        if e.avg_spec_accept_length is not None:
            lines += [
                "# TYPE sglang:spec_accept_length gauge",
                f"sglang:spec_accept_length{labels} {e.avg_spec_accept_length}",
            ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def generate(self, request: web.Request) -> web.StreamResponse:
        """SGLang's native ``POST /generate``: cumulative ``text`` (incremental with
        ``--incremental-streaming-output``) and ``meta_info``."""
        self._check_key(request)
        body = await json_body(request)
        text = body.get("text")
        if text is None and "input_ids" in body:
            text = body["input_ids"]
        if not (isinstance(text, str) or is_ids(text)):
            return error(400, "'text' (a string) or 'input_ids' (a list of token ids) is required")
        if body.get("return_logprob") and isinstance(text, str):
            textgen.remember(text)  # greedy parity may continue it past a near-tie
        req, words, ids = self._new_request(
            cast("str | list[int]", text), body.get("sampling_params") or {}
        )
        self.engine.submit(req)
        if not body.get("stream"):

            def whole(n: int) -> dict[str, Any]:
                meta = self._meta(req, n, streamed=False)
                if body.get("return_logprob"):
                    meta.update(
                        self.logprobs(
                            cast("str | list[int]", text),
                            ids,
                            n,
                            bool(body.get("return_text_in_logprobs")),
                            int(body.get("top_logprobs_num") or 0),
                        )  # fmt: skip
                    )
                    if self.speculation is not None and self.args.sim_short_logprobs:
                        for key in ("output_token_logprobs", "output_top_logprobs"):
                            if key in meta:  # sgl-project/sglang#14046: the first token only
                                meta[key] = meta[key][:1]
                return {"text": "".join(words[:n]), "output_ids": list(ids[:n]), "meta_info": meta}

            return await self._unary(req, whole)

        # --incremental-streaming-output (--stream-output before 0.5.11): each event carries
        # the text and ids since the last one, not everything so far.
        incremental = bool(
            self.unmodeled.get("incremental_streaming_output")
            or self.unmodeled.get("stream_output")
        )

        async def events() -> AsyncIterator[bytes]:
            sent = 0
            async for n in self.tokens(req):
                start = sent if incremental else 0
                chunk = {
                    "text": "".join(words[start:n]),
                    "output_ids": list(ids[start:n]),
                    "meta_info": self._meta(req, n),
                }
                sent = n
                yield event(chunk)

        return await self.stream(request, req, events(), {})

    async def stream(
        self,
        request: web.Request,
        req: SimRequest,
        events: AsyncIterator[bytes],
        error_fields: dict[str, Any],
    ) -> web.StreamResponse:
        """Send ``events``, then ``[DONE]``; a failed request sends its error event instead of
        the rest. A client that went away mid-stream (the plugin cuts requests at a window's
        close) ends the stream quietly, before its headers too: the request is aborted as
        SGLang aborts it."""
        resp = web.StreamResponse()
        released = False
        try:
            resp = await start_stream(request)
            try:
                async for data in events:
                    await resp.write(data)
            except RequestFailed as exc:
                await resp.write(event({"error": {"message": str(exc), **error_fields}}))
            finally:
                released = True
                self._release(req)
            await resp.write(b"data: [DONE]\n\n")
        except ConnectionResetError:  # aiohttp's ClientConnectionResetError
            if not released:  # gone before its headers were sent
                self._release(req)
        return resp

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """OpenAI ``POST /v1/completions`` and ``/v1/chat/completions`` (sim/openai.py)."""
        self._check_key(request)
        body = await json_body(request)
        chat = request.path.endswith("/chat/completions")
        parsed = openai.parse(body, chat)
        if isinstance(parsed, web.Response):
            return parsed
        prompt, max_tokens = parsed
        req, words, _ = self._new_request(
            prompt, {"max_new_tokens": max_tokens, "ignore_eos": body.get("ignore_eos")}
        )
        if chat and openai.thinks(self.unmodeled.get("reasoning_parser"), body):
            req.thinking = min(self.args.sim_thinking_tokens, req.target_tokens)
        self.engine.submit(req)
        completion = openai.Completion(self, req, words, chat, body)
        if not body.get("stream"):
            return await self._unary(req, completion.whole)
        return await self.stream(request, req, completion.events(), {"code": 500})

    async def _unary(
        self, req: SimRequest, render: Callable[[int], dict[str, Any]]
    ) -> web.Response:
        try:
            async for _ in self.tokens(req):
                pass
        except RequestFailed as exc:
            return error(500, str(exc))
        finally:
            self.engine.cancel(req)
        return web.json_response(
            render(req.generated), dumps=lambda o: json.dumps(o, separators=(",", ":"))
        )

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
    from pytest_llmperf.sim import ranks

    code, rendezvous = await ranks.join(args.nnodes, args.node_rank, args.dist_init_addr)
    if code is not None:
        return code
    server = SimServer(args, unmodeled)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    watch = ranks.exit_when_lost(rendezvous)  # noqa: F841 - kept alive while serving
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
        warmed = time.monotonic() + args.sim_warmup_time
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
    if rendezvous is not None:
        rendezvous.release()
    scheduler.cancel()
    server.engine.abort_all("the server is shutting down")
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
    logging.getLogger("aiohttp.server").addFilter(as_uvicorn_says_it)
    return asyncio.run(serve(args, unmodeled))


def _gpu_work(args: Any) -> GpuWork | None:
    """The GPU mode's weights, held before the server answers (as a model's are)."""
    if not args.sim_gpu_work_gib:
        return None
    from pytest_llmperf.sim.gpu_work import GpuWork

    return GpuWork(args.sim_gpu_work_gib, args.sim_gpu_device)
