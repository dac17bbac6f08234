"""How long the history dashboard takes to show a year of nights of a hundred points, in a real
headless Chromium (Debian's package).

Builds a synthetic store (365 nights × 100 points × 3 runs, an 8 % step at night 301 with an
engine version change), writes the page with ``python -m pytest_llmperf history --html``, then
loads it ``--loads`` times, each in a fresh Chromium profile, and reads what the page itself
measured: ``data-render-ms`` (navigation start to every chart drawn: the HTML and its data
parsed, the script run) and ``data-script-ms`` (the script alone). Also the page's size and the
time to write it.

    python benchmarks/dashboard_render.py --loads 5
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import chromium  # noqa: E402
from tests.history_data import Nights, bulk_store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--points", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmperf-dash-") as tmp:
        store = Path(tmp) / "h.db"
        spec = Nights(
            nights=args.nights, points=args.points, step_at=int(args.nights * 0.82),
            step=-0.08, version_change_at=int(args.nights * 0.82), seed=1,
        )  # fmt: skip
        bulk_store(str(store), spec)
        started = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "pytest_llmperf", "history", str(store), "--html", f"{tmp}/site"],
            check=True, capture_output=True,
        )  # fmt: skip
        written = time.monotonic() - started
        page = Path(tmp) / "site" / "index.html"
        render, script = [], []
        for _ in range(args.loads):
            loaded = chromium.load(page)
            body = re.search(r"<body([^>]*)>", loaded.dom)
            found = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1))) if body else {}
            assert found.get("charts") == str(args.points) and "errors" not in found, found
            render.append(int(found["render-ms"]))
            script.append(int(found["script-ms"]))
        print(
            f"{args.nights} nights × {args.points} points: page {page.stat().st_size / 1e6:.1f} MB, "
            f"written in {written:.1f} s (python -m pytest_llmperf history --html)"
        )
        print(
            f"Chromium, {args.loads} loads: navigation to every chart drawn median "
            f"{statistics.median(render)} ms (min {min(render)}, max {max(render)}); the script "
            f"alone median {statistics.median(script)} ms"
        )


if __name__ == "__main__":
    main()
