"""Stand-in for ``python -m sglang.launch_server`` (copied into a fake ``sglang`` package by the
tests, next to an ``sglang-<version>.dist-info``): it refuses the flags its version does not have,
the way SGLang's argparse does (exit 2), then runs the simulated engine with the rest.
"""

import importlib.metadata
import sys

from pytest_llmperf.core.versions import parse_version
from pytest_llmperf.sim.server import main

VERSION = importlib.metadata.version("sglang")
V = parse_version(VERSION)
PROG = "sglang serve" if V >= (0, 5, 23) else "launch_server.py"


def refuse(message: str) -> None:
    print(
        f"usage: {PROG} [-h] --model-path MODEL_PATH ...\n{PROG}: error: {message}", file=sys.stderr
    )
    sys.exit(2)


flags = [a.split("=", 1)[0] for a in sys.argv[1:] if a.startswith("--")]
if V >= (0, 5, 20) and "--cuda-graph-max-bs" in flags:
    refuse(
        "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )
for new_flag in ("--cuda-graph-max-bs-decode", "--flashinfer-allreduce-fusion-backend"):
    if V < (0, 5, 14) and new_flag in flags:
        refuse(f"unrecognized arguments: {new_flag}")
if V < (0, 5, 11) and "--speculative-adaptive" in flags:
    refuse("unrecognized arguments: --speculative-adaptive")
sys.exit(main([*sys.argv[1:], "--sim-report-version", VERSION]))
