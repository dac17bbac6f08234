"""The history dashboard in a real headless Chromium (Debian's package): a year of nights of a
hundred points loads with no console error and draws every chart; a small one from real runs
shows its change point, its version marker and its golden recording."""

from __future__ import annotations

import re
import subprocess
import sys

from tests import chromium
from tests.history_data import Nights, bulk_store, run_id


def body_data(dom: str) -> dict[str, str]:
    body = re.search(r"<body([^>]*)>", dom)
    assert body is not None, dom[:500]
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1)))


def tip_of(dom: str) -> str:
    """The tooltip's element as the page left it (its text, its sparkline)."""
    start = dom.index('<div id="tip"')
    return dom[start : dom.index("<script", start)]


def dashboard_of(tmp_path, spec: Nights):
    """The store of ``spec``, its dashboard written by the CLI as a user would, and the page."""
    chromium.binary()
    bulk_store(str(tmp_path / "h.db"), spec)
    return html_of(tmp_path / "h.db", tmp_path / "site")


def html_of(store, site):
    """``python -m pytest_llmperf history STORE --html SITE``, as a user runs it: the page."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest_llmperf", "history", str(store), "--html", str(site)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return site / "index.html"


def test_a_year_of_a_hundred_points_loads_without_errors_and_draws_every_chart(tmp_path):
    spec = Nights(nights=365, points=100, step_at=300, step=-0.08, version_change_at=300, seed=1)
    page = dashboard_of(tmp_path, spec)
    html = page.read_text()
    assert "http://" not in html and "https://" not in html  # opens with no network
    loaded = chromium.load(page)
    data = body_data(loaded.dom)
    assert "errors" not in data, data
    assert loaded.console_errors() == []
    assert data["charts"] == "100"
    assert int(data["render-ms"]) > 0  # benchmarks/dashboard_render.py reports the time
    rows = re.findall(r"<tr><td[^>]*>2027-03-24", loaded.dom)
    assert len(rows) == 100  # one open change point per point, at night 301, newest first


def test_a_small_history_shows_its_change_point_version_marker_and_recording(tmp_path):
    spec = Nights(nights=12, points=2, step_at=6, step=-0.10, version_change_at=6, seed=3)
    page = dashboard_of(tmp_path, spec)
    loaded = chromium.load(page, width=1200, height=900)
    assert body_data(loaded.dom)["charts"] == "2" and loaded.console_errors() == []
    assert "engine version 0.5.6 → 0.5.9" in loaded.dom
    assert re.search(r"−(9|10)\.\d %", loaded.dom)
    # Each open change point offers the bisect command for its commit range.
    assert loaded.dom.count("find the commit: <code>python -m pytest_llmperf bisect --good ") == 2
    png = chromium.screenshot(page, tmp_path / "dashboard.png", width=1200, height=900)
    assert png.stat().st_size > 20_000  # drawn, not a blank page


def test_the_tooltip_names_the_run_its_date_commit_version_and_the_change(tmp_path):
    spec = Nights(nights=12, points=1, step_at=6, step=-0.10, version_change_at=6, seed=3)
    page = dashboard_of(tmp_path, spec)
    link = page.with_name("index.html")
    loaded = chromium.load_url(link.resolve().as_uri() + "#tip=0,6")
    tip = re.search(r'<div id="tip"[^>]*>(.*?)</div>', loaded.dom, re.S)
    assert tip is not None and "display: block" in tip.group(0)
    text = tip.group(1)
    assert run_id(6) in text and "commit " in text and "sim-baseline 0.5.9" in text
    assert "changed: engine version 0.5.6 → 0.5.9" in text
    assert "change point: −" in text


def test_a_failing_night_s_detail_shows_its_server_gpus_energy_and_profile(tmp_path):
    from tests.history_data import build_store, records

    spec = Nights(nights=8, points=1, step_at=7, step=-0.30, seed=5)
    n = 20
    diagnosed = {
        "verdict": "FAIL",
        "server_series": {
            "interval_s": 0.5,
            "t": [0.5 * i for i in range(n)],
            "running_requests": [2.0] * n,
            "queued_requests": [0.0, 6.0] + [14.0] * (n - 2),
            "kv_cache_usage": [0.4] + [1.0] * (n - 1),
        },
        "gpu_series": {
            "0": {"t": [0.0, 1.0, 2.0, 3.0], "power_w": [600.0, 610.0, 620.0, 630.0],
                  "sm_clock_mhz": [1980.0, 1410.0, 1410.0, 1980.0],
                  "temperature_c": [60.0, 71.0, 70.0, 66.0], "reasons": [0, 4, 4, 0]},
        },
        "server_profile": {
            "trace": "/runs/7/profiles/sim-output_throughput-C_1/1-TP-0.trace.json.gz",
            "steps": 32,
            "summary": {"source": "GPU kernels", "total_us": 1000.0,
                        "ops": [{"name": "attn", "us": 550.0}, {"name": "gemm", "us": 450.0}]},
            "golden_summary": {"source": "GPU kernels", "total_us": 1000.0,
                               "ops": [{"name": "attn", "us": 300.0}, {"name": "gemm", "us": 700.0}]},
            "problem": None,
        },
    }  # fmt: skip
    stored = []
    for record in records(spec):
        if record["kind"] == "point" and record["run_id"] == run_id(7):
            record = {**record, **diagnosed}
            record["samples"] = [
                {**s, "energy_j_per_token": 0.52, "tok_s_per_watt": 1.9} for s in record["samples"]
            ]
        stored.append(record)
    build_store(str(tmp_path / "h.db"), Nights(nights=0)).apply_all(stored)
    page = html_of(tmp_path / "h.db", tmp_path / "site")
    loaded = chromium.load_url(page.resolve().as_uri() + "#tip=0,7", width=1200, height=900)
    assert loaded.console_errors() == []
    text = tip_of(loaded.dom)
    assert "display: block" in text, text
    assert (
        "server: KV cache at 100% with 14 requests queued, 2 running for 95% of the window: the "
        "server was memory-bound" in text
    )
    assert (
        "GPU 0: 615 W mean, SM 1,410-1,980 MHz, 71 °C at most; held back: power cap (software) 50%"
        in text
    )
    assert "energy: J/token 0.520, tok/s per W 1.90" in text
    assert (
        "profiled: /runs/7/profiles/sim-output_throughput-C_1/1-TP-0.trace.json.gz; moved most: "
        "attn 55.0% (golden 30.0%), gemm 45.0% (golden 70.0%)" in text
    )
    assert '<div class="spark">' in text and "<canvas" in text
    # A passing night without any of it has none: its tooltip is as before.
    quiet = chromium.load_url(page.resolve().as_uri() + "#tip=0,3", width=1200, height=900)
    assert "display: block" in tip_of(quiet.dom) and "spark" not in tip_of(quiet.dom)
    shot = chromium.screenshot_url(
        page.resolve().as_uri() + "#tip=0,7", tmp_path / "detail.png", width=1200, height=900
    )
    assert shot.stat().st_size > 20_000
