#!/usr/bin/env bash
# Installs what is missing, builds the demo and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
. scripts/env.sh
cmake --preset default -DMETAGRAD_BUILD_TESTS=OFF >/dev/null
cmake --build --preset default --target demo
./build/default/examples/demo
