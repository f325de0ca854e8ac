#!/usr/bin/env bash
# Compiles each stress translation unit of benchmarks/compile_time/ as a user's Release build would
# (g++ -std=c++20 -O2, the flags of the metagrad CMake target), reports the compiler's CPU time
# (user + system) and peak memory, and runs the programs that check a gradient.
#   benchmarks/compile_time/run.sh            # every unit, the recurrence at 8 and 16 steps
#   CXX=clang++ benchmarks/compile_time/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
cxx="${CXX:-g++}"
flags=(-std=c++20 -O2 -DXTENSOR_USE_XSIMD -I"$root/include" -I"$root/detail")
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
printf '%-28s %10s %10s  %s\n' unit "cpu s" "peak MB" check
measure() {  # name source run(0|1) extra-flags...
  local name="$1" src="$2" run="$3"
  shift 3
  local t="$out/$name.time"
  /usr/bin/time -f '%U %S %M' -o "$t" "$cxx" "${flags[@]}" "$@" "$here/$src" -o "$out/$name" \
    -lopenblas
  local check=""
  if [ "$run" = 1 ]; then check="$("$out/$name" | tail -1)"; fi
  awk -v n="$name" -v c="$check" '{ printf "%-28s %10.2f %10.0f  %s\n", n, $1 + $2, $3 / 1024, c }' "$t"
}
measure xtensor_only xtensor_only.cpp 0
measure umbrella umbrella.cpp 0
measure scalar_header scalar_header.cpp 0
measure recurrence_8 recurrence.cpp 1 -DMG_STEPS=8
measure recurrence_16 recurrence.cpp 1 -DMG_STEPS=16
measure recurrence_literal_16 recurrence.cpp 1 -DMG_STEPS=16 -DMG_LITERAL
measure recurrence_literal_1000 recurrence.cpp 1 -DMG_STEPS=1000 -DMG_LITERAL
measure hessian_8 recurrence.cpp 1 -DMG_STEPS=8 -DMG_SECOND_ORDER
measure hessian_node_16 recurrence.cpp 1 -DMG_STEPS=16 -DMG_LOOP_NODE -DMG_SECOND_ORDER
measure hessian_literal_16 recurrence.cpp 1 -DMG_STEPS=16 -DMG_LITERAL -DMG_SECOND_ORDER
measure wide_100_nodes wide.cpp 1
