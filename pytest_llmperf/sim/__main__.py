import sys

from pytest_llmperf.sim.server import main

sys.exit(main())
