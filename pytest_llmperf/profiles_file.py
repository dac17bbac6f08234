"""A profiles file, read: its TOML, its profiles built from the field table (profiles.py), then
each checked against its engine (engines/) and resolved where only the engine knows: whether it
speculates, what answers once it is ready, and a speculative profile's base.

This is the step above both: a profile is data and knows no engine, and an engine reads a
profile through its attributes.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from pytest_llmperf import engines
from pytest_llmperf.errors import ProfileError
from pytest_llmperf.profiles import Profile, ProfileSet, build_profiles

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def load_profiles(path: str | Path) -> ProfileSet:
    """Read, resolve and validate every profile of a TOML file."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(
            f"profiles file {path} does not exist. Create it or point --llm-profiles-file "
            "(ini: llmperf_profiles_file) at one."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}") from None
    unknown_top = sorted(set(raw) - {"profiles", "default"})
    if unknown_top:
        raise ProfileError(
            f"{path}: unknown top-level key(s) {unknown_top}; allowed: 'profiles' (a table of "
            "profiles) and 'default' (the profile names run when none is chosen)."
        )
    tables = raw.get("profiles")
    if not isinstance(tables, dict) or not tables:
        raise ProfileError(f"{path}: no profiles; define at least one [profiles.NAME] table.")
    built = build_profiles(path, tables)

    def depth(profile: Profile) -> int:
        return 1 + depth(built[profile.extends]) if profile.extends else 0

    # A profile's parents first, so an inherited mistake is named where it was written.
    checked = {
        name: for_its_engine(built[name]) for name in sorted(built, key=lambda n: depth(built[n]))
    }
    profiles = {name: with_base(checked, checked[name]) for name in built}
    default = raw.get("default", [])
    if isinstance(default, str):
        default = [default]
    if not isinstance(default, list) or not all(isinstance(d, str) for d in default):
        raise ProfileError(f"{path}: 'default' must be a list of profile names, got {default!r}.")
    for name in default:
        if name not in profiles:
            raise ProfileError(
                f"{path}: 'default' names unknown profile {name!r}. "
                f"Available profiles: {', '.join(sorted(profiles))}."
            )
    return ProfileSet(path=path, profiles=profiles, default=tuple(default))


def for_its_engine(profile: Profile) -> Profile:
    """``profile`` checked against its engine, with what the engine decides resolved."""
    where = profile.where
    try:
        engine = engines.get(profile.engine)
    except ProfileError as exc:
        raise ProfileError(f"{where}, field 'engine': {exc}.") from None
    engine.check_profile(where, profile)
    if profile.router is not None and not engine.routable:
        raise ProfileError(
            f"{where}, field 'router': SGLang's router routes to SGLang workers; this profile has "
            f'engine = {profile.engine!r}. Use engine = "sglang" (or "sim"), or remove the router.'
        )
    if profile.launcher == "srun" and not engine.multi_node:
        raise ProfileError(
            f"{where}, field 'launcher': \"srun\" starts SGLang's ranks (--nnodes, --node-rank, "
            f"--dist-init-addr); this profile has engine = {profile.engine!r}. Use "
            'engine = "sglang" (or "sim").'
        )
    speculative = profile.speculative_setting
    if speculative is None:
        speculative = engine.is_speculative(profile.args, profile.command or ())
    readiness = profile.health_path or (
        "/readiness" if profile.router is not None else engine.health_path
    )
    return replace(profile, speculative=speculative, readiness_path=readiness)


def with_base(profiles: Mapping[str, Profile], profile: Profile) -> Profile:
    """Resolve ``base_profile``: explicit, else the nearest non-speculative ancestor."""
    where = f"{profile.where}, field 'base_profile'"
    base = profile.base_profile
    if base is not None:
        if not profile.speculative:
            raise ProfileError(
                f"{where}: only a speculative profile (with --speculative-algorithm, or "
                "speculative = true) has a base; remove the field."
            )
        if base not in profiles:
            raise ProfileError(
                f"{where}: {base!r} is not a profile in this file. "
                f"Available profiles: {', '.join(sorted(profiles))}."
            )
        if profiles[base].speculative:
            raise ProfileError(
                f"{where}: {base!r} is speculative itself; name the non-speculative profile "
                "that this one is compared with."
            )
        return profile
    if not profile.speculative:
        return profile
    parent = profiles.get(profile.extends) if profile.extends else None
    while parent is not None and parent.speculative:
        parent = profiles.get(parent.extends) if parent.extends else None
    return replace(profile, base_profile=parent.name) if parent is not None else profile
