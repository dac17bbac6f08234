"""Stand-in for ``python -m sglang.launch_server`` (copied into a fake ``sglang`` package by the
tests, next to an ``sglang-<version>.dist-info`` and that release's description, ``release.json``:
its option table and ServerArgs fields as scripts/sglang_parser.py read them from the release's
own code). It refuses exactly what that release's parser refuses (exit 2, argparse's message),
reports that release's version and /server_info field set, and otherwise runs the simulated engine.
"""

import importlib.metadata
import os
import sys
from pathlib import Path

from pytest_llmperf.core.versions import parse_version
from pytest_llmperf.sim.server import main

VERSION = importlib.metadata.version("sglang")
V = parse_version(VERSION)
RELEASE = Path(__file__).with_name("release.json")

# 0.5.6 and 0.5.9 turn the overlap scheduler off for EAGLE-3 (and STANDALONE) unless spec v2 is on.
spec = next(
    (sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--speculative-algorithm"), None
)
if (
    V < (0, 5, 11)
    and spec in ("EAGLE3", "STANDALONE")
    and os.environ.get("SGLANG_ENABLE_SPEC_V2") != "1"
):
    sys.argv.append("--disable-overlap-schedule")
own = ["--sim-report-version", VERSION]
if RELEASE.exists():
    own += ["--sim-release", str(RELEASE)]
sys.exit(main([*sys.argv[1:], *own]))
