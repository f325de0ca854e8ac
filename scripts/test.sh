#!/usr/bin/env bash
# Installs what is missing, then builds and runs every test: the Release build (with the Thrust
# tests on the OMP device system, and the CUDA variants compiled when nvcc exists), the
# ASan+UBSan build, and the ThreadSanitizer build of the multi-threaded backward tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
. scripts/env.sh
# Without a GPU the CUDA test binary could not run: its device code is compiled to PTX only, and
# the prebuilt device backend is built for Thrust's CPP system. With one, both are CUDA.
cuda_check=OFF
device_system=CUDA
if ! nvidia-smi -L >/dev/null 2>&1; then cuda_check=ON; device_system=CPP; fi
for preset in default asan-ubsan tsan; do
  echo "=== metagrad: $preset"
  system_arg=()
  # The static engine's array tests build in the ASan+UBSan leg only (tests/CMakeLists.txt).
  if [ "$preset" = default ]; then
    system_arg=(-DMETAGRAD_DEVICE_SYSTEM=$device_system -DMETAGRAD_STATIC_ARRAY_TESTS=OFF)
  fi
  cmake --preset "$preset" -DMETAGRAD_CUDA_COMPILE_CHECK_ONLY=$cuda_check "${system_arg[@]}" >/dev/null
  cmake --build --preset "$preset"
  ctest --preset "$preset" -j "$(nproc)"
done
echo "=== metagrad: all test legs passed"
