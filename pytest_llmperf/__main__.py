"""``python -m pytest_llmperf COMMAND``: what the plugin does outside a pytest run.

- ``init [DIR] [--force]``: a working ``perf_suites/`` for a new project (pytest_llmperf/scaffold).
- ``history STORE [--json | --compare A B | --html DIR | --export FORMAT FILE | --load-spool F]``:
  what a history store holds (pytest_llmperf/history/cli.py).
- ``merge OUT.json LEG.json… [--report DIR] [--history STORE]``: the results of a nightly
  matrix's legs as one results file, one report, one history upload (pytest_llmperf/merge.py).
- ``bisect --good REV --bad REV [--repo DIR] [--setup CMD] -- PYTEST_ARGS``: the commit that
  made a point slower, each step measured (pytest_llmperf/bisect.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_llmperf import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_llmperf")
    parser.add_argument("--version", action="version", version=f"pytest-llmperf {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    init = commands.add_parser(
        "init", help="Write a working perf_suites/ (profiles, suites, goldens) into a project."
    )
    init.add_argument("directory", nargs="?", default=".", type=Path, help="Default: .")
    init.add_argument("--force", action="store_true", help="Replace files that exist.")
    from pytest_llmperf.history import cli as history_cli

    history_cli.add_parser(commands)
    from pytest_llmperf import bisect

    bisect.add_parser(commands)
    merge = commands.add_parser(
        "merge",
        help="Merge the results JSON of a matrix's legs (runners) into one results file, one "
        "report and one history upload.",
    )
    merge.add_argument("out", metavar="OUT.json", type=Path, help="the merged results file")
    merge.add_argument(
        "legs", metavar="LEG.json", type=Path, nargs="+", help="each leg's --perf-json"
    )
    merge.add_argument("--report", metavar="DIR", type=Path, help="write DIR/summary.md")
    merge.add_argument("--history", metavar="STORE", help="load each leg as a run into STORE")
    args = parser.parse_args(argv)
    if args.command == "history":
        return history_cli.main(args)
    if args.command == "merge":
        return _merge(args)
    if args.command == "bisect":
        return bisect.main(args)
    if args.command == "init":
        from pytest_llmperf.scaffold import init as write_scaffold

        for line in write_scaffold(args.directory, force=args.force):
            print(line)
        print("next:     pytest perf_suites     (runs the simulated pair against its goldens)")
    return 0


def _merge(args: argparse.Namespace) -> int:
    from pytest_llmperf.history.store import HistoryError
    from pytest_llmperf.merge import MergeError, main

    try:
        lines = main(args.out, args.legs, args.report, args.history)
    except (MergeError, HistoryError) as exc:
        print(f"pytest-llmperf merge: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
