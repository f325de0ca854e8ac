#!/usr/bin/env bash
# Installs what is missing, builds the demo and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
. scripts/env.sh
cmake -S . -B build/demo -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETAGRAD_BUILD_TESTS=OFF \
  -DMETAGRAD_THRUST_TESTS=OFF -DMETAGRAD_CUDA_TESTS=OFF >/dev/null
cmake --build build/demo --target demo
./build/demo/examples/demo
