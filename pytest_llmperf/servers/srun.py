"""One model over several nodes, launched through Slurm (a profile's ``launcher = "srun"``).

The launched process is one ``srun`` job step: ``nodes`` tasks, one per node, each running the
engine's own command (the same on every node, as SGLang's multi-node guide runs it) with
``--nnodes N --node-rank $SLURM_NODEID --dist-init-addr HEAD:PORT``, HEAD the allocation's first
node (its address from ``scontrol``). Inside an allocation (``salloc``, ``sbatch``: SLURM_JOB_ID
is set) the step runs in it; otherwise srun requests one. The ranks' output goes to the
profile's log, each line labelled with its rank (``0: …``, ``1: …``).

- Readiness and every request go to rank 0's HTTP port: the first node, whose address rank 0
  writes to ``<run dir>/<profile>.rank0`` (the run directory is on the cluster's shared file
  system, as Slurm jobs assume) when the profile's ``host`` listens on every interface.
- A rank that dies ends the step (``--kill-on-bad-exit``): srun exits, and the run fails at
  once with the log's tail, where the dead rank's lines say which node it was.
- Teardown cancels the step (``scancel JOB.STEP``: SIGTERM to every rank on every node, SIGKILL
  after the cluster's KillWait) and the job too when srun requested it, then waits until Slurm
  lists none of it: killing the local srun alone does not reach the other nodes' ranks.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from pytest_llmperf.profiles import Profile

#: What every rank runs: the engine's command with its rank's flags. Rank 0 says where it is.
RANK_SCRIPT = """\
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
addr=$(scontrol show node "$head" -o 2>/dev/null | tr ' ' '\\n' | sed -n 's/^NodeAddr=//p')
addr=${addr:-$head}
if [ "$SLURM_NODEID" = 0 ]; then echo "$addr $SLURM_JOB_ID.$SLURM_STEP_ID" > "$LLMPERF_RANK0"; fi
exec "$@" --nnodes "$SLURM_NNODES" --node-rank "$SLURM_NODEID" --dist-init-addr "$addr:$LLMPERF_DIST_PORT"
"""


def step_name(profile: Profile, launch_id: str) -> str:
    return f"llmperf-{profile.name}-{launch_id}"


def wrap(
    command: list[str], profile: Profile, run_dir: Path, name: str, launch_id: str, dist_port: int
) -> tuple[list[str], dict[str, str]]:
    """The srun command line that runs ``command`` once per node, and what its environment adds."""
    rank0 = run_dir / f"{name}.rank0"
    nodes = profile.nodes
    srun = [
        "srun",
        f"--nodes={nodes}",
        f"--ntasks={nodes}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--label",
        f"--job-name={step_name(profile, launch_id)}",
        *profile.srun_args,
        "bash",
        "-c",
        RANK_SCRIPT,
        "llmperf-rank",
        *command,
    ]
    env = {"LLMPERF_RANK0": str(rank0.resolve()), "LLMPERF_DIST_PORT": str(dist_port)}
    return srun, env


def rank0(run_dir: Path, name: str) -> tuple[str, str] | None:
    """(rank 0's address, its ``JOB.STEP``) once rank 0 started; None before."""
    try:
        text = (run_dir / f"{name}.rank0").read_text().split()
    except OSError:
        return None
    return (text[0], text[1]) if len(text) == 2 else None


def cancel(step: str | None, job_requested: bool, name: str, timeout_s: float) -> list[str]:
    """Cancel the job step (and the job srun requested); wait until Slurm lists none of it.
    ``step`` None (rank 0 never started): the step is found by its name. Notes on what is left."""
    job = step.split(".")[0] if step else _job_of(name)
    if job is None:
        return []
    targets = [job] if job_requested else [step or job]
    subprocess.run(["scancel", *targets], capture_output=True, timeout=30)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _listed(job, step if not job_requested else None):
            return []
        time.sleep(0.5)
    return [
        f"Slurm still lists {'job ' + job if job_requested else 'step ' + str(step)} "
        f"{timeout_s:g} s after scancel; check `squeue -s -j {job}` and cancel it by hand"
    ]


def _job_of(name: str) -> str | None:
    done = subprocess.run(
        ["squeue", "-h", "-s", "-o", "%i %j"], capture_output=True, text=True, timeout=30
    )
    for line in done.stdout.splitlines():
        step, _, step_job_name = line.partition(" ")
        if step_job_name.strip() == name:
            return step.split(".")[0]
    done = subprocess.run(
        ["squeue", "-h", "-n", name, "-o", "%i"], capture_output=True, text=True, timeout=30
    )
    return done.stdout.split()[0] if done.stdout.split() else None


def _listed(job: str, step: str | None) -> bool:
    """Whether Slurm still lists the job (or, with ``step``, that step of it)."""
    done = subprocess.run(
        ["squeue", "-h", "-s", "-j", job, "-o", "%i"], capture_output=True, text=True, timeout=30
    )
    steps = done.stdout.split()
    if step is not None:
        return step in steps
    jobs = subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%i"], capture_output=True, text=True, timeout=30
    )
    return bool(steps or jobs.stdout.split())


def in_allocation() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID"))
