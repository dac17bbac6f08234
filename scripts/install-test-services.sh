#!/usr/bin/env bash
# The real services the tests use, from Debian's packages: PostgreSQL (a server the tests start
# themselves with scripts/postgresql.sh, for the shared history store) and Chromium (headless,
# for the dashboard and the docs' pictures). Seconds when both are installed already.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -eq 0 ]; then
    echo "install-test-services: chromium and postgresql are installed"
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-test-services: installing ${need[*]} from Debian's packages"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
