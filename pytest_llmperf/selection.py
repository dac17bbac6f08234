"""Which servers this run measures, and which tests it parametrizes with them.

- :func:`select_profiles`: the profiles named by ``--llm-profile`` (or the ini, or the file's
  ``default``), with ``--llm-concurrency`` applied and, under ``--perf-aba``, a second
  copy of each speculative profile's base measured after it (A/B/A).
- :func:`speedup_params`: one ``llmperf_speedup`` test per (speculative profile, level that it and
  its base both measure), or one skipped parameter that says how to select a pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmperf.errors import ProfileError
from pytest_llmperf.settings import Settings

if TYPE_CHECKING:
    from pytest_llmperf.profiles import Profile, ProfileSet


def select_profiles(settings: Settings) -> tuple[ProfileSet | None, list[Profile]]:
    """The profiles file (None when there is none and none was asked for) and the selected profiles;
    ``pytest.UsageError`` naming the file, the profile or the fix when the selection is wrong."""
    if not settings.profile_names and not settings.profiles_file.exists():
        return None, []
    from pytest_llmperf.profiles_file import load_profiles

    try:
        profiles = load_profiles(settings.profiles_file)
        names = list(settings.profile_names or profiles.default)
        if not names:
            raise ProfileError(
                f"no profile selected: pass --llm-profile NAME, set ini llmperf_profiles, or add "
                f"`default = [...]` to {settings.profiles_file}. Available profiles: {', '.join(profiles.names())}."
            )
        selected = profiles.select(names)
    except ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings.server_url and len(selected) != 1:
        raise pytest.UsageError(
            f"--llm-server-url attaches one server to one profile; {len(selected)} are selected "
            f"({', '.join(p.name for p in selected)}). Select exactly one with --llm-profile."
        )
    if settings.concurrency is not None:
        selected = [replace(p, concurrency=settings.concurrency) for p in selected]
    if settings.request_rate is not None:
        selected = [replace(p, request_rate=settings.request_rate) for p in selected]
    if settings.aba:
        selected = with_aba_copies(selected)
    if settings.recording and not settings.server_url:
        selected = with_launch_copies(selected, settings.launches)
    if not settings.server_url:
        selected = with_pinned_copies(selected)
    return profiles, selected


def with_pinned_copies(selected: list[Profile]) -> list[Profile]:
    """The engine channel: after each speculative profile that asks for it (``pin_acceptance``)
    and whose base is selected, on an engine that can pin acceptance and a server the plugin
    launches, a copy (``NAME@pinned``) launched with acceptance pinned at the golden accept
    length, after the profile's own launches."""
    from pytest_llmperf import engines
    from pytest_llmperf.profiles import CopyKind

    names = {p.name for p in selected}
    out: list[Profile] = []
    for k, profile in enumerate(selected):
        out.append(profile)
        origin = next((p for p in selected if p.name == profile.origin), profile)
        following = selected[k + 1] if k + 1 < len(selected) else None
        if following is not None and following.origin == origin.name:
            continue  # after the origin's last launch
        if (
            origin.pin_acceptance
            and origin.speculative
            and origin.copy_of is None
            and origin.url is None
            and origin.base_profile in names
            and engines.of(origin).pins_acceptance is not None
        ):
            out.append(origin.copy(CopyKind.PINNED, f"{origin.name}@pinned"))
    return out


def with_launch_copies(selected: list[Profile], launches: int | None) -> list[Profile]:
    """A recording over several launches: after each profile, a copy a launch (``NAME@launch2``,
    …) whose server is launched afresh and whose runs join the profile's golden. ``launches``:
    --perf-update-launches, else each profile's ``record_launches``."""
    from pytest_llmperf.profiles import CopyKind

    out: list[Profile] = []
    for profile in selected:
        out.append(profile)
        count = launches if launches is not None else profile.launches_to_record
        out += [
            profile.copy(CopyKind.LATER_LAUNCH, f"{profile.name}@launch{k}")
            for k in range(2, count + 1)
        ]
    return out


def with_aba_copies(selected: list[Profile]) -> list[Profile]:
    """A/B/A: after each speculative profile whose base is selected, a second copy of the base."""
    from pytest_llmperf.profiles import CopyKind

    by_name = {p.name: p for p in selected}
    out: list[Profile] = []
    for profile in selected:
        out.append(profile)
        base = by_name.get(profile.base_profile or "")
        if profile.speculative and base is not None:
            out.append(base.copy(CopyKind.AFTER, f"{base.name}@after"))
    return out


