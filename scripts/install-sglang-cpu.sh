#!/usr/bin/env bash
# Install the real SGLang, unmodified from PyPI, so that it serves on this machine's CPU:
#   .sglang/venv/           sglang==$SGLANG and its dependencies (torch's CUDA build, which runs on
#                           a CPU): about 11 GB, 3 min the first time (pip's cache makes it faster)
#                           and sglang-router==$SGLANG_ROUTER (SGLang's router, 30 MB)
#   .sglang/lib/libcuda.so.1  a stub built from scripts/libcuda-stub.c: PyPI's sglang-kernel needs
#                           libcuda.so.1 to load, even on the CPU path that never calls it
#   .sglang/models/tiny-llama a 5 M-parameter random-weight Llama with a locally trained tokenizer
#                           (scripts/sglang_tiny_model.py): nothing comes from a model hub
#   .sglang/bin/python      the venv's Python with the stub on LD_LIBRARY_PATH; the sglang-cpu
#                           profile's `python`
#   .sglang/releases/<v>/   the `sglang` package of each release in tests/data/sglang-releases.txt,
#                           from sha256-pinned wheels: the tests import each release's own argument
#                           parser from there (scripts/sglang_releases.py)
# Idempotent: each part is skipped when present, so a second run takes seconds.
#   bash scripts/install-sglang-cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD/.sglang"
SGLANG=0.5.23
SGLANG_ROUTER=0.3.2
NEEDED_GB=14

say() { echo "install-sglang-cpu: $*" >&2; }
command -v cc >/dev/null || { say "a C compiler (cc) is required for the libcuda stub (apt-get install gcc)"; exit 1; }
mkdir -p "$ROOT"

have_sglang() {
  "$ROOT/venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('sglang') != '$SGLANG')" 2>/dev/null
}
if ! have_sglang; then
  FREE_GB=$(( $(df -Pk "$ROOT" | awk 'NR==2 {print $4}') / 1024 / 1024 ))
  if [ "$FREE_GB" -lt "$NEEDED_GB" ]; then
    say "SGLang's venv needs about $NEEDED_GB GB of disk; $ROOT has $FREE_GB GB free"; exit 1
  fi
  rm -rf "$ROOT/venv"
  say "installing sglang==$SGLANG into $ROOT/venv (about 11 GB, 3 min)"
  START=$SECONDS
  python3 -m venv "$ROOT/venv"
  "$ROOT/venv/bin/python" -m pip install -q --disable-pip-version-check "sglang==$SGLANG" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
  have_sglang || { say "pip did not install sglang==$SGLANG (see above)"; exit 1; }
  say "installed in $((SECONDS - START)) s"
fi

# SGLang's router (the sglang-router wheel: a Rust binary for manylinux, 30 MB, no dependencies
# beyond the venv's), for the router profile sglang-cpu-dp2 (pytest_llmperf/servers/router.py).
have_router() {
  "$ROOT/venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('sglang-router') != '$SGLANG_ROUTER')" 2>/dev/null
}
if ! have_router; then
  START=$SECONDS
  "$ROOT/venv/bin/python" -m pip install -q --disable-pip-version-check "sglang-router==$SGLANG_ROUTER" >&2
  have_router || { say "pip did not install sglang-router==$SGLANG_ROUTER (see above)"; exit 1; }
  say "sglang-router $SGLANG_ROUTER installed in $((SECONDS - START)) s"
fi

STUB="$ROOT/lib/libcuda.so.1"
if [ ! -f "$STUB" ] || [ scripts/libcuda-stub.c -nt "$STUB" ]; then
  mkdir -p "$ROOT/lib"
  cc -shared -fPIC -O2 -o "$STUB.tmp" scripts/libcuda-stub.c && mv "$STUB.tmp" "$STUB"
fi

cat > "$ROOT/bin-python.tmp" <<'WRAPPER'
#!/bin/sh
# Written by scripts/install-sglang-cpu.sh: SGLang's venv Python, with the libcuda stub that lets
# PyPI's CUDA-only sglang-kernel load on a machine without an NVIDIA driver.
root=$(cd "$(dirname "$0")/.." && pwd)
export LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$root/venv/bin/python" "$@"
WRAPPER
mkdir -p "$ROOT/bin" && chmod +x "$ROOT/bin-python.tmp" && mv "$ROOT/bin-python.tmp" "$ROOT/bin/python"

MODEL="$ROOT/models/tiny-llama"
if [ ! -f "$MODEL/model.safetensors" ] || [ scripts/sglang_tiny_model.py -nt "$MODEL/model.safetensors" ]; then
  rm -rf "$MODEL.tmp"
  HF_HUB_OFFLINE=1 "$ROOT/venv/bin/python" scripts/sglang_tiny_model.py "$MODEL.tmp" >/dev/null 2>&1 \
    || { HF_HUB_OFFLINE=1 "$ROOT/venv/bin/python" scripts/sglang_tiny_model.py "$MODEL.tmp"; exit 1; }
  rm -rf "$MODEL" && mv "$MODEL.tmp" "$MODEL"
fi

python3 scripts/sglang_releases.py fetch "$ROOT/releases"

echo "sglang:  $("$ROOT/bin/python" -c 'import importlib.metadata as m; print(m.version("sglang"))') in $ROOT/venv ($(du -sh "$ROOT/venv" | cut -f1))"
echo "router:  sglang-router $SGLANG_ROUTER"
echo "python:  $ROOT/bin/python"
echo "model:   $MODEL"
echo "releases: $(ls "$ROOT/releases" | sort -V | tr '\n' ' ')"
