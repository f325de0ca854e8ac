#!/usr/bin/env bash
# scripts/fuzz.sh [seconds] [folder]: installs what is missing, builds the fuzzer (the default
# preset's metagrad_fuzz: the runtime engine on the CPU and, through the Thrust backend, on
# device cuda) and runs random programs with fresh seeds for that long (default 300 s). It
# prints progress every 10 s (programs per second, ops reached, failures), writes each failure,
# shrunk, as a standalone reproduction (a GoogleTest case) into the folder (default
# fuzz-failures/), prints the coverage report, ends with `fuzz: N programs, M failures` and
# exits non-zero when M is not 0. FUZZ_SEED=<n> starts from a given seed instead of a fresh one.
# The OMP device system runs on one thread unless OMP_NUM_THREADS says otherwise (small programs
# run six times faster so on two cores).
# docs/testing.md ("The fuzzer") says how to read a reproduction and keep it as a regression.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-300}"
folder="${2:-fuzz-failures}"
scripts/install-deps.sh
. scripts/env.sh
cuda_check=OFF
if ! nvidia-smi -L >/dev/null 2>&1; then cuda_check=ON; fi
cmake --preset default -DMETAGRAD_CUDA_COMPILE_CHECK_ONLY=$cuda_check >/dev/null
cmake --build --preset default --target metagrad_fuzz
seed_args=()
if [ -n "${FUZZ_SEED:-}" ]; then seed_args=("$FUZZ_SEED"); fi
OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OMP_WAIT_POLICY=passive exec build/default/tests/fuzz/metagrad_fuzz "$seconds" "$folder" "${seed_args[@]}"
