"""Node ids are parsed in one place; every name a report or golden uses comes from here."""

import pytest

from pytest_llmperf.core.nodeid import NodeId

NODE = "perf_suites/test_throughput.py::test_output_throughput[eagle3-C70]"


def test_point_key_drops_the_parameter_id():
    assert (
        NodeId(NODE).point_key(70) == "perf_suites/test_throughput.py::test_output_throughput[C=70]"
    )


@pytest.mark.parametrize(
    ("nodeid", "path", "function", "short", "bare"),
    [
        (
            NODE,
            "perf_suites/test_throughput.py",
            "test_output_throughput",
            "output_throughput",
            "perf_suites/test_throughput.py::test_output_throughput",
        ),
        ("t.py::test_x", "t.py", "test_x", "x", "t.py::test_x"),
        ("t.py::TestA::test_x[a[b]-C1]", "t.py", "test_x", "x", "t.py::TestA::test_x"),
        ("t.py::check_speed[p::q]", "t.py", "check_speed", "check_speed", "t.py::check_speed"),
    ],
)
def test_parts(nodeid, path, function, short, bare):
    node = NodeId(nodeid)
    assert (node.path, node.function, node.short_name, node.without_params) == (
        path,
        function,
        short,
        bare,
    )
