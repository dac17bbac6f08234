"""The committed goldens stay comparable with the code that reads them.

A speedup golden keeps its base's comparability hash; the hash is computed from the base's
fingerprint by the current rules (canonical names, replaced switches), so a change of those
rules changes it and turns every committed speedup INCOMPARABLE, which only the main command,
``pytest perf_suites``, would show. Recomputed here from the committed base golden, in
milliseconds; a failure means: migrate the goldens with a history entry, as the rules changed,
not the servers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_llmperf.engines.sglang_args import flag_fields
from pytest_llmperf.golden.fingerprint import Fingerprint
from pytest_llmperf.profiles_file import load_profiles

REPO = Path(__file__).resolve().parents[2]
BASELINES = REPO / "baselines"
PROFILES = load_profiles(REPO / "perf_suites" / "profiles.toml").profiles
GOLDENS = sorted(BASELINES.glob("*/*.json"))


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_speedup_goldens_name_their_base_by_the_hash_the_current_rules_give(path):
    golden = json.loads(path.read_text())
    for key, point in golden["points"].items():
        workload = point.get("workload") or {}
        if "base_fingerprint" not in workload:
            continue
        base_name = workload["base_profile"]
        base = json.loads((BASELINES / base_name / path.name).read_text())
        # As a run takes it: the base golden's server fields, the flags its profile sets.
        stored = Fingerprint.from_json(base["fingerprint"])
        keys = flag_fields(PROFILES[base_name].args)
        recomputed = Fingerprint(stored.hard, stored.soft, keys).comparability_hash
        assert workload["base_fingerprint"] == recomputed, (
            f"{path}: {key} names its base by {workload['base_fingerprint'][:12]}…, but the base "
            f"golden's fingerprint hashes to {recomputed[:12]}… under the current rules"
        )


def test_there_are_committed_goldens():
    assert any(path.parent.name == "sim-eagle3" for path in GOLDENS)
