// Execution-space and inlining macros, and every compiler workaround, in one place.
#pragma once

#include <metagrad/core/isa.hpp>  // the instruction-set check every program runs before main

// Note [Compiled core]: by default the runtime engine's non-template code and the built-in ops on
// mg::tensor are compiled once, into the library (src/; CMake target metagrad::metagrad). A
// user's file then sees declarations only: <metagrad/tensor.hpp> includes the class, the op
// structs and the templates on the caller's own types (constructors, item<T>, hooks), and no
// kernel, node or engine code. The engine's functions are still written in headers, as templates
// in name only (Note [Lazy members] in runtime/lazy.hpp) and inline functions, so that the same
// sources build in header-only mode (METAGRAD_HEADER_ONLY, target metagrad::header_only), where
// <metagrad/tensor.hpp> includes them and a file instantiates only what it calls. The library
// instantiates each of them explicitly (src/instances_*.cpp), and the ops' tensor family for
// every built-in op with every kind of operand (numbers reach it as double, std::int64_t or bool:
// detail::canonical in dispatch.hpp).
//   - MG_HEADER_ONLY: 1 in header-only mode.
//   - MG_API marks a non-template function that a light header declares and a heavy one
//     defines: inline in header-only mode; in compiled mode an ordinary function, whose
//     definition only the library's src/core.cpp compiles (MG_EMIT_API).
#if defined(METAGRAD_HEADER_ONLY)
#define MG_HEADER_ONLY 1
#define MG_API inline
#define MG_EMIT_API 1
#else
#define MG_HEADER_ONLY 0
#define MG_API
#if defined(METAGRAD_EMIT_API)
#define MG_EMIT_API 1
#else
#define MG_EMIT_API 0
#endif
#endif

// MG_HD marks functions that run on the host and, under nvcc, on the device. CCCL 3 no longer
// defines __host__/__device__ for plain host compilers, so we never spell them directly.
#if defined(__CUDACC__)
#define MG_HD __host__ __device__
#define MG_NVCC 1
#else
#define MG_HD
#define MG_NVCC 0
#endif

// MG_EXEC_CHECK_DISABLE precedes an MG_HD template that is also instantiated for host-only types
// (tensors): nvcc then checks the calls of each instantiation where it is used, not that a host
// instantiation calls host functions (which it would warn about in every .cu file using tensors).
#if defined(__CUDACC__)
#define MG_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define MG_EXEC_CHECK_DISABLE
#endif

// MG_NO_UNIQUE_ADDRESS lets an empty member (the op of a static-engine node) take no room. clang
// 16 emits broken code for the value-initialisation of aggregates whose empty members overlap
// other subobjects (it crashes, or drops the code that follows), so there an empty op takes its
// byte.
#if defined(__clang__)
#define MG_NO_UNIQUE_ADDRESS
#else
#define MG_NO_UNIQUE_ADDRESS [[no_unique_address]]
#endif

// MG_ORIGIN is a new type wherever it is named as a default template argument and that default is
// used: the place in a traced function's code that made a constant (Note [Constant origins] in
// expr.hpp). nvcc's front end fails to deduce such a template, so under nvcc it is void: constants
// are then planned once per occurrence.
#if defined(__CUDACC__)
#define MG_ORIGIN void
#else
#define MG_ORIGIN decltype([] {})
#endif

// MG_INLINE forces inlining on the hot paths of the static engine. Without it clang stops
// fusing sin/cos into sincos and loses 18% to 50% against a hand-written sweep (in callgrind's
// instruction counts).
#if defined(_MSC_VER)
#define MG_INLINE __forceinline
#else
#define MG_INLINE inline __attribute__((always_inline))
#endif

// The same for a lambda, written after its parameter list: `[&](auto x) MG_LAMBDA_INLINE {...}`.
// A lambda inside an MG_INLINE function is a function of its own, which g++ keeps out of line
// when it is large: the static engine's forward and reverse sweeps then become two calls, and
// sin in one and cos in the other no longer fuse into sincos.
#if defined(__GNUC__) && !defined(__CUDACC__)
#define MG_LAMBDA_INLINE __attribute__((always_inline))
#else
#define MG_LAMBDA_INLINE
#endif

// MG_FLATTEN inlines every call inside a function, recursively, where GCC can: the fused loops
// use it so that the whole sweep (forward and backward) becomes one loop body. It could not
// inline xsimd's sin and cos ("function not inlinable"); the packs use their own, see Note
// [Inline trigonometry] in simd.hpp. It also keeps the function out of line: inlined into a
// caller, the attribute would be lost.
#if defined(__GNUC__) && !defined(__CUDACC__)
#define MG_FLATTEN __attribute__((flatten, noinline))
#else
#define MG_FLATTEN
#endif

// nvcc 13 cannot instantiate class-type (fixed_string) template parameters: leaves of the static
// engine are identified by integers instead. See docs/design.md, Note [Leaf identity].

// Note [clang 14 source_location]: libstdc++ 12 defines std::source_location only for compilers
// with __builtin_source_location, which clang has from version 15. Under clang 14 the call sites
// of <metagrad/call_site.hpp> use detail::source_location, the same interface built from
// __builtin_FILE/__builtin_FUNCTION/__builtin_LINE (which, as default arguments, also give the
// caller's location).

// Note [nvcc alias packs]: nvcc 13's front end replaces an alias template by its target before
// handing the code to the host compiler, so a pack expansion whose pattern names the pack only
// through the alias (`number<I>{}...` with `number<I> = double`) reaches g++ as `double{}...`
// and fails with "expansion pattern contains no parameter packs". Keep the pack in the
// expression itself, e.g. `number<I>(I)...`.

// Note [nvcc host constants]: device code may use a host constexpr variable (the plan_v<E>
// tables) only by naming it in a constant expression: `plan_v<E>.child[s][j]` as a template
// argument is fine. Binding a local constexpr reference to one inside an MG_HD function is an error
// ("identifier ... is undefined in device code"), and reading it through a static reference
// member (`static constexpr auto& d = plan_v<E>;`) a warning (#20094) in every sweep. So
// sweep.hpp and plan.hpp's object<s> name plan_v<E> directly.

// MG_DETAIL_CHECK_LAZY (tests/compile_fail/lazy_headers.cpp): a file that includes the runtime
// engine and calls none of it must not instantiate it (Note [Lazy members] in runtime/lazy.hpp).
// Under the macro, MG_DETAIL_LAZY_GUARD(Op) (in the tensor family's apply_in) makes instantiating
// an op a compile error, and MG_DETAIL_LAZY_ENGINE(I), in the body of a function that is a
// template in name only, makes instantiating it one. A few sentinels carry the second: the
// backward engine, the profiler's report, to_dot and saving a tensor for backward.
#ifdef MG_DETAIL_CHECK_LAZY
#define MG_DETAIL_LAZY_GUARD(T)                                                                    \
  static_assert(sizeof(T) == 0,                                                                    \
                "metagrad: an op was instantiated by a file that applies none: a header names it " \
                "from non-template code (Note [Lazy members])")
#define MG_DETAIL_LAZY_ENGINE(I)                                                              \
  static_assert(I != I,                                                                       \
                "metagrad: an engine function was instantiated by a file that calls none: a " \
                "header calls it from non-template code (Note [Lazy members])")
#else
#define MG_DETAIL_LAZY_GUARD(T) static_assert(true)
#define MG_DETAIL_LAZY_ENGINE(I) static_assert(true)
#endif
