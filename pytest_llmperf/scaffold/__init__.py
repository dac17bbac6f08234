"""``python -m pytest_llmperf init``: a working ``perf_suites/`` for a new project.

It writes the shipped suites (the same files as this repository's ``perf_suites/``), a
commented ``profiles.toml`` whose simulated pair runs at once, the simulated pair's goldens (so
the first ``pytest perf_suites`` gates and passes), a ``pytest.ini`` when the project has no
pytest configuration yet (pytest would otherwise take ``perf_suites/`` as its root), and a
nightly GPU workflow to edit. Existing files are never overwritten without ``--force``.
"""

from __future__ import annotations

import configparser
from importlib.resources import files
from pathlib import Path

#: What init writes: target path (relative to the project) → the scaffold file it copies, and
#: what it is (docs/getting-started.md's table is generated from it).
FILES = {
    "perf_suites/profiles.toml": (
        "profiles.toml",
        "the server profiles: a simulated SGLang pair that runs at once, and a commented SGLang "
        "pair to edit",
    ),
    "perf_suites/test_throughput.py": (
        "perf_suites/test_throughput.py",
        "output tok/s per level, TTFT and ITL gates, the single-stream figure, a speculative "
        "profile's accept length, the speculative speedup",
    ),
    "perf_suites/test_prefill.py": (
        "perf_suites/test_prefill.py",
        "2,048-token prompts, 64 tokens out: prefill in TTFT and tok/s",
    ),
    "perf_suites/test_request_rate.py": (
        "perf_suites/test_request_rate.py",
        "open-loop rate levels (`request_rate`): latency from the arrival, and whether the "
        "server keeps up",
    ),
    "perf_suites/test_outputs.py": (
        "perf_suites/test_outputs.py",
        "greedy parity: a speculative profile answers token for token as its base, or the "
        "pair FAILs",
    ),
    "perf_suites/test_capacity.py": (
        "perf_suites/test_capacity.py",
        "the highest arrival rate that meets the profile's `slo` (`-k capacity`)",
    ),
    "baselines/sim-baseline/sim.json": (
        "baselines/sim-baseline/sim.json",
        "the simulated baseline's goldens",
    ),
    "baselines/sim-eagle3/sim.json": (
        "baselines/sim-eagle3/sim.json",
        "the simulated EAGLE-3 server's goldens",
    ),
    ".github/workflows/nightly-llm-perf.yml": (
        "nightly.yml",
        "a nightly job for a self-hosted GPU runner",
    ),
}
PYTEST_INI_WHAT = (
    "where the profiles and goldens are (only when the project has no pytest configuration)"
)
PYTEST_INI = """\
[pytest]
# pytest-llmperf: where the profiles and the goldens are (relative to this file).
llmperf_profiles_file = perf_suites/profiles.toml
llmperf_baseline_dir = baselines
"""


def init(project: Path, *, force: bool = False) -> list[str]:
    """Write the scaffold into ``project``; one line per file written or kept."""
    source = files(__name__)
    lines = []
    for target, (name, _) in FILES.items():
        path = project / target
        if path.exists() and not force:
            lines.append(f"kept     {target} (exists; --force replaces it)")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(source.joinpath(name).read_bytes())
        lines.append(f"wrote    {target}")
    if has_pytest_config(project):
        lines.append(
            "kept     the project's pytest configuration (add the llmperf_* keys if needed)"
        )
    else:
        (project / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
        lines.append("wrote    pytest.ini")
    return lines


def has_pytest_config(project: Path) -> bool:
    """Whether pytest finds a configuration file in ``project`` itself."""
    if (project / "pytest.ini").exists() or (project / ".pytest.ini").exists():
        return True
    pyproject = project / "pyproject.toml"
    if pyproject.exists() and "[tool.pytest.ini_options]" in pyproject.read_text(encoding="utf-8"):
        return True
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        parser = configparser.ConfigParser()
        try:
            parser.read(project / name, encoding="utf-8")
        except configparser.Error:
            continue
        if parser.has_section(section):
            return True
    return False
