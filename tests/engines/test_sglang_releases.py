"""The plugin against each tested SGLang release's own code (tests/data/sglang-releases.txt).

Every release's ``sglang`` package comes from its sha256-pinned wheel; scripts/sglang_parser.py
imports it in the real SGLang venv and answers with that release's own argument parser (the one
``launch_server`` builds) and ServerArgs fields. Adding a release to the matrix is one line.
Needs ``bash scripts/install-sglang-cpu.sh`` (skipped without, failed under
LLMPERF_REQUIRE_SGLANG=1).
"""

from __future__ import annotations

import json
import logging
import re

import pytest

from pytest_llmperf.core import adaptive_spec
from pytest_llmperf.core.versions import parse_version
from pytest_llmperf.engines.sglang_flags import adapt
from pytest_llmperf.engines.sglang_log import stage
from pytest_llmperf.golden import fingerprint
from pytest_llmperf.profiles_file import load_profiles
from pytest_llmperf.sim.flags import release_parser
from tests.sglang_real import (
    CLI_DATA,
    REPO,
    ROOT,
    ask_releases_at_once,
    release,
    require,
    versions,
)

VERSIONS = versions()
PROFILES = load_profiles(REPO / "perf_suites" / "profiles.toml").profiles
#: Every shipped profile that launches SGLang.
SGLANG_PROFILES = sorted(name for name, p in PROFILES.items() if p.engine == "sglang")
MODEL = ["--model-path", "m"]
#: Flags whose name changed across releases, each written both ways.
STREAM_FLAGS = [["--stream-output"], ["--incremental-streaming-output"]]
OTHER_BACKEND = ["--attention-backend", "triton"]


def adapted(args: list[str] | tuple[str, ...], version: str) -> list[str]:
    return adapt(list(args), version, where="test").args


def questions(version: str) -> list[list[str]]:
    """Everything asked of one release, in one import: each shipped profile adapted and as
    written, the streaming flags adapted and as written."""
    out = []
    for name in SGLANG_PROFILES:
        out.append([*MODEL, *adapted(PROFILES[name].args, version)])
        out.append([*MODEL, *PROFILES[name].args])
        out.append([*MODEL, *adapted([*PROFILES[name].args, *OTHER_BACKEND], version)])
    for flags in STREAM_FLAGS:
        out.append([*MODEL, *adapted(flags, version)])
        out.append([*MODEL, *flags])
    return out


def answers(version: str) -> dict[tuple[str, ...], dict]:
    asked = questions(version)
    real = asked_all(version)
    return {tuple(argv): answer for argv, answer in zip(asked, real["parses"])}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", SGLANG_PROFILES)