def speedup_params(profiles: ProfileSet | None, selected: list[Profile]) -> list[Any]:
    """``pytest.param((spec, base, C))`` per level both measure, else one skipped parameter."""
    by_name = {p.name: p for p in selected}
    params = []
    for spec in selected:
        base = by_name.get(spec.base_profile or "")
        if spec.speculative and base is not None and spec.origin == spec.name:
            params += [
                pytest.param((spec.name, base.name, c), id=f"{spec.name}-vs-{base.name}-C{c}")
                for c in spec.concurrency
                if c in base.concurrency
            ]
    return params or [_no_pair(profiles)]


def pair_params(profiles: ProfileSet | None, selected: list[Profile]) -> list[Any]:
    """``pytest.param((spec, base))`` per speculative profile selected with its base (one a
    pair, not a level: greedy parity), else one skipped parameter."""
    by_name = {p.name: p for p in selected}
    params = [
        pytest.param((spec.name, spec.base_profile), id=f"{spec.name}-vs-{spec.base_profile}")
        for spec in selected
        if spec.speculative and spec.base_profile in by_name and spec.origin == spec.name
    ]
    return params or [_no_pair(profiles)]


def _no_pair(profiles: ProfileSet | None) -> Any:
    pairs = [
        f"{p.base_profile},{p.name}"
        for p in (profiles.profiles.values() if profiles else ())
        if p.speculative and p.base_profile
    ]
    reason = "no speculative profile was selected together with its base profile" + (
        f"; select a pair, e.g. --llm-profile={pairs[0]}" if pairs else ""
    )
    return pytest.param(None, id="no-pair", marks=pytest.mark.skip(reason=reason))


def rate_params(selected: list[Profile]) -> tuple[list[Any], list[str]]:
    """Values and ids for a test's ``llm_profile`` and ``llm_request_rate`` parameters: each
    selected profile at each of its rate levels (``request_rate``), but on a recording's later
    launches (they measure no open loop: ``Profile.measures_open_loop``)."""
    pairs = [(p.name, r) for p in selected if p.measures_open_loop for r in p.request_rate]
    if not pairs:
        names = ", ".join(p.name for p in selected)
        reason = (
            f"no rate levels: the selected profiles ({names}) have no request_rate; give them "
            "one in profiles.toml or pass --llm-request-rate R[,R...]"
        )
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=reason))], ["no-rate"]
    return list(pairs), [f"{name}-R{r:g}" for name, r in pairs]


def measurement_params(
    selected: list[Profile],
    with_levels: bool,
    only: Sequence[int] | None = None,
    *,
    speculative_only: bool = False,
) -> tuple[list[Any], list[str]]:
    """Values and ids for a test's ``llm_profile`` (and ``llm_concurrency``) parameters;
    ``only``: the test's own levels (``@pytest.mark.llmperf(concurrency=[1, 10])``), those of
    each profile's that it names; ``speculative_only`` (``speculative=True``): the speculative
    profiles alone, else one skipped parameter that says so."""
    if speculative_only:
        speculative = [p for p in selected if p.speculative]
        if not speculative:
            reason = (
                "this test runs for speculative profiles only (its llmperf marker), and none of "
                f"the selected ({', '.join(p.name for p in selected)}) speculates"
            )
            skipped = pytest.mark.skip(reason=reason)
            if with_levels:
                return [pytest.param(None, None, marks=skipped)], ["no-speculative-profile"]
            return [pytest.param(None, marks=skipped)], ["no-speculative-profile"]
        selected = speculative
    if not with_levels or speculative_only:
        # The engine channel's launch measures the closed-loop levels alone; its accept
        # length is the one it was pinned at.
        selected = [p for p in selected if not p.pinned]
    if with_levels:
        pairs = [(p.name, c) for p in selected for c in p.concurrency if only is None or c in only]
        if not pairs and only is not None:
            levels = ", ".join(str(c) for c in sorted({c for p in selected for c in p.concurrency}))
            reason = (
                f"this test runs at C = {', '.join(map(str, only))} (its llmperf marker), none of "
                f"the selected levels ({levels})"
            )
            return [pytest.param(None, None, marks=pytest.mark.skip(reason=reason))], ["no-level"]
        return list(pairs), [f"{name}-C{c}" for name, c in pairs]
    names = [p.name for p in selected]
    return list(names), names
