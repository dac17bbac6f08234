#!/usr/bin/env bash
# The real services the tests use, from Debian's packages: PostgreSQL (a server the tests start
# themselves with scripts/postgresql.sh, for the shared history store) and Chromium (headless,
# for the dashboard and the docs' pictures), and Slurm with munge (slurm-wlm: a local cluster,
# scripts/start-slurm-local.sh, for the multi-node launches), which it then starts. Seconds when
# all are installed already.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need+=(munge)
here=$(cd "$(dirname "$0")" && pwd)
if [ ${#need[@]} -eq 0 ]; then
    echo "install-test-services: chromium, postgresql and slurm-wlm are installed"
    exec bash "$here/start-slurm-local.sh"
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-test-services: installing ${need[*]} from Debian's packages"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
bash "$here/start-slurm-local.sh"
