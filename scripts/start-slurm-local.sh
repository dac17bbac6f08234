#!/usr/bin/env bash
# A real Slurm cluster on this machine, for the tests of multi-node launches (launcher = "srun"):
# munge, slurmctld and two slurmd daemons (nodes llmperf1 and llmperf2, both this host, each
# with all its CPUs) from Debian's slurm-wlm and munge packages (scripts/install-test-services.sh
# installs them). Idempotent: seconds when the cluster already answers.
#   bash scripts/start-slurm-local.sh          # start (or check) it
#   bash scripts/start-slurm-local.sh stop     # stop the daemons
# It writes /etc/slurm/slurm.conf only when none is there or the one there is its own (the
# marker line below): it never replaces a real cluster's configuration.
set -euo pipefail
say() { echo "start-slurm-local: $*" >&2; }
CONF=/etc/slurm/slurm.conf
MARKER="# written by pytest-llmperf scripts/start-slurm-local.sh"
STATE=/var/lib/llmperf-slurm
NODES="llmperf1 llmperf2"

if [ "${1:-}" = stop ]; then
  pkill -x slurmd || true; pkill -x slurmctld || true
  exit 0
fi
for tool in slurmctld slurmd munged srun scontrol; do
  command -v "$tool" >/dev/null || { say "$tool is missing: run bash scripts/install-test-services.sh"; exit 1; }
done
if [ -f "$CONF" ] && ! grep -qF "$MARKER" "$CONF"; then
  say "$CONF is another cluster's configuration; not touching it"; exit 1
fi

ready() {
  [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -cE ' (idle|mix|alloc)')" = 2 ]
}
if pgrep -x slurmctld >/dev/null && ready; then
  echo "slurm: running (nodes $NODES)"; exit 0
fi

# munge: the key the package made, its run directory, the daemon as its own user.
mkdir -p /run/munge /var/log/munge && chown munge:munge /run/munge /var/log/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
fi
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged

CPUS=$(nproc)
MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
HOST=$(hostname -s)
mkdir -p "$STATE" /var/log/slurm /etc/slurm
cat > "$CONF.tmp" <<CONFIG
$MARKER
ClusterName=llmperf
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d-%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/linear
ReturnToService=2
KillWait=5
InactiveLimit=0
SlurmdTimeout=30
NodeName=llmperf1 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17001 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
NodeName=llmperf2 NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17002 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=local Nodes=llmperf1,llmperf2 Default=YES MaxTime=INFINITE State=UP
CONFIG
mv "$CONF.tmp" "$CONF"
mkdir -p "$STATE/ctld" "$STATE/d-llmperf1" "$STATE/d-llmperf2"

pgrep -x slurmctld >/dev/null || slurmctld
for node in $NODES; do
  pgrep -f "slurmd -N $node" >/dev/null || slurmd -N "$node"
done
for _ in $(seq 1 60); do
  if ready; then
    scontrol update nodename=llmperf1,llmperf2 state=resume >/dev/null 2>&1 || true
    echo "slurm: running (nodes $NODES)"; exit 0
  fi
  sleep 0.5
done
say "the cluster did not come up in 30 s:"; sinfo -N >&2 || true
tail -n 20 /var/log/slurm/slurmctld.log >&2 || true
exit 1
