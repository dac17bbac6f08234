"""Stand-in for ``python -m sglang.launch_server`` (copied into a fake ``sglang`` package by the
tests, next to an ``sglang-<version>.dist-info``): it refuses the flags its version does not have,
the way SGLang's argparse does (exit 2), then runs the simulated engine with the rest.
"""

import importlib.metadata
import os
import sys
from pathlib import Path

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
if V >= (0, 5, 20) and "--stream-output" in flags:
    refuse("unrecognized arguments: --stream-output")
if V < (0, 5, 11) and "--incremental-streaming-output" in flags:
    refuse("unrecognized arguments: --incremental-streaming-output")
# Every other flag must be one this release's parser has: a ServerArgs field (read from its wheel),
# a documented alias, or a deprecated alias still accepted by this release.
ALIASES = {"model": "model_path", "tensor_parallel_size": "tp_size", "data_parallel_size": "dp_size",
           "speculative_draft_model": "speculative_draft_model_path"}  # fmt: skip
DEPRECATED = {
    "cuda_graph_max_bs": ((0, 5, 14), (0, 5, 20)),
    "stream_output": ((0, 5, 11), (0, 5, 20)),
}
FIELD_FILE = Path(__file__).with_name(f"server-fields-{VERSION}.txt")
if FIELD_FILE.exists():
    fields = set(FIELD_FILE.read_text().split())
    for flag in flags:
        name = flag[2:].replace("-", "_")
        since, until = DEPRECATED.get(name, ((9, 9, 9), (0, 0, 0)))
        if not (
            flag.startswith("--sim-")
            or name in fields
            or ALIASES.get(name) in fields
            or since <= V < until
        ):
            refuse(f"unrecognized arguments: {flag}")

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
# The /server_info field set of this release, read from its wheel (tests/data/sglang-server-fields).
FIELDS = Path(__file__).with_name(f"server-fields-{VERSION}.txt")
own = [
    "--sim-report-version",
    VERSION,
    *(["--sim-server-fields", str(FIELDS)] if FIELDS.exists() else []),
]
sys.exit(main([*sys.argv[1:], *own]))
