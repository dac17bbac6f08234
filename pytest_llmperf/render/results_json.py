"""``--perf-json PATH``: every measured point, its verdict and the speculative analysis.

The layout is a documented contract (docs/reference/results-json.md): ``schema``, ``created``,
``run_dir``, ``fingerprint`` (hard and soft keys per profile), ``profiles`` (how each server ran),
``points`` and ``speculative``. Figures that do not exist are ``null``, never ``NaN``.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.core.results import Results
from pytest_llmperf.core.stats import finite_or_none

SCHEMA_VERSION = 1

#: Every field of the results JSON and what it holds (docs/reference/results-json.md is
#: generated from these tables; a test checks that every field rendered is in them).
TOP_FIELDS = {
    "schema": "the layout's version (1); a reader refuses another",
    "run_id": "the run's id in the history store (--perf-history; null without one)",
    "created": "when the run ended, UTC, ISO 8601",
    "run_dir": "the run's directory: every server's log and exact command line",
    "fingerprint": "per profile: `hard` keys (a golden with others is INCOMPARABLE), `soft` keys "
    "(versions and other server fields, diffed, never blocking) and the `comparability_hash`",
    "profiles": "per profile, how its server ran: engine, model, api, args, env (secrets "
    "masked), launch_id, attached, base_url, log, server_info (what it said of itself); behind "
    "a router also topology (router, policy, workers, dp_size, router_version) and workers (each "
    "worker's url, version, server_info summary and log)",
    "points": "every measured point, and every figure checked on its runs (below)",
    "confirmations": "each fresh launch a night made to decide the points its launches' noise "
    "left undecided (CONFIRMING): `profile`, `copy` (the launch's name, e.g. "
    "`sim-baseline@confirm1`), `launch_id`, `load_s`, `measure_s` (the time its points were "
    "measured) and `points` (each point it measured again, and its verdict after it)",
    "speculative": "per speculative profile measured with its base in the run: speedup per "
    "level with its 95 % interval, crossover, cut-off advice, the speedup gate's verdicts "
    "(`gate`, the speedup as served), `engine_gate` (per level, the speedup with acceptance "
    "pinned at the golden accept length, with `pinned_at`; null without `pin_acceptance`), "
    "`channels` (`engine`, `acceptance`, `lossless`: each with its `verdict`, null where not "
    "judged, a `detail` that says what it read or why it was not judged, and `levels`, per "
    "level its `verdict` and `detail`, where it has levels), and "
    "`energy_ratio` (per level, its energy per output token ÷ the base's, where NVML measured "
    "both)",
    "capacity": "per profile whose capacity was searched (llmperf.capacity): `max_rate` "
    "(requests/s: `low`, the highest rate that held), `client_limited` (a probe above it was a "
    "rate this host's client could not pace: reported, not gated), `low` (the highest rate that "
    "met the SLO "
    "with significance), `high` (the lowest that did not), the `slo` and `slo_percentile`, every "
    "probe (`rate`, `held`, `runs`, `why`), and the check's `verdict`, `golden` and `message`",
    "startup": "per launch whose startup was checked (llmperf.check_startup): `profile`, "
    "`kind` (cold or warm, the profile's `startup`), `seconds` from launch to ready, and the "
    "check's `verdict`, `golden`, `ratio`, `p_value` and `message`",
    "accuracy": "per profile whose accuracy was asked (llmperf.accuracy): `source` (the task "
    "file), `items`, `correct`, `accuracy` with its `wilson_95` interval, `by_category` (items, "
    "correct, accuracy), up to 20 `wrong` items (question, answer, response), and the check's "
    "`verdict`, `golden`, `p_value` (McNemar on the golden's own items, else exact binomial) and "
    "`message`",
    "parity": "per speculative profile checked against its base (llmperf_parity): `profile`, "
    "`base_profile`, `test`, `prompts`, `identical`, `identical_fraction`, `tokens_compared`, "
    "`excused_near_ties`, `tie_gap`, `verdict` (PASS, FAIL, INVALID: log-probabilities short "
    "of the tokens generated, or a failed logprob request), `message`, `accuracy` "
    "and `accuracy_verdict` (the pair's items against the base's, where both were asked), "
    "`identical_golden` (the identical share against its golden: `verdict`, `golden`, "
    "`p_value`, `message`; null `verdict` where too few prompts to FAIL it), and "
    "`per_prompt`: each prompt's `index`, `prompt`, `tokens`, `identical`, `tokens_compared`, "
    "`near_ties_continued` (the excused near-ties compared past, asked again from the base's "
    "token), and where it diverged the `position`, `base_token`, `spec_token`, the base's `top2_gap` "
    "there, `spec_is_runner_up` (the speculative token is the base's runner-up), `excused` "
    "(a near-tie: within the tie gap and the runner-up) and both continuations from there",
}
POINT_FIELDS = {
    "profile": "the profile measured",
    "test": "the pytest node id of the test that measured the point",
    "key": "the point's key in its golden file and in the history (the node id without the "
    "profile, with the level: `test_throughput.py::test_output_throughput[C=70]`)",
    "concurrency": "C, the requests kept in flight (at a rate level: its max_concurrency, 0 "
    "without one)",
    "rate": "an open-loop rate level's requests/s (null in a closed loop)",
    "sustainable": "at a rate level: whether the server kept up with the arrivals in every run "
    "(false: NOT SUSTAINABLE, not a throughput figure); null in a closed loop",
    "metric": "the figure judged: `output_tok_s`, `request_tok_s`, `ttft_p99_s`, … (every figure, "
    "its unit and its direction: the table below)",
    "gated_from": "for a figure checked on another point's runs: the metric they were "
    "measured for (null otherwise)",
    "values": "the judged figure of each run",
    "runs": "every run's figures (below)",
    "launch_id": "which server launch measured it",
    "workload": "the workload's definition, a hard key of the golden: api, lengths, "
    "requests per run or the window, prompt set's hash, dataset",
    "golden": "the golden's mean, its n, its file and the margins the point was judged with "
    "(null without one)",
    "ratio": "mean ÷ the golden's mean",
    "p_value": "the one-sided p in the direction of the change",
    "verdict": "PASS, WARN, IMPROVED, FAIL, UNCERTAIN, INVALID, INCOMPARABLE, MISSING, "
    "RECORDED (under --perf-update), or null (measured, not checked)",
    "message": "the sentence the test printed",
    "problems": "why the point is INVALID (empty when it is not)",
    "environment_changes": "soft fingerprint keys that differ from the golden's",
    "remeasured": "runs measured once more because the client, not the server, set their pace "
    "(a busy moment of a shared runner): each one's number and why; their figures are not "
    "among `runs` (a run client-bound again stays, and makes the point INVALID)",
    "wall_s": "the server time the point's runs took, warm-up and settles included",
    "server_counters": "the server's own /metrics over the point's runs (null when it serves "
    "none): generated_tokens, prompt_tokens, cached_tokens, requests, queue_time_mean_s, "
    "kv_cache_usage, …",
    "server_series": "the server's gauges through the point's runs, sampled every "
    "`metrics_interval_s` from a process of its own (null without one): `interval_s`, `t` "
    "(seconds from the first sample) and a list per gauge it reports: `running_requests`, "
    "`queued_requests`, `kv_cache_usage`, `gen_throughput`, `cache_hit_rate`, "
    "`spec_accept_length`",
    "gpu_series": "NVML's readings of the server's GPUs through the point's runs, per GPU index: "
    "`t` (seconds from the point's first sample), `power_w`, `sm_clock_mhz`, `temperature_c`, "
    "`reasons` (NVML's clock event reason bits); null without NVML",
    "server_profile": "with --perf-profile-on: one more run of the point with the server's "
    "profiler on (not among its runs): `trace` (the trace file's path), `steps` (the forward "
    "steps it recorded), `summary` (`source`, `total_us`, `ops`: the top operations by time), "
    "`golden_summary` (the golden's, when it was recorded with one) and `problem` (why there "
    "is no trace); null when not profiled",
    "history": "with --perf-history: `runs` (the stored nights of its series, this one "
    "included), `spread` (their night-to-night sd, log scale) and `change_points`, each with "
    "`first_bad_run`, `last_good_run`, their dates and commits, `change` (relative, e.g. −0.08), "
    "its 95 % `interval`, `p_value`, `worse` and `what_changed`; `drift`: the open change the latest "
    "nights make (`kind` step or drift, `gated` WARN or FAIL when the drift gate judged the "
    "point by it); `golden_verdict`: what the golden alone said (null without a history)",
}
RUN_FIELDS = {
    "concurrency": "C",
    "requests": "requests sent (in the window, for a windowed run)",
    "failed_requests": "requests that failed: any makes the run INVALID",
    "output_tokens": "server-reported completion tokens",
    "duration_s": "first request sent to last response finished (or the window's length)",
    "output_tok_s": "output_tokens ÷ duration_s: the gated throughput",
    "request_tok_s": "per request, tokens ÷ end-to-end latency: mean and percentiles",
    "ttft_s": "time to the first token-carrying chunk (a thinking token counts): mean and "
    "percentiles",
    "ttfo_s": "time to the first answer token (TTFO), after a thinking model's thinking: the "
    "same shape as `ttft_s` (mean, p50, p90, p99, n); `n` 0 where the stream does not tell "
    "answer from thinking (only the chat API with a reasoning parser does)",
    "reasoning_tokens": "thinking tokens per finished request, from the server's own counts "
    "(SGLang's `usage.reasoning_tokens`); null where it gives none",
    "reasoning_share": "the thinking tokens' share of the completion tokens; null where none "
    "were counted",
    "itl_s": "per token: the gap between chunks ÷ the tokens of the later one, token-weighted",
    "tpot_s": "(e2e − ttft) ÷ (tokens − 1), per request",
    "e2e_s": "end-to-end latency per request",
    "accept_length": "Σ completion tokens ÷ Σ spec_verify_ct (speculative servers; else null); "
    "llama.cpp's verify steps are its tokens less timings.draft_n_accepted",
    "accept_length_observed": "the client's own count beside the engine's: Σ completion tokens "
    "÷ Σ bursts of chunks a verify step sent back to back (null where the engine reports no "
    "accept length)",
    "accept_length_by_category": "accept_length per category of the requests, where the "
    "workload's dataset names a `category` per line (speculative profiles; else null)",
    "energy_j": "the energy the server's GPUs took over the run's window, from NVML's energy "
    "counter (joules; null without NVML)",
    "energy_j_per_token": "energy_j ÷ the window's output tokens",
    "tok_s_per_watt": "the window's output tokens ÷ energy_j (tokens per joule: the same joules as "
    "energy_j_per_token, so the two multiply to 1)",
    "gpu_held_back": "how a GPU was held back by power or heat during the window, per GPU and "
    "reason, with the share of samples (empty: never)",
    "gpu_power_cap_share": "the highest share of the window's samples in which a GPU at its "
    "default power limit was at that limit (normal at full load; named only when above the "
    "golden's); null: not sampled",
    "achieved_concurrency": "Σ e2e ÷ duration: the concurrency the server saw",
    "in_flight_while_sending": "requests in flight on average while the client was sending",
    "client_gap_s": "the client's idle time between a response and the next request",
    "loop_lag_s": "the client's event-loop lag: percentiles and max",
    "client_cpu_fraction": "the client's CPU time ÷ wall time (near 1: the client set the pace)",
    "problems": "why the run is INVALID (empty when it is not)",
    "launch_id": "the server launch that measured it: a point measured again on a fresh launch "
    "to confirm it has runs of several",
    "window": "the steady-state window (window_s): when it opened, its length, its tokens, "
    "the requests that finished and were cut",
    "prompt_tokens": "Σ server-reported prompt tokens of the finished requests",
    "cached_tokens": "of those, the prefix cache's (null: the server did not say)",
    "goodput_req_s": "requests per second that met every SLO (null without an slo)",
    "open_loop": "a rate level's run (null in a closed loop): `rate`, `offered_req_s`, "
    "`sent_req_s`, `completed_req_s` over the window, `arrivals`, `lag_s` (send − scheduled "
    "arrival: percentiles and max), `queue_s` (waits for a `max_concurrency` slot), "
    "`ttft_from_send_s` and `e2e_from_send_s` (`ttft_s` and `e2e_s` count from the arrival), "
    "`mean_backlog`, `sustainable`, `saturation` (why not), `pacer`",
    "schedule": "a rate level's arrival offsets in seconds from the run's start (null in a "
    "closed loop): the same for a speculative profile and its base",
}


def render(results: Results, *, created: str) -> dict[str, Any]:
    """The results JSON: the run's own fields, then one list per section (render/sections.py)."""
    from pytest_llmperf.render.sections import json_sections

    fps = results.fingerprints
    return {
        "schema": SCHEMA_VERSION,
        "run_id": results.run_id,
        "created": created,
        "run_dir": results.run_dir,
        "fingerprint": {
            "hard": {name: fp["hard"] for name, fp in fps.items()},
            "soft": {name: fp["soft"] for name, fp in fps.items()},
            "comparability_hash": {name: fp["comparability_hash"] for name, fp in fps.items()},
        },
        "profiles": finite_or_none(results.servers),
        **json_sections(results),
    }
