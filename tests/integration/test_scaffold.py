"""A new project, as a user starts one: the plugin installed from its wheel (not this checkout)
into a fresh environment, ``python -m pytest_llmperf init`` in an empty directory, then
``pytest perf_suites`` passes against the goldens it wrote."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(*args: str | Path, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON"))}
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with pytest-llmperf installed from a wheel of this tree."""
    root = tmp_path_factory.mktemp("wheel")
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", root / "dist", REPO,
                cwd=root, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = (root / "dist").glob("pytest_llmperf-*.whl")
    venv = root / "venv"
    assert run(sys.executable, "-m", "venv", venv, cwd=root, timeout=120).returncode == 0
    python = venv / "bin" / "python"
    pip = run(python, "-m", "pip", "install", "-q", wheel, cwd=root, timeout=600)
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-2000:]
    return python


def test_init_in_an_empty_directory_then_pytest_perf_suites_passes(installed, tmp_path):
    project = tmp_path / "new-project"
    project.mkdir()
    init = run(installed, "-m", "pytest_llmperf", "init", cwd=project, timeout=60)
    assert init.returncode == 0, init.stderr
    assert "wrote    perf_suites/profiles.toml" in init.stdout
    # The plugin the project runs is the wheel's, not this checkout's.
    where = run(installed, "-c", "import pytest_llmperf; print(pytest_llmperf.__file__)",
                cwd=project, timeout=60)  # fmt: skip
    assert str(REPO) not in where.stdout and "site-packages" in where.stdout
    # One concurrency level of the closed-loop suites, the outputs and the startup, against the
    # goldens init wrote (the README's first command runs every suite at every level,
    # benchmarks/readme_runs.py); the open-loop suites (rates, the capacity search: their code
    # is the package's, their goldens the same file) are tested on their own
    # (tests/integration/test_open_loop.py).
    result = run(installed, "-m", "pytest", "perf_suites", "--llm-concurrency", "10",
                 "-k", "not capacity and not rate", "-p", "no:cacheprovider",
                 cwd=project, timeout=600)  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "llmperf verdicts:" in output and "FAIL" not in output.split("llmperf verdicts:")[1]
    assert "Traceback" not in output
    # Run again: init keeps what the user may have edited.
    again = run(installed, "-m", "pytest_llmperf", "init", cwd=project, timeout=60)
    assert "kept     perf_suites/profiles.toml (exists; --force replaces it)" in again.stdout


def test_the_scaffold_ships_this_repositorys_suites_and_sim_goldens():
    scaffold = REPO / "pytest_llmperf" / "scaffold"
    for name in (
        "test_throughput.py",
        "test_prefill.py",
        "test_request_rate.py",
        "test_capacity.py",
        "test_outputs.py",
        "test_startup.py",
    ):
        assert filecmp.cmp(scaffold / "perf_suites" / name, REPO / "perf_suites" / name, False)
    for profile in ("sim-baseline", "sim-eagle3"):
        shipped = scaffold / "baselines" / profile / "sim.json"
        assert filecmp.cmp(shipped, REPO / "baselines" / profile / "sim.json", shallow=False)


def test_the_scaffold_profiles_are_the_repositorys_simulated_pair():
    """The shipped goldens hold only for the same servers and workloads."""
    from dataclasses import replace

    from pytest_llmperf.profiles_file import load_profiles

    ours = load_profiles(REPO / "perf_suites" / "profiles.toml").profiles
    shipped = load_profiles(REPO / "pytest_llmperf" / "scaffold" / "profiles.toml").profiles
    for name in ("sim-baseline", "sim-eagle3"):
        mine = replace(ours[name], source=Path("x"), description="")
        assert replace(shipped[name], source=Path("x"), description="") == mine
