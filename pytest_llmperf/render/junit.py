"""JUnit XML properties per point (pytest ``--junitxml``): measured, golden, ratio, verdict."""

from __future__ import annotations

from pytest_llmperf.core.points import Point


def properties(point: Point) -> list[tuple[str, object]]:
    measured = point.summary.mean if point.values else None
    golden = point.golden_mean
    props: list[tuple[str, object]] = [
        ("llmperf_point", point.label),
        ("llmperf_metric", point.metric),
        ("llmperf_measured", f"{measured:.6g}" if measured is not None else ""),
        ("llmperf_golden", f"{golden:.6g}" if golden is not None else ""),
        ("llmperf_ratio", f"{point.ratio:.6g}" if point.ratio is not None else ""),
        ("llmperf_verdict", point.verdict.value),
    ]
    if point.p_value is not None:
        props.append(("llmperf_p_value", f"{point.p_value:.3g}"))
    return props
