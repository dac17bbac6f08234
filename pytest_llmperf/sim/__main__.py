"""``python -m pytest_llmperf.sim``: the simulated server (sim/server.py)."""

import sys

from pytest_llmperf.sim.server import main

sys.exit(main())
