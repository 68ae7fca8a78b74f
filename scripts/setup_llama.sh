#!/usr/bin/env bash
# Installs llama-cpp-python (with its OpenAI-compatible server) and gguf into the venv: the LLM
# tests run trajforge's client against a real llama.cpp server on CPU, serving a tiny
# random-weight GGUF the tests write themselves. Idempotent; the wheel is built once (CPU-only,
# portable: no -march=native) and cached, so later setups only install it.
set -euo pipefail

VERSION=0.3.36
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
DIR=${TRAJFORGE_WHEEL_CACHE:-$HOME/.cache/trajforge/wheels}

if "$PY" -c "import llama_cpp, llama_cpp.server.app, gguf" >/dev/null 2>&1; then
  echo "llama: llama-cpp-python already installed"
  exit 0
fi

mkdir -p "$DIR"
shopt -s nullglob
wheels=("$DIR"/llama_cpp_python-"$VERSION"-*.whl)
shopt -u nullglob
if [ ${#wheels[@]} -eq 0 ]; then
  echo "building llama-cpp-python (about 5-10 minutes, once; cached in $DIR)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    "$VENV/bin/pip" wheel -q --no-deps "llama-cpp-python==$VERSION" -w "$DIR"
fi

echo "llama: installing llama-cpp-python $VERSION (server extras) and gguf from $DIR"
"$VENV/bin/pip" install -q --find-links "$DIR" "llama-cpp-python[server]==$VERSION" gguf
