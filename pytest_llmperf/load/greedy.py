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

Each token's identity is its id (the text only where the API gives no ids), and the base's
runner-up's identity is kept beside the gap, so parity can tell a near-tie's swap from a third
token. The log-probabilities must cover every token the server says it generated
(``meta_info.completion_tokens``, llama.cpp's ``tokens_predicted``, ``usage.completion_tokens``):
SGLang's speculative path has returned them for the first token only (sgl-project/sglang#14046),
and comparing that stub would be comparing nothing. A short list, like a failed logprob
request, is :class:`Unverifiable`: the pair cannot be checked, which is not a parity FAIL.

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


class Unverifiable(GreedyError):
    """The server answered, but not with what parity needs: log-probabilities for fewer tokens
    than it generated, or an error on the logprob request (one line)."""


def _covered(ids: Sequence[Any], generated: Any, where: str) -> None:
    """Raise Unverifiable when the log-probabilities cover fewer tokens than were generated."""
    if isinstance(generated, int) and not isinstance(generated, bool) and len(ids) < generated:
        raise Unverifiable(
            f"its log-probabilities cover {len(ids)} of the {generated} tokens it generated "
            f"({where}; SGLang's speculative path has returned them for the first token only, "
            f"sgl-project/sglang#14046): token identities cannot be compared on it"
        )


def _top_two(ranked: Sequence[tuple[float, Any]]) -> tuple[float | None, Any]:
    """Of one position's candidates (log-probability, identity): the gap between the best two
    and the runner-up's identity (None, None: fewer than two)."""
    best = sorted((c for c in ranked if math.isfinite(c[0])), key=lambda c: -c[0])
    return (best[0][0] - best[1][0], best[1][1]) if len(best) >= 2 else (None, None)


def _positions(tops: Sequence[Sequence[tuple[float, Any]] | None], n: int) -> tuple[tuple, tuple]:
    """Per position of ``n``: the top-2 gap and the runner-up (None where none was given)."""
    pairs = [_top_two(tops[k] or []) if k < len(tops) else (None, None) for k in range(n)]
    return tuple(g for g, _ in pairs), tuple(r for _, r in pairs)


def _sglang(body: Mapping[str, Any], prompt: str) -> GreedyOutput:
    meta = body.get("meta_info") or {}
    chosen = meta.get("output_token_logprobs")
    top = meta.get("output_top_logprobs") or []
    if not isinstance(chosen, list):
        raise GreedyError("its /generate answer has no meta_info.output_token_logprobs")
    ids = tuple(int(entry[1]) for entry in chosen)
    _covered(ids, meta.get("completion_tokens"), "meta_info.output_token_logprobs")
    texts = tuple(str(entry[2]) if entry[2] is not None else "" for entry in chosen)
    gaps, seconds = _positions(
        [[(float(c[0]), int(c[1])) for c in (at or [])] for at in top], len(ids)
    )
    finish = (meta.get("finish_reason") or {}).get("type")
    return GreedyOutput(prompt, ids, texts, gaps, finish, runner_up=seconds)


def _llamacpp(body: Mapping[str, Any], prompt: str) -> GreedyOutput:
    probs = body.get("completion_probabilities")
    if not isinstance(probs, list):
        raise GreedyError("its /completion answer has no completion_probabilities (n_probs)")
    ids = tuple(int(p["id"]) for p in probs)
    _covered(ids, body.get("tokens_predicted"), "completion_probabilities")
    texts = tuple(str(p.get("token", "")) for p in probs)
    gaps, seconds = _positions(
        [[(float(c["logprob"]), int(c["id"])) for c in p.get("top_logprobs") or []] for p in probs],
        len(ids),
    )
    finish = "stop" if body.get("stopped_eos") else "length" if body.get("stopped_limit") else None
    return GreedyOutput(prompt, ids, texts, gaps, finish, runner_up=seconds)


def _openai(body: Mapping[str, Any], prompt: str) -> GreedyOutput:
    choice = (body.get("choices") or [{}])[0]
    logprobs = choice.get("logprobs") or {}
    tokens = logprobs.get("tokens")
    if not isinstance(tokens, list):
        raise GreedyError("its /v1/completions answer has no logprobs.tokens (logprobs = 2)")
    _covered(tokens, (body.get("usage") or {}).get("completion_tokens"), "logprobs.tokens")
    top = logprobs.get("top_logprobs") or []
    gaps, seconds = _positions(
        [[(float(v), str(t)) for t, v in (at or {}).items()] for at in top], len(tokens)
    )
    texts = tuple(str(t) for t in tokens)
    return GreedyOutput(prompt, texts, texts, gaps, choice.get("finish_reason"), runner_up=seconds)


def request(
    api: str, prompt: str, max_tokens: int, model: str, *, logprobs: bool = True
) -> tuple[str, dict[str, Any]]:
    """The path and body that ask ``api`` for a greedy continuation, with top-2 log-probs
    unless ``logprobs`` is false (an answer to grade needs only its text)."""
    if api == "sglang":
        sampling = {"temperature": 0.0, "max_new_tokens": max_tokens}
        body: dict[str, Any] = {"text": prompt, "sampling_params": sampling}
        if logprobs:
            body.update(return_logprob=True, top_logprobs_num=2, return_text_in_logprobs=True)
        return "/generate", body
    if api == "llamacpp":
        body = {
            "prompt": prompt,
            "n_predict": max_tokens,
            "temperature": 0.0,
            "top_k": 1,
            "cache_prompt": False,
        }
        if logprobs:
            body["n_probs"] = 2
        return "/completion", body
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0}
    if logprobs:
        body["logprobs"] = 2
    return "/v1/completions", body


