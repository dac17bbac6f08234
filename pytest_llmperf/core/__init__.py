"""The pure core: what a measurement is and what it means.

Records of requests, per-run metrics, points and their outcomes, the statistical verdict and
the speculative analysis. Nothing here imports pytest, httpx, a subprocess or the file system,
and scipy/numpy are imported only inside the functions that compute with them, so every layer
above (load generation, engines, goldens, renderers, the plugin) may import from here and
nothing here imports from them.
"""
