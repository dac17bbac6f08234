"""Make the pictures the docs and the README show, from real runs: the terminal summary of
``pytest perf_suites`` (its colours as the terminal draws them, screenshotted in headless
Chromium), the throughput plot of ``--perf-report``, and the history dashboard of twelve
nights of the simulated engine (8 % slower from night 7 on), screenshotted in Chromium.

    python scripts/docs_images.py              # writes docs/images/*.png (about three minutes)
    python scripts/docs_images.py dashboard    # only the dashboard

Needs Debian's chromium (/usr/bin/chromium) and the report extra (matplotlib).
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGES = REPO / "docs" / "images"
COLORS = {"31": "#e06c75", "32": "#98c379", "33": "#e5c07b", "1": None}
ANSI = re.compile(r"\x1b\[([0-9;]*)m")
CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--hide-scrollbars"]  # fmt: skip


def to_html(text: str) -> str:
    """Terminal output with SGR colours as an HTML page (dark, monospace)."""
    out, open_spans = [], 0
    for piece in ANSI.split(text):
        if ANSI.fullmatch(f"\x1b[{piece}m") and (piece == "" or piece[0].isdigit()):
            codes = piece.split(";") if piece else ["0"]
            if "0" in codes or not piece:
                out.append("</span>" * open_spans)
                open_spans = 0
            style = ";".join(
                f"color:{COLORS[c]}" if COLORS.get(c) else "font-weight:bold"
                for c in codes
                if c in COLORS
            )
            if style:
                out.append(f'<span style="{style}">')
                open_spans += 1
            continue
        out.append(html.escape(piece))
    body = "".join(out) + "</span>" * open_spans
    return (
        "<!doctype html><meta charset=utf-8><body style='margin:0;background:#1e1e1e'>"
        "<pre style='margin:0;padding:16px;color:#d4d4d4;font:13px/1.35 DejaVu Sans Mono,"
        f"monospace;display:inline-block'>{body}</pre>"
    )


def screenshot(page: Path, png: Path, width: int, height: int) -> None:
    subprocess.run(
        [*CHROMIUM, f"--user-data-dir={page.parent / 'profile'}", f"--screenshot={png}",
         f"--window-size={width},{height}", page.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


DASHBOARD_PROFILES = """
default = ["sim-baseline"]

[profiles.sim-baseline]
engine = "sim"
model = "sim-docs"
args = ["--sim-load-time", "0.2", "--enable-metrics", "--sim-throughput-multiplier", "{speed}"]
concurrency = [1, 10, 30]
runs = 3
output_len = 128
min_requests = 8
"""
DASHBOARD_SUITE = """
def test_output_throughput(llmperf, llm_concurrency):
    llmperf.check(llmperf.measure(concurrency=llm_concurrency))
"""


def dashboard() -> None:
    """Twelve nights of a small suite, the engine 8 % slower from night 7: the dashboard."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "test_perf.py").write_text(DASHBOARD_SUITE)
        (work / "pytest.ini").write_text("[pytest]\nllmperf_profiles_file = profiles.toml\n")

        def night(speed: str, *args: str) -> None:
            (work / "profiles.toml").write_text(DASHBOARD_PROFILES.replace("{speed}", speed))
            subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                cwd=work, capture_output=True, timeout=600,
            )  # fmt: skip

        night("1.0", "--perf-update", "--perf-history", "history.db")
        for n in range(1, 13):
            night("1.0" if n < 7 else "0.92", "--perf-history", "history.db")
        subprocess.run(
            [sys.executable, "-m", "pytest_llmperf", "history", "history.db", "--html", "site"],
            cwd=work, check=True, capture_output=True,
        )  # fmt: skip
        screenshot(work / "site" / "index.html", IMAGES / "dashboard.png", 1400, 1000)


def main() -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    if sys.argv[1:] == ["dashboard"]:
        dashboard()
        print(f"wrote dashboard.png in {IMAGES}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "perf_suites", "--llm-concurrency", "1,10,70",
             "--color=yes", "-p", "no:cacheprovider", "--perf-report", str(work / "report")],
            cwd=REPO, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        out = run.stdout
        start = out.index("llmperf: output throughput per concurrency")
        summary = out[out.rindex("\n", 0, start) + 1 :].rstrip()
        summary = "\n".join(
            line
            for line in summary.splitlines()
            if not ANSI.sub("", line).startswith(("server logs", "report:"))
        )
        lines = ANSI.sub("", summary).splitlines()
        page = work / "summary.html"
        page.write_text(to_html(summary), encoding="utf-8")
        width = 8 * max(len(line) for line in lines) + 60
        screenshot(page, IMAGES / "terminal-summary.png", width, 19 * len(lines) + 40)
        shutil.copy(work / "report" / "throughput-output_throughput.png", IMAGES / "throughput.png")
        shutil.copy(work / "report" / "latency-output_throughput.png", IMAGES / "latency.png")
    dashboard()
    print(f"wrote terminal-summary.png, throughput.png, latency.png and dashboard.png in {IMAGES}")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
