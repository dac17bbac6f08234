"""pytest-llmperf: LLM-serving throughput as a regression-tested pytest gate.

Importing this package is cheap: the plugin, the load generator and the simulated engine
live in submodules and pull in httpx, aiohttp or scipy only when used.

Layers, each importing only from those below it::

    plugin, session, fixtures, selection, settings, progress      the face: pytest wiring and run state
    render/                                                       terminal, Markdown, plots, JSON, JUnit
    golden/        engines/        load/                          goldens; servers; load generation
    profiles, errors, files                                       configuration and shared plumbing
    core/                                                         records, metrics, points, verdict
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
