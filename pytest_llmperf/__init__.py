"""pytest-llmperf: LLM-serving throughput as a regression-tested pytest gate.

Importing this package is cheap: the plugin, the load generator and the simulated engine
live in submodules and pull in httpx, aiohttp or scipy only when used.

The package is in :data:`LAYERS`, lowest first: a module imports from its own layer and the
layers below it, never above (``tests/unit/test_structure.py`` holds every module to it, and
``docs/explanation/code-layout.md`` is generated from it and from each module's docstring).
"""

__version__ = "0.1.0"
__all__ = ["LAYERS", "__version__"]

#: The package's parts by layer, lowest first, each layer with what it is for.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the pure core: records, metrics, points, verdicts", ("core",)),
    (
        "shared plumbing, the host's instruments, and the simulated server (a program of its own)",
        ("errors", "files", "host", "sim"),
    ),
    ("configuration as data", ("profiles", "profile_fields", "topology", "secrets", "settings")),
    ("what is specific to each kind of server", ("engines",)),
    (
        "what every engine shares: reading a profiles file, servers, load, goldens, reports, history",
        ("profiles_file", "load", "servers", "golden", "render", "history"),
    ),
    (
        "the run's state and what happens before it",
        ("selection", "preflight", "plan", "progress", "session"),
    ),
    ("the fixtures' objects", ("fixtures",)),
    ("the pytest face and the command line", ("plugin", "__main__", "scaffold", "merge", "bisect")),
)
