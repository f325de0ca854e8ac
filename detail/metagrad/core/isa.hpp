// The instruction set a program was compiled for, checked against the CPU it runs on.
//
// Note [Instruction set]: metagrad's fused loops are xsimd code instantiated in the user's
// translation units, so they use the instruction set those are compiled for: SSE2 only under
// the compilers' defaults, AVX2 and FMA with -march=x86-64-v3 (4.5x faster on the 1e6-element
// loss of benchmarks/fused_sum.cpp, docs/performance.md "Compiler flags"). The CMake target
// metagrad::metagrad therefore carries the instruction set (METAGRAD_ARCH, cmake/arch.cmake): by
// default x86-64-v3 when the building machine has it and the user's flags name no -march.
//
// Runtime dispatch between instruction sets is not possible from a header-only library built on
// xsimd: xsimd declares the batch types of an instruction set only in translation units compiled
// for it, so the AVX2 and the SSE2 version of a loop need two translation units, and the loops
// are templates instantiated on the user's functions, in the user's own files. What a binary
// built for one instruction set can do on a CPU without it is stop with a message instead of an
// illegal instruction: each program that includes metagrad checks, before main, the features
// its translation units were compiled to use (the checking function itself is compiled for
// baseline x86-64). Programs built for other CPUs (METAGRAD_ARCH=none, or a lower -march) run
// the same code with narrower packs.
#pragma once

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(__CUDACC__) && \
    !defined(MG_NO_ISA_CHECK)
#define MG_ISA_CHECK 1
// Compiled for baseline x86-64 whatever the flags, so that it runs on the CPU it rejects.
#define MG_BASELINE_ISA [[gnu::target("arch=x86-64")]]
#include <cstdio>
#include <cstdlib>
#else
#define MG_ISA_CHECK 0
#define MG_BASELINE_ISA
#endif

namespace mg::detail {

/// What the CPU has, of the features the compiler's flags can require (x86-64-v2 to v4). F16C,
/// also in x86-64-v3, is left out: clang 14's __builtin_cpu_supports does not know it, and every
/// CPU with AVX2 has it.
struct cpu_features {
  bool sse4_2, avx, avx2, fma, bmi2, avx512f;
};

/// The first feature this translation unit was compiled to use that `cpu` lacks, or nullptr.
MG_BASELINE_ISA constexpr const char* missing_feature(
    [[maybe_unused]] const cpu_features& cpu) noexcept {
#if defined(__SSE4_2__)
  if (!cpu.sse4_2) return "SSE4.2";
#endif
#if defined(__AVX__)
  if (!cpu.avx) return "AVX";
#endif
#if defined(__AVX2__)
  if (!cpu.avx2) return "AVX2";
#endif
#if defined(__FMA__)
  if (!cpu.fma) return "FMA";
#endif
#if defined(__BMI2__)
  if (!cpu.bmi2) return "BMI2";
#endif
#if defined(__AVX512F__)
  if (!cpu.avx512f) return "AVX-512F";
#endif
  return nullptr;
}

#if MG_ISA_CHECK
MG_BASELINE_ISA inline cpu_features this_cpu() noexcept {
  __builtin_cpu_init();  // before main, the CPU model may not be initialised yet
  return {.sse4_2 = __builtin_cpu_supports("sse4.2") != 0,
          .avx = __builtin_cpu_supports("avx") != 0,
          .avx2 = __builtin_cpu_supports("avx2") != 0,
          .fma = __builtin_cpu_supports("fma") != 0,
          .bmi2 = __builtin_cpu_supports("bmi2") != 0,
          .avx512f = __builtin_cpu_supports("avx512f") != 0};
}

/// Stops the program with a message if `cpu` lacks a feature this translation unit was compiled
/// to use; returns true otherwise.
MG_BASELINE_ISA inline bool check_instruction_set(const cpu_features& cpu) noexcept {
  if (const char* f = missing_feature(cpu)) {
    std::fprintf(stderr,
                 "metagrad: this program was compiled for CPUs with %s (a -march flag, or CMake's "
                 "METAGRAD_ARCH) and this CPU does not have it; rebuild it with "
                 "-DMETAGRAD_ARCH=none, or with a -march this CPU supports\n",
                 f);
    std::abort();
  }
  return true;
}

inline const bool instruction_set_checked = check_instruction_set(this_cpu());
#endif

}  // namespace mg::detail
