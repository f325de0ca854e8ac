#!/usr/bin/env bash
# Installs what is missing, then builds and runs every test: the Release build (with the Thrust
# tests on the CPP device system, and the CUDA variants compiled when nvcc exists), the
# ASan+UBSan build, the ThreadSanitizer build of the multi-threaded backward tests, and the
# Thrust tests on the OMP device system.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
. scripts/env.sh
for preset in default asan-ubsan tsan thrust-omp; do
  echo "=== metagrad: $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset"
  if [ "$preset" = default ]; then
    cmake --build --preset default --target metagrad_verify_interface_header_sets
  fi
  ctest --preset "$preset" -j "$(nproc)"
done
echo "=== metagrad: all test legs passed"
