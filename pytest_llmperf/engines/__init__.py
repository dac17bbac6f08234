"""Servers under test: launching, readiness, teardown and attaching (``lifecycle``), and what is
specific to an engine: SGLang's flags by version and its loading log (``sglang``, ``loading``),
llama.cpp's ``llama-server`` (``llamacpp``) and the GPUs they run on (``gpu``)."""
