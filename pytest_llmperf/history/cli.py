"""``python -m pytest_llmperf history STORE``: the runs, the open change points, and the rest.

- (nothing): the runs (id, start, length, complete or not, mode, commit, points) and the open
  change points, newest first; ``--json`` the same as JSON;
- ``--compare A B``: two runs point by point (ids, unique prefixes, ``latest``, ``latest~1``);
- ``--html DIR``: the dashboard, ``DIR/index.html``;
- ``--export otava|bmf|github-action-benchmark FILE`` (``--run`` for the one-run formats);
- ``--load-spool FILE``: records a run could not write to the store (it said so), loaded now.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_llmperf.history import EXPORT_FORMATS as FORMATS


def add_parser(commands: Any) -> None:
    history = commands.add_parser(
        "history",
        help="Show the runs and change points of a history store (--perf-history), compare two "
        "runs, write the dashboard or export the series.",
    )
    history.add_argument("store", metavar="STORE", help="a file (SQLite) or a postgresql:// URL")
    history.add_argument("--json", action="store_true", help="the listing as JSON")
    history.add_argument(
        "--compare", nargs=2, metavar=("RUN_A", "RUN_B"), help="two runs, point by point"
    )
    history.add_argument("--html", metavar="DIR", type=Path, help="write DIR/index.html")
    history.add_argument(
        "--export", nargs=2, metavar=("FORMAT", "FILE"), help=f"one of {', '.join(FORMATS)}"
    )
    history.add_argument(
        "--run", default="latest", help="the run --export bmf|github-action-benchmark writes"
    )
    history.add_argument("--load-spool", metavar="FILE", type=Path, help="load a run's spool")


def _date(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M")


def listing(store: Any) -> dict[str, Any]:
    from pytest_llmperf.history import series

    runs = store.runs()
    all_series = series.build(store.series_rows())
    return {
        "store": store.label,
        "runs": [
            {
                "run_id": r["run_id"],
                "started_at": _date(r["started_at"]),
                "ended_at": _date(r["ended_at"]),
                "complete": bool(r["complete"]),
                "mode": r["mode"],
                "host": r["host"],
                "commit": r["git_commit"],
                "ci_url": r["ci_url"],
                "points": r["points"],
                "profiles": {p["profile"]: p["engine_version"] for p in r["profiles"]},
            }
            for r in runs
        ],
        "open_change_points": series.open_change_points(all_series),
    }


def print_listing(data: dict[str, Any]) -> None:
    runs = data["runs"]
    print(f"{data['store']}: {len(runs)} runs")
    print(f"  {'run':24} {'started (UTC)':17} {'state':10} {'mode':7} {'commit':10} points")
    for r in runs:
        state = "complete" if r["complete"] else "incomplete" if r["ended_at"] == "-" else "stopped"
        print(
            f"  {r['run_id']:24} {r['started_at']:17} {state:10} {r['mode']:7} "
            f"{(r['commit'] or '-')[:10]:10} {r['points']}"
        )
    cps = data["open_change_points"]
    print(f"open change points: {len(cps)}" + (" (newest first)" if cps else ""))
    for c in cps:
        low, high = c["interval"]
        print(
            f"  {c['profile']} {c['point']}: {c['change'] * 100:+.1f} % "
            f"[{low * 100:+.1f}, {high * 100:+.1f}] {'worse' if c['worse'] else 'better'}, "
            f"first bad {c['first_bad_run']} ({c['first_bad_date']}), last good "
            f"{c['last_good_run']}"
            + (f"; changed: {'; '.join(c['what_changed'])}" if c["what_changed"] else "")
        )


def main(args: argparse.Namespace) -> int:
    try:
        return _main(args)
    except BrokenPipeError:  # `… | head`: the reader has what it wanted
        sys.stderr.close()
        return 0


def _main(args: argparse.Namespace) -> int:
    from pytest_llmperf.history.store import HistoryError, HistoryStore, read_spool

    if "://" not in args.store and not Path(args.store).exists() and not args.load_spool:
        # Reading a mistyped path would create an empty store and show nothing.
        print(
            f"error: no history store at {args.store}; runs write one with "
            f"pytest --perf-history {args.store}",
            file=sys.stderr,
        )
        return 2
    try:
        store = HistoryStore.open(args.store)
        if args.load_spool:
            n = store.apply_all(read_spool(args.load_spool))
            print(f"loaded {n} records from {args.load_spool} into {store.label}")
            return 0
        if args.compare:
            return _compare(store, *args.compare, as_json=args.json)
        if args.html:
            from pytest_llmperf.history.dashboard import write

            print(f"dashboard: {write(store, args.html)}")
            return 0
        if args.export:
            return _export(store, args.export[0], Path(args.export[1]), args.run)
        data = listing(store)
    except HistoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print_listing(data)
    return 0


def _compare(store: Any, given_a: str, given_b: str, *, as_json: bool) -> int:
    from pytest_llmperf.history import compare

    run_a, run_b = store.resolve_run(given_a), store.resolve_run(given_b)
    found = compare.rows(store.points_of(run_a), store.points_of(run_b))
    if as_json:
        print(json.dumps({"a": run_a, "b": run_b, "points": found}, indent=2))
    else:
        print("\n".join(compare.table(found, run_a, run_b)))
    return 0


def _export(store: Any, fmt: str, path: Path, run: str) -> int:
    from pytest_llmperf.files import write_atomic
    from pytest_llmperf.history import export, series

    if fmt not in FORMATS:
        print(f"error: --export {fmt}: choose one of {', '.join(FORMATS)}", file=sys.stderr)
        return 2
    run_id = store.resolve_run(run) if fmt != "otava" else ""
    text = export.export(fmt, series.build(store.series_rows()), store.runs(), run_id)
    write_atomic(path, text)
    print(f"{fmt}: {path}")
    return 0
