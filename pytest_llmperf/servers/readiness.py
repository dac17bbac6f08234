"""Waiting for a server to serve: one poller for every wait (a launched server while it loads,
a server someone else runs, a router until it counts its workers, a URL before the plan).

:func:`poll` asks ``url`` until ``ready`` says yes or the time is up, and says why not in
words; what the caller does meanwhile (check that its process is still alive, report the
loading stage, find where the server listens) is its ``between`` callback, called before each
try, which stops the wait by raising. The first QUICK_S of a wait are polled every QUICK_POLL_S:
a server that is up in a second (the simulated engine, a server someone else started) is seen
when it is, not up to a ``poll_s`` later.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import httpx

#: How long a wait polls quickly, and how often meanwhile (a refused connection costs nothing).
QUICK_S = 2.0
QUICK_POLL_S = 0.05

#: Why a response does not mean ready (None: it does).
Ready = Callable[[httpx.Response], "str | None"]


def answers_200(response: httpx.Response) -> str | None:
    if response.status_code == 200:
        return None
    return f"answered {response.status_code} on {response.url.path}; is it ready?"


def poll(
    url: str | Callable[[], str],
    *,
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
    poll_s: float = 0.25,
    ready: Ready = answers_200,
    between: Callable[[], None] | None = None,
    request_timeout_s: float = 30.0,
) -> str | None:
    """None once ``url`` (or what the callable gives, asked before each try) answers ready;
    else, after ``timeout_s`` (0: one try), why not."""
    started = time.monotonic()
    deadline = started + timeout_s
    timeout = httpx.Timeout(request_timeout_s, connect=min(5.0, request_timeout_s))
    with httpx.Client(timeout=timeout, headers=dict(headers or {})) as client:
        while True:
            if between is not None:
                between()
            try:
                problem = ready(client.get(url() if callable(url) else url))
            except httpx.HTTPError as exc:
                problem = f"cannot be reached: {type(exc).__name__}: {exc}"
            if problem is None:
                return None
            now = time.monotonic()
            if now >= deadline:
                return problem
            time.sleep(min(poll_s, QUICK_POLL_S) if now - started < QUICK_S else poll_s)
