"""Greedy continuations with their top-2 log-probabilities, one prompt at a time.

For greedy parity (core/parity.py) the server is asked, prompt by prompt and never concurrently
(so the comparison is not of two batch shapes), for ``max_tokens`` tokens at temperature 0
with the top two candidates' log-probabilities at every position, on the API that returns them:

- SGLang's native ``/generate``: ``return_logprob`` with ``top_logprobs_num = 2``; token ids
  from ``meta_info.output_token_logprobs`` (``[logprob, id, text]``), the top two from
  ``meta_info.output_top_logprobs``.
- llama.cpp's native ``/completion``: ``n_probs = 2``; ``completion_probabilities`` holds each
  token's ``id`` and its ``top_logprobs``.
- OpenAI ``/v1/completions``: ``logprobs = 2``; ``logprobs.tokens`` (text: the API gives no ids)
  and ``logprobs.top_logprobs`` (text to log-probability).

A server that answers otherwise gets a one-line reason (:class:`GreedyError`), never a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from pytest_llmperf.core.parity import GreedyOutput


class GreedyError(Exception):
    """The server did not answer a greedy request as its API promises (one line)."""


def _gap(candidates: Sequence[float]) -> float | None:
    """The log-probability gap between the best two candidates (None: fewer than two)."""
    finite = sorted((c for c in candidates if math.isfinite(c)), reverse=True)
    return finite[0] - finite[1] if len(finite) >= 2 else None


def _sglang(body: Mapping[str, Any], prompt: str) -> GreedyOutput:
    meta = body.get("meta_info") or {}
    chosen = meta.get("output_token_logprobs")
    top = meta.get("output_top_logprobs") or []
    if not isinstance(chosen, list):
        raise GreedyError("its /generate answer has no meta_info.output_token_logprobs")
    ids = tuple(int(entry[1]) for entry in chosen)
    texts = tuple(str(entry[2]) if entry[2] is not None else "" for entry in chosen)
    gaps = tuple(_gap([float(c[0]) for c in (top[k] or [])]) if k < len(top) else None
                 for k in range(len(ids)))  # fmt: skip
    finish = (meta.get("finish_reason") or {}).get("type")
    return GreedyOutput(prompt, ids, texts, gaps, finish)


def _llamacpp(body: Mapping[str, Any], prompt: str) -> GreedyOutput:
    probs = body.get("completion_probabilities")
    if not isinstance(probs, list):
        raise GreedyError("its /completion answer has no completion_probabilities (n_probs)")
    ids = tuple(int(p["id"]) for p in probs)
    texts = tuple(str(p.get("token", "")) for p in probs)
    gaps = tuple(_gap([float(c["logprob"]) for c in p.get("top_logprobs") or []]) for p in probs)
    finish = "stop" if body.get("stopped_eos") else "length" if body.get("stopped_limit") else None
    return GreedyOutput(prompt, ids, texts, gaps, finish)


def _openai(body: Mapping[str, Any], prompt: str) -> GreedyOutput:
    choice = (body.get("choices") or [{}])[0]
    logprobs = choice.get("logprobs") or {}
    tokens = logprobs.get("tokens")
    if not isinstance(tokens, list):
        raise GreedyError("its /v1/completions answer has no logprobs.tokens (logprobs = 2)")
    top = logprobs.get("top_logprobs") or []
    gaps = tuple(
        _gap([float(v) for v in (top[k] or {}).values()]) if k < len(top) else None
        for k in range(len(tokens))
    )
    texts = tuple(str(t) for t in tokens)
    return GreedyOutput(prompt, texts, texts, gaps, choice.get("finish_reason"))


def request(api: str, prompt: str, max_tokens: int, model: str) -> tuple[str, dict[str, Any]]:
    """The path and body that ask ``api`` for a greedy continuation with top-2 log-probs."""
    if api == "sglang":
        sampling = {"temperature": 0.0, "max_new_tokens": max_tokens}
        return "/generate", {
            "text": prompt,
            "sampling_params": sampling,
            "return_logprob": True,
            "top_logprobs_num": 2,
            "return_text_in_logprobs": True,
        }
    if api == "llamacpp":
        return "/completion", {
            "prompt": prompt,
            "n_predict": max_tokens,
            "temperature": 0.0,
            "top_k": 1,
            "n_probs": 2,
            "cache_prompt": False,
        }
    return "/v1/completions", {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "logprobs": 2,
    }


PARSERS = {"sglang": _sglang, "llamacpp": _llamacpp, "openai": _openai}


def greedy_outputs(
    base_url: str,
    api: str,
    prompts: Sequence[str],
    max_tokens: int,
    *,
    model: str = "default",
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 120.0,
) -> list[GreedyOutput]:
    """Each prompt's greedy continuation, one request at a time."""
    parse = PARSERS[api]
    out = []
    with httpx.Client(base_url=base_url, headers=dict(headers or {}), timeout=timeout_s) as client:
        for index, prompt in enumerate(prompts, start=1):
            path, body = request(api, prompt, max_tokens, model)
            try:
                response = client.post(path, json=body)
            except httpx.HTTPError as exc:
                raise GreedyError(f"prompt {index}: POST {path} failed: {exc}") from None
            if response.status_code != 200:
                text = " ".join(response.text[:300].split())
                raise GreedyError(
                    f"prompt {index}: POST {path}: HTTP {response.status_code}: {text}"
                )
            try:
                out.append(parse(response.json(), prompt))
            except GreedyError as exc:
                raise GreedyError(f"prompt {index}: {exc}") from None
            except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
                raise GreedyError(
                    f"prompt {index}: POST {path} answered {' '.join(response.text[:200].split())!r}, "
                    f"which is not the {api} API's shape ({type(exc).__name__}: {exc})"
                ) from None
    return out
