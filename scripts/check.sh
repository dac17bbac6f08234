#!/usr/bin/env bash
# The project's checks, exactly as CI runs them (.ci/run calls this): what the tests need
# installed first, then style (ruff: lint, import order, formatting; mypy: types), the manual
# (mkdocs, strict: its generated tables are current, tests/unit/test_docs.py), the package
# (sdist and wheel, twine check), then the real engines of tests/engines/: llama-server (about
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
ruff check .
ruff format --check .
mypy
mkdocs build --strict --site-dir build/site
python -m build --outdir build/dist
twine check build/dist/*
bash scripts/install-llama-server.sh
bash scripts/install-sglang-cpu.sh
bash scripts/install-test-services.sh
LLMPERF_REQUIRE_POSTGRES=1 LLMPERF_REQUIRE_CHROMIUM=1 LLMPERF_REQUIRE_SLURM=1 pytest tests "$@"