def test_every_shipped_profile_parses_after_adaptation(version, name):
    argv = (*MODEL, *adapted(PROFILES[name].args, version))
    answer = answers(version)[argv]
    assert answer["code"] == 0, (
        f"SGLang {version} refuses profile {name!r} as the plugin adapts it: {answer['error']}\n"
        f"  adapted args: {' '.join(argv)}"
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_the_seed_profiles_unadapted_fail_from_0_5_20_with_the_message_the_stand_in_gives(version):
    release_json = json.loads((CLI_DATA / f"{version}.json").read_text())
    for name in ("baseline", "eagle3"):
        argv = (*MODEL, *PROFILES[name].args)
        real = answers(version)[argv]
        removed = parse_version(version) >= (0, 5, 20)
        assert (real["code"] == 2) == removed, (version, name, real)
        if removed:
            assert "ambiguous option: --cuda-graph-max-bs could match" in real["error"]
        assert _stand_in(release_json, list(argv)) == (real["code"], real.get("error")), (
            f"the stand-in for SGLang {version} answers {name!r} differently from the release"
        )


@pytest.mark.parametrize("version", VERSIONS)
def test_streaming_flags_are_adapted_to_the_name_the_release_has(version):
    for flags in STREAM_FLAGS:
        answer = answers(version)[(*MODEL, *adapted(flags, version))]
        assert answer["code"] == 0, (version, flags, answer["error"])
        value = answer["values"].get(
            "incremental_streaming_output", answer["values"].get("stream_output")
        )
        assert value is True, (version, flags, answer["values"])


@pytest.mark.parametrize("version", VERSIONS)
def test_the_stand_in_parser_answers_every_question_as_the_release_does(version):
    """The stand-ins refuse flags with a parser built from tests/data/sglang-cli/<v>.json: it
    must refuse exactly what the release refuses, with the same message."""
    release_json = json.loads((CLI_DATA / f"{version}.json").read_text())
    for argv, real in answers(version).items():
        assert _stand_in(release_json, list(argv)) == (real["code"], real.get("error")), argv


@pytest.mark.parametrize("version", VERSIONS)
def test_the_committed_release_data_is_what_the_release_says(version):
    """tests/data/sglang-cli/<v>.json (the stand-ins' parser and /server_info field set) is the
    release's own description: `python scripts/sglang_releases.py regenerate` rewrites it."""
    real = asked_all(version)
    committed = json.loads((CLI_DATA / f"{version}.json").read_text())
    assert committed["fields"] == real["fields"], (
        "regenerate: python scripts/sglang_releases.py regenerate"
    )
    assert committed["options"] == real["options"], (
        "regenerate: python scripts/sglang_releases.py regenerate"
    )
    assert committed["prog"] == real["prog"]


def test_the_simulated_engine_knows_every_flag_of_every_release():
    known = set((REPO / "pytest_llmperf" / "sim" / "sglang_flags.txt").read_text().split())
    every = {
        flag
        for path in CLI_DATA.glob("*.json")
        for option in json.loads(path.read_text())["options"]
        for flag in option["flags"]
    }
    assert known == every, "regenerate: python scripts/sglang_releases.py regenerate"
    assert {p.stem for p in CLI_DATA.glob("*.json")} == set(VERSIONS)


@pytest.mark.parametrize(("old", "new"), list(zip(VERSIONS, VERSIONS[1:])))
@pytest.mark.parametrize("name", ["baseline", "sglang-cpu"])
def test_an_upgrade_changes_no_hard_key_of_the_same_profile(old, new, name):
    """A golden recorded under one release stays comparable under the next: with each release's
    own field set and its parser's values for the profile, only soft keys differ; a changed
    attention backend is still a hard change."""
    profile = PROFILES[name]
    before = _fingerprint(profile, old, adapted(profile.args, old))
    after = _fingerprint(profile, new, adapted(profile.args, new))
    golden = before.to_json()
    assert fingerprint.hard_changes(golden["hard"], after) == [], (old, new)
    soft = fingerprint.soft_changes(golden, after)
    assert any("server field(s) added" in line for line in soft), soft
    other = adapted([*profile.args, *OTHER_BACKEND], new)
    changed = _fingerprint(profile, new, other)
    assert any(
        "attention_backend" in line for line in fingerprint.hard_changes(golden["hard"], changed)
    )


def _fingerprint(profile, version: str, args: list[str]) -> fingerprint.Fingerprint:
    real = asked_all(version)
    answer = answers(version)[(*MODEL, *args)]
    assert answer["code"] == 0, answer
    assert set(answer["fields"]) == set(real["fields"])
    return fingerprint.take(profile, {"/server_info": {**answer["fields"], "version": version}})


def _stand_in(release_json: dict, argv: list[str]) -> tuple[int, str | None]:
    import contextlib
    import io

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            release_parser(release_json).parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0), err.getvalue().strip().splitlines()[-1]
    return 0, None


def _source(version: str, *parts: str) -> str:
    path = ROOT.joinpath("releases", version, "sglang", *parts)
    require(path)
    return path.read_text()


def _release_sources(version: str, under: str) -> str:
    base = ROOT / "releases" / version / "sglang" / under
    require(base)
    return "\n".join(p.read_text(errors="replace") for p in sorted(base.rglob("*.py")))


def _log_formatter(version: str, prefix: str) -> logging.Formatter:
    """The release's own log line format (``configure_logger``), with a scheduler's prefix."""
    source = _source(version, "srt", "utils", "common.py")
    (fmt,) = re.findall(
        r'format = f"(\[%\(asctime\)s\{maybe_ms\}\{prefix\}\] %\(message\)s)"', source
    )
    return logging.Formatter(fmt.replace("{maybe_ms}", "").replace("{prefix}", prefix))


def _line(formatter: logging.Formatter, message: str) -> str:
    return formatter.format(logging.makeLogRecord({"msg": message, "levelno": logging.INFO}))


def _bars(version: str) -> list[str]:
    """Every checkpoint loader bar of the release, drawn with its own bar format at 5/11."""
    loaders = _release_sources(version, "srt/model_loader")
    formats = re.findall(
        r'"(\{desc\}: \{percentage:3\.0f\}% Completed \| \{n_fmt\}/\{total_fmt\}[^"]*)"',
        loaders + _source(version, "srt", "utils", "common.py"),
    )
    (bar_format,) = {f.replace("\\n", "") for f in formats}
    descs = sorted(set(re.findall(r'desc="([^"]*shards)"', loaders)))
    assert descs, "no loader bar found in the release"
    # The fields tqdm fills in a bar_format, as it fills them at 5 of 11 shards.
    drawn = {"percentage": 5 / 11 * 100, "n_fmt": "5", "total_fmt": "11", "elapsed": "00:02",
             "remaining": "00:02", "rate_fmt": "2.50it/s"}  # fmt: skip
    return [bar_format.format(desc=desc, **drawn).strip() for desc in descs]


