"""Renderers: pure functions of :class:`~pytest_llmperf.core.results.Results` (terminal summary,
Markdown, plots, results JSON, pytest-benchmark JSON, JUnit properties), and one writer
(:mod:`pytest_llmperf.render.write`) that puts the files on disk at the end of the run."""
