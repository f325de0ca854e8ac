#!/usr/bin/env bash
# Compiles each stress translation unit of benchmarks/compile_time/ as a user's Release build would
# (g++ -std=c++20 -O2, the flags of the metagrad CMake target), reports the compiler's CPU time
# (user + system) and peak memory, and runs the programs that check a gradient.
# The compiled library (libmetagrad) comes from a build folder, build/default unless METAGRAD_BUILD
# names another (cmake --build build/default --target metagrad); a unit marked `ho` compiles in
# header-only mode (-DMETAGRAD_HEADER_ONLY) instead. The time is the compile alone (-c); the link
# is not counted.
#   benchmarks/compile_time/run.sh            # every unit, the recurrence at 8 and 16 steps
#   CXX=clang++ benchmarks/compile_time/run.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
cxx="${CXX:-g++}"
flags=(-std=c++20 -O2 -DXTENSOR_USE_XSIMD -I"$root/include" -I"$root/detail")
lib="${METAGRAD_BUILD:-$root/build/default}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
printf '%-28s %10s %10s  %s\n' unit "cpu s" "peak MB" check
measure() {  # name source run(0|1) extra-flags...
  local name="$1" src="$2" run="$3"
  shift 3
  local t="$out/$name.time"
  /usr/bin/time -f '%U %S %M' -o "$t" "$cxx" "${flags[@]}" "$@" -c "$src" -o "$out/$name.o"
  local check=""
  if [ "$run" = 1 ]; then
    local link=(-L"$lib" -Wl,-rpath,"$lib" -lmetagrad)
    case " $* " in *" -DMETAGRAD_HEADER_ONLY "*) link=() ;; esac
    "$cxx" "$out/$name.o" -o "$out/$name" "${link[@]}" -lopenblas
    check="$("$out/$name" | tail -1)"
  fi
  awk -v n="$name" -v c="$check" '{ printf "%-28s %10.2f %10.0f  %s\n", n, $1 + $2, $3 / 1024, c }' "$t"
}
ho=-DMETAGRAD_HEADER_ONLY
measure xtensor_only "$here/xtensor_only.cpp" 0
measure umbrella "$here/umbrella.cpp" 0
measure umbrella_ho "$here/umbrella.cpp" 0 "$ho"
measure scalar_header "$here/scalar_header.cpp" 0
measure one_op "$here/one_op.cpp" 1
measure one_op_ho "$here/one_op.cpp" 1 "$ho"
measure readme "$root/examples/readme.cpp" 1
measure readme_ho "$root/examples/readme.cpp" 1 "$ho"
measure mlp_runtime "$here/mlp_runtime.cpp" 1
measure mlp_runtime_ho "$here/mlp_runtime.cpp" 1 "$ho"
measure mlp_static "$root/examples/mlp_step.cpp" 1
measure recurrence_8 "$here/recurrence.cpp" 1 -DMG_STEPS=8
measure recurrence_16 "$here/recurrence.cpp" 1 -DMG_STEPS=16
measure recurrence_literal_16 "$here/recurrence.cpp" 1 -DMG_STEPS=16 -DMG_LITERAL
measure recurrence_literal_1000 "$here/recurrence.cpp" 1 -DMG_STEPS=1000 -DMG_LITERAL
measure hessian_8 "$here/recurrence.cpp" 1 -DMG_STEPS=8 -DMG_SECOND_ORDER
measure hessian_node_16 "$here/recurrence.cpp" 1 -DMG_STEPS=16 -DMG_LOOP_NODE -DMG_SECOND_ORDER
measure hessian_literal_16 "$here/recurrence.cpp" 1 -DMG_STEPS=16 -DMG_LITERAL -DMG_SECOND_ORDER
measure wide_100_nodes "$here/wide.cpp" 1
measure lstm_step_2 "$here/lstm_step.cpp" 1 -DMG_LSTM_LAYERS=2
measure lstm_step_4 "$here/lstm_step.cpp" 1 -DMG_LSTM_LAYERS=4
measure lstm_step_4_O0 "$here/lstm_step.cpp" 1 -DMG_LSTM_LAYERS=4 -O0
