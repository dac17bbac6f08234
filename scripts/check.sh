#!/usr/bin/env bash
# The project's checks, exactly as CI runs them (.ci/run calls this): what the tests need
# installed first, then style (ruff: lint, import order, formatting; mypy: types), the manual
# (mkdocs, strict: its generated tables are current, tests/unit/test_docs.py), the package
# (sdist and wheel, twine check), and meanwhile the real engines of tests/engines/: llama-server (about
# 2 minutes on a fresh 2-core machine, seconds when .llama/ or ~/.cache/pytest-llmperf holds the
# binary) and the real SGLang on the CPU with the release matrix (about 3 minutes and 11 GB,
# seconds when .sglang/ holds it), PostgreSQL and Chromium and Slurm with munge from Debian's
# packages (scripts/install-test-services.sh: seconds when installed; the tests start their own
# PostgreSQL server; it starts the local Slurm cluster of scripts/start-slurm-local.sh), then
# every test; the services' tests must run here, not skip. pytest's exit 5 (no tests ran) fails.
#   bash scripts/check.sh            # everything
#   bash scripts/check.sh -x -k foo  # extra arguments go to the final pytest
set -euo pipefail
cd "$(dirname "$0")/.."
pip install -e '.[test,docs]'
# The three installers share nothing (a compile, pip downloads, Debian's packages): on a fresh
# machine they take about 5, 3 and 1-2 minutes one after another, so they run side by side,
# beside the checks below, each into its own log, shown when it ends.
mkdir -p build/install-logs
installers=(install-llama-server install-sglang-cpu install-test-services)
pids=()
# A check that fails ends the script: its installers (each in a process group of its own) with it.
trap 'for pid in "${pids[@]}"; do kill -- -"$pid" 2>/dev/null || true; done' EXIT
for name in "${installers[@]}"; do
    setsid bash "scripts/$name.sh" >"build/install-logs/$name.log" 2>&1 &
    pids+=($!)
done
ruff check .
ruff format --check .
mypy
mkdocs build --strict --site-dir build/site
python -m build --outdir build/dist
twine check build/dist/*
failed=0
for i in "${!installers[@]}"; do
    status=0
    wait "${pids[$i]}" || status=$?
    echo "--- ${installers[$i]} (exit $status):"
    cat "build/install-logs/${installers[$i]}.log"
    [ "$status" -eq 0 ] || failed=1
done
[ "$failed" -eq 0 ] || { echo "check: an installer failed (its log is above)" >&2; exit 1; }
trap - EXIT
LLMPERF_REQUIRE_POSTGRES=1 LLMPERF_REQUIRE_CHROMIUM=1 LLMPERF_REQUIRE_SLURM=1 pytest tests "$@"
