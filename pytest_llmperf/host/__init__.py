"""The host's instruments: what this machine is and what its GPUs do, read for any engine.

- :mod:`.hardware`: the hardware key of a golden file (the GPUs through NVML, else the CPU);
- :mod:`.gpu`: NVML's view of the GPUs before a launch and after a stop (who holds memory);
- :mod:`.gpu_health`: the runner's GPUs checked once before any server starts;
- :mod:`.gpu_series`: the GPUs sampled through a point's runs (energy, power, held-back clocks);
- :mod:`.shm`: the /dev/shm files a server leaves behind, and their removal.

None of them knows an engine: an engine asks them (engines/), and so do the run's pre-flight
and its measurement. Each imports NVML (``nvidia-ml-py``, the ``gpu`` extra) lazily.
"""
