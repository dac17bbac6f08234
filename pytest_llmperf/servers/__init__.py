"""What every engine's server shares: its process from launch to the last child stopped, and
what is read from it while it runs.

- :mod:`.lifecycle`: launch a profile's server (its own process group, its log, its masked
  command line), wait until it is ready, attach to one someone else runs, stop it for good;
- :mod:`.readiness`: the one poller every wait uses;
- :mod:`.logs`: the server's output copied to its log with the launch's secrets masked;
- :mod:`.watchdog`: stops a launched server when pytest dies, however it dies;
- :mod:`.leftovers`: servers a killed run left behind, named at the next start;
- :mod:`.metrics`: the server's own ``/metrics`` counters around a point;
- :mod:`.router`: SGLang's router in front of its workers, as one server;
- :mod:`.srun`: one rank per node through Slurm, cancelled at teardown.

What differs between engines is theirs (pytest_llmperf/engines/); nothing here measures.
"""