@pytest.mark.parametrize("version", VERSIONS)
def test_progress_reads_every_loader_bar_of_the_release(version):
    for bar in _bars(version):
        assert stage(bar) == "loading weights 45 % (5/11 shards)", bar


@pytest.mark.parametrize("version", VERSIONS)
def test_progress_at_tp8_baseline_never_says_draft_and_eagle3_goes_in_order(version):
    """Eight schedulers log with the release's own format and their ``TPn`` prefix. A baseline:
    each rank loads once. EAGLE-3: each rank loads its target, then its draft."""
    ranks = [_log_formatter(version, f" TP{rank}") for rank in range(8)]
    bar = _bars(version)[-1]
    captures = sorted(
        set(
            re.findall(
                r"Capture [\w\- ]*?(?:cuda|CUDA) graph begin", _release_sources(version, "srt")
            )
        )
    )
    target = [c for c in captures if "draft" not in c.lower()]
    draft = [c for c in captures if "draft" in c.lower()]
    assert draft, f"no draft capture line in SGLang {version}"

    baseline = [_line(f, "Load weight begin. avail mem=70.00 GB") for f in ranks] + [bar]
    seen = [stage("\n".join(baseline[: i + 1])) for i in range(len(baseline))]
    assert not any("draft" in s for s in seen if s), seen
    assert seen[-1] == "loading weights 45 % (5/11 shards)"

    log = [_line(f, "Load weight begin. avail mem=70.00 GB") for f in ranks] + [bar]
    expected = ["loading weights 45 % (5/11 shards)"]
    log += [_line(f, "Load weight end. elapsed=1.0 s") for f in ranks]
    log += [_line(f, "Load weight begin. avail mem=20.00 GB") for f in ranks] + [bar]
    expected.append("loading draft weights 45 % (5/11 shards)")
    if target:
        log += [_line(f, target[0] + ". avail mem=10.00 GB") for f in ranks]
        expected.append("capturing target CUDA graphs")
    log += [_line(f, draft[0] + ". avail mem=9.00 GB") for f in ranks]
    expected.append("capturing draft CUDA graphs")
    stages = [stage("\n".join(log[: i + 1])) for i in range(len(log))]
    order = [s for i, s in enumerate(stages) if s in expected and (i == 0 or stages[i - 1] != s)]
    assert order == expected, (version, order)


CUTOFFS = (1, 5, 70, 100)
BATCHES = list(range(1, 257))
#: For each cut-off, the config the plugin writes for 3 steps, routed over every batch size.
ADAPTIVE = [
    {"config": adaptive_spec.cutoff_config(cutoff, 3), "initial_steps": 3, "max_bs": 256,
     "algorithm": "EAGLE3", "batches": BATCHES}
    for cutoff in CUTOFFS
]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def every_release_asked_at_once():
    """Each release is asked everything before the first test asks: in one process that imports
    the libraries every release imports once (torch's import is most of the 10 s an import of a
    release takes on one core), each release in a process forked from it, two at a time."""
    ask_releases_at_once({v: (questions(v), ADAPTIVE) for v in VERSIONS})


def asked_all(version: str) -> dict:
    """Everything asked of one release, in one import of it (cached): its description, the
    parses of questions(version), the adaptive routing of ADAPTIVE."""
    return release(version, questions(version), ADAPTIVE)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_adaptive_config_advice_does_in_the_release_what_it_says(version):
    """For a measured cut-off at C = 1, 5, 70, 100, the config file the plugin writes (3 steps)
    is routed by the release's own code (its capture sizes, its AdaptiveSpeculativeParams) for
    every batch size 1..256: speculation up to the cut-off's padded size, none beyond. Releases
    before 0.5.14 get no file from the plugin, and their code shows why."""
    batches = BATCHES
    answers = asked_all(version)["adaptive"]
    if parse_version(version) < (0, 5, 14):
        assert all("error" in a for a in answers), (version, answers[0])
        return
    for cutoff, answer in zip(CUTOFFS, answers):
        assert "error" not in answer, answer
        assert answer["capture_sizes"] == adaptive_spec.capture_sizes(256)
        off = adaptive_spec.first_batch_without_speculation(cutoff)
        speculating = [b for b in batches if answer["steps"][str(b)] > 0]
        assert speculating == list(range(1, off)), (version, cutoff, off)
        assert off - 1 >= cutoff