PARSERS = {"sglang": _sglang, "llamacpp": _llamacpp, "openai": _openai}


def answer_text(api: str, body: Mapping[str, Any]) -> str:
    """The answer's text alone, from a request made without log-probabilities."""
    if api == "sglang":
        text = body.get("text")
    elif api == "llamacpp":
        text = body.get("content")
    else:
        text = ((body.get("choices") or [{}])[0]).get("text")
    if not isinstance(text, str):
        key = {"sglang": "text", "llamacpp": "content"}.get(api, "choices[0].text")
        raise GreedyError(f"its answer has no {key}")
    return text


def greedy_outputs(
    base_url: str,
    api: str,
    prompts: Sequence[str],
    max_tokens: int,
    *,
    model: str = "default",
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 120.0,
    logprobs: bool = True,
) -> list[GreedyOutput]:
    """Each prompt's greedy continuation, one request at a time; without ``logprobs``, only
    each answer's text (one element of ``texts``; no token identities)."""
    parse = PARSERS[api]
    out = []
    with httpx.Client(base_url=base_url, headers=dict(headers or {}), timeout=timeout_s) as client:
        for index, prompt in enumerate(prompts, start=1):
            path, body = request(api, prompt, max_tokens, model, logprobs=logprobs)
            try:
                response = client.post(path, json=body)
            except httpx.HTTPError as exc:
                raise GreedyError(f"prompt {index}: POST {path} failed: {exc}") from None
            if response.status_code != 200:
                text = " ".join(response.text[:300].split())
                failed = Unverifiable if logprobs and response.status_code >= 500 else GreedyError
                asked = " with log-probabilities" if failed is Unverifiable else ""
                raise failed(
                    f"prompt {index}: POST {path}{asked}: HTTP {response.status_code}: {text}"
                )
            try:
                if not logprobs:
                    out.append(GreedyOutput(prompt, (), (answer_text(api, response.json()),), ()))
                    continue
                out.append(parse(response.json(), prompt))
            except GreedyError as exc:
                raise type(exc)(f"prompt {index}: {exc}") from None
            except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
                raise GreedyError(
                    f"prompt {index}: POST {path} answered {' '.join(response.text[:200].split())!r}, "
                    f"which is not the {api} API's shape ({type(exc).__name__}: {exc})"
                ) from None
    return out
