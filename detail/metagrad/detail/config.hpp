// Execution-space and inlining macros, and every compiler workaround, in one place.
#pragma once

// MG_HD marks functions that run on the host and, under nvcc, on the device. CCCL 3 no longer
// defines __host__/__device__ for plain host compilers, so we never spell them directly.
#if defined(__CUDACC__)
#define MG_HD __host__ __device__
#else
#define MG_HD
#endif

// MG_INLINE forces inlining on the hot paths of the static engine. Without it clang stops
// fusing sin/cos into sincos and loses 18% to 50% against a hand-written sweep (TOOLCHAIN.md).
#if defined(_MSC_VER)
#define MG_INLINE __forceinline
#else
#define MG_INLINE inline __attribute__((always_inline))
#endif

// nvcc 13 cannot instantiate class-type (fixed_string) template parameters: leaves of the static
// engine are identified by integers instead. See docs/design.md, Note [Leaf identity].
