"""A simulated SGLang-compatible engine: ``python -m pytest_llmperf.sim --model-path M --port P``.

See :mod:`pytest_llmperf.sim.model` for the documented time model and
:mod:`pytest_llmperf.sim.server` for the endpoints and the fault knobs.
"""
