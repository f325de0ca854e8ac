// The CPU backend of the runtime engine (Note [Device backends] in backend.hpp): the same
// interface as a device backend, so no kernel of the engine asks which device it runs on.
//
// Elementwise kernels walk their index space row by row (the last dimension); a row whose
// operands are contiguous or broadcast (stride 1 or 0) runs on SIMD packs (detail::pack over
// xsimd), the rest element by element through element_kernels.hpp. An op whose body uses a
// function packs lack says `static constexpr bool simd = false;` and runs on numbers only.
//
// Note [Accurate sums]: sums accumulate in double whatever the element type: a contiguous row of
// doubles in four double packs; a contiguous row of floats in four float packs whose lanes add 8
// values each before they go into double packs (as Note [Blocked sums] does in the static
// engine; 1.7x the speed of converting every value); a strided row in blocks of 1024 elements
// with eight independent accumulators. A float32 sum of 3e7 elements is then within 1e-6 of its
// float64 counterpart (a running float sum was 30% off there). A sum of 65536 or more elements
// into one value adds blocks of 32768 elements, each as above, and then the blocks' sums in
// order, whatever the number of threads (Note [Intra-op parallelism] in parallel.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/backend/backend.hpp>
#include <metagrad/backend/element_kernels.hpp>
#include <metagrad/backend/host_cache.hpp>
#include <metagrad/backend/parallel.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/core/simd.hpp>
#include <metagrad/core/storage.hpp>

namespace mg::detail {

// Calls row(off, n) for each row (the last dimension) of s; off[k] is operand k's element offset
// at the row's start. A 0-d space is one row of one element.
template <std::size_t K, class Row>
void for_each_row(const nd_space& s, const std::array<const nd_operand*, K>& ops, Row&& row,
                  std::array<std::int64_t, K> off = {}) {
  if (s.numel == 0) return;
  if (s.rank <= 1) {
    row(off, s.rank == 0 ? std::int64_t{1} : s.extents[0]);
    return;
  }
  std::int64_t idx[max_rank] = {};
  const int last = s.rank - 1;
  for (;;) {
    row(off, s.extents[last]);
    int d = last - 1;
    for (; d >= 0; --d) {
      for (std::size_t k = 0; k < K; ++k) off[k] += ops[k]->strides[d];
      if (++idx[d] < s.extents[d]) break;
      for (std::size_t k = 0; k < K; ++k) off[k] -= ops[k]->strides[d] * s.extents[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// The rows of s[lo, hi) along dimension d (the index range of d cut to [lo, hi)): a space
// whose extent along d is hi - lo, and each operand's offset at its start.
template <std::size_t K>
std::pair<nd_space, std::array<std::int64_t, K>> sub_space(
    const nd_space& s, const std::array<const nd_operand*, K>& ops, int d, std::int64_t lo,
    std::int64_t hi) {
  nd_space sub = s;
  sub.numel = s.numel / s.extents[d] * (hi - lo);
  sub.extents[d] = hi - lo;
  std::array<std::int64_t, K> off{};
  for (std::size_t k = 0; k < K; ++k) off[k] = lo * ops[k]->strides[d];
  return {sub, off};
}

// for_each_row over s, split along dimension 0 into chunks of at least parallel_grain elements
// run on the pool (Note [Intra-op parallelism]). `written`: a bit per operand the rows write,
// which must not share an element between two chunks (a stride of 0 along dimension 0 keeps the
// whole space on one thread).
template <std::size_t K, class Row>
void parallel_for_each_row(const nd_space& s, const std::array<const nd_operand*, K>& ops,
                           unsigned written, Row&& row) {
  const int threads = s.rank == 0 || s.numel < 2 * parallel_grain ? 1 : intra_op_threads();
  bool split = threads > 1;
  for (std::size_t k = 0; split && k < K; ++k)
    if ((written >> k & 1u) && ops[k]->strides[0] == 0) split = false;
  const std::int64_t n = s.rank == 0 ? 1 : s.extents[0];
  // rank 1: chunk edges on multiples of 64 elements (whole SIMD packs)
  const std::int64_t unit = s.rank == 1 ? 64 : 1;
  const std::int64_t units = (n + unit - 1) / unit;
  const std::int64_t chunks =
      split ? std::min<std::int64_t>({threads, s.numel / parallel_grain, units}) : 1;
  if (chunks <= 1) {
    for_each_row(s, ops, row);
    return;
  }
  parallel_chunks(chunks, [&](std::int64_t c) {
    const std::int64_t lo = std::min(n, units * c / chunks * unit);
    const std::int64_t hi = std::min(n, units * (c + 1) / chunks * unit);
    if (lo >= hi) return;
    const auto [sub, off] = sub_space(s, ops, 0, lo, hi);
    for_each_row(sub, ops, row, off);
  });
}

inline std::int64_t inner_stride(const nd_space& s, const nd_operand& o) {
  return s.rank == 0 ? 0 : o.strides[s.rank - 1];
}

// Note [nvcc and packs]: nvcc rejects SIMD types in the host-device functions the op bodies
// instantiate (mg::grads' constructor: "contains a vector, which is not supported in device
// code"), so a translation unit compiled by nvcc runs the CPU kernels on numbers. Both variants
// compute the same values; the linker keeps one for the program.
template <class Op, class T>
inline constexpr bool vectorized_v =
    !MG_NVCC && simd_enabled<Op>() &&
    (std::is_same_v<T, float> ||
     std::is_same_v<T, double>)&&std::is_same_v<forward_result_t<Op, T>, T>;

template <class T>
MG_INLINE pack<T> pack_at(const T* p, std::int64_t stride, std::int64_t i) {
  return stride ? pack<T>::load(p + i) : pack<T>(p[0]);
}

template <bool Saved, class T>
MG_INLINE auto saved_pack(const T* p, std::int64_t stride, std::int64_t i) {
  if constexpr (Saved) {
    return pack_at(p, stride, i);
  } else {
    return not_saved{};
  }
}

// An op's parameters (clamp's bounds...) as a local copy: read through the reference, they would
// be read again after every store of a loop (the store might alias them), and converted again.
template <class Op>
using op_copy_t =
    std::conditional_t<std::is_trivially_copyable_v<Op> && sizeof(Op) <= 64, const Op, const Op&>;

// The packs of a row whose operands are contiguous (c: a bit per operand) or broadcast, the
// latter loaded once: the output may alias an operand (an in-place op), so a broadcast value read
// inside the loop would be read again after every store.
template <class Op, class T, unsigned c, std::size_t... k>
std::int64_t forward_packs_as(const Op& op_ref, T* out, const T* const* p, std::int64_t n,
                              std::index_sequence<k...>) {
  using P = pack<T>;
  op_copy_t<Op> op = op_ref;
  const P b[] = {(c >> k & 1u ? P(T(0)) : P(p[k][0]))...};
  constexpr auto w = static_cast<std::int64_t>(P::size);
  std::int64_t i = 0;
  // two packs a step: one a step leaves a loop that stores once a step short of the store
  // rate (an in-place mul_ in cache took 1.7x the time)
  for (; i + 2 * w <= n; i += 2 * w) {
    const P r0(op.forward((c >> k & 1u ? P::load(p[k] + i) : b[k])...));
    const P r1(op.forward((c >> k & 1u ? P::load(p[k] + i + w) : b[k])...));
    r0.store(out + i);
    r1.store(out + i + w);
  }
  for (; i + w <= n; i += w)
    P(op.forward((c >> k & 1u ? P::load(p[k] + i) : b[k])...)).store(out + i);
  return i;
}
template <class Op, class T, std::size_t... k>
std::int64_t forward_packs(const Op& op, T* out, const T* const* p, const std::int64_t* st,
                           std::int64_t n, std::index_sequence<k...> ks) {
  constexpr std::size_t N = sizeof...(k);
  if constexpr (N <= 3) {  // one loop per pattern of contiguous and broadcast operands
    unsigned c = 0;
    ((c |= st[k] != 0 ? 1u << k : 0u), ...);
    return [&]<unsigned... m>(std::integer_sequence<unsigned, m...>) {
      std::int64_t done = 0;
      (void)((c == m ? (done = forward_packs_as<Op, T, m>(op, out, p, n, ks), true) : false) ||
             ...);
      return done;
    }
    (std::make_integer_sequence<unsigned, 1u << N>{});
  } else {
    using P = pack<T>;
    op_copy_t<Op> o = op;
    std::int64_t i = 0;
    for (; i + static_cast<std::int64_t>(P::size) <= n; i += P::size)
      P(o.forward(pack_at(p[k], st[k], i)...)).store(out + i);
    return i;
  }
}

template <class Op, class T, std::size_t... k>
std::int64_t backward_packs(const Op& op_ref, const T* const* p, const std::int64_t* st,
                            const T* py, std::int64_t sy, const T* pg, std::int64_t sg,
                            T* const* gp, std::int64_t n, std::index_sequence<k...>) {
  using P = pack<T>;
  op_copy_t<Op> op = op_ref;
  std::int64_t i = 0;
  for (; i + static_cast<std::int64_t>(P::size) <= n; i += P::size) {
    const auto b = op.backward(saved_pack<saves_inputs_v<Op>>(p[k], st[k], i)...,
                               saved_pack<saves_output_v<Op>>(py, sy, i), pack_at(pg, sg, i));
    (
        [&] {
          if constexpr (!std::is_same_v<component_t<k, decltype(b)>, no_grad>) {
            if (gp[k]) P(component<k>(b)).store(gp[k] + i);
          }
        }(),
        ...);
  }
  return i;
}

template <class Op, class T>
void cpu_forward_typed(const Op& op, const nd_space& s, const nd_operand& out,
                       const nd_operand* in) {
  constexpr std::size_t N = op_arity<Op>();
  using R = forward_result_t<Op, T>;
  std::array<const nd_operand*, N + 1> ops{&out};
  for (std::size_t k = 0; k < N; ++k) ops[k + 1] = &in[k];
  std::int64_t st[N];
  for (std::size_t k = 0; k < N; ++k) st[k] = inner_stride(s, in[k]);
  const std::int64_t so = inner_stride(s, out);
  parallel_for_each_row(
      s, ops, 1u, [&](const std::array<std::int64_t, N + 1>& off, std::int64_t n) {
        std::int64_t i = 0;
        if constexpr (vectorized_v<Op, T>) {
          bool packed = so == 1;
          for (std::size_t k = 0; k < N; ++k) packed = packed && (st[k] == 0 || st[k] == 1);
          if (packed) {
            const T* p[N];
            for (std::size_t k = 0; k < N; ++k)
              p[k] = static_cast<const T*>(in[k].data) + off[k + 1];
            i = forward_packs(op, static_cast<T*>(out.data) + off[0], p, st, n,
                              std::make_index_sequence<N>{});
          }
        }
        std::int64_t o[N];
        for (; i < n; ++i) {
          for (std::size_t k = 0; k < N; ++k) o[k] = off[k + 1] + i * st[k];
          forward_element<Op, T>(op, out, off[0] + i * so, in, o, std::make_index_sequence<N>{});
        }
      });
  (void)sizeof(R);
}

template <class Op, class T>
void cpu_backward_typed(const Op& op, const nd_space& s, const nd_operand* in, const nd_operand& y,
                        const nd_operand& g, const nd_operand* grads) {
  constexpr std::size_t N = op_arity<Op>();
  constexpr std::size_t K = 2 * N + 2;  // inputs, y, g, gradients
  std::array<const nd_operand*, K> ops{};
  for (std::size_t k = 0; k < N; ++k) ops[k] = &in[k];
  ops[N] = &y;
  ops[N + 1] = &g;
  for (std::size_t k = 0; k < N; ++k) ops[N + 2 + k] = &grads[k];
  std::int64_t st[K];
  for (std::size_t k = 0; k < K; ++k) st[k] = inner_stride(s, *ops[k]);
  unsigned written = 0;  // the gradients
  for (std::size_t k = 0; k < N; ++k)
    if (grads[k].data) written |= 1u << (N + 2 + k);
  parallel_for_each_row(
      s, ops, written, [&](const std::array<std::int64_t, K>& off, std::int64_t n) {
        std::int64_t i = 0;
        if constexpr (vectorized_v<Op, T>) {
          bool packed = true;
          for (std::size_t k = 0; k < N + 2; ++k) packed = packed && (st[k] == 0 || st[k] == 1);
          for (std::size_t k = 0; k < N; ++k)
            packed = packed && (!grads[k].data || st[N + 2 + k] == 1);
          if (packed) {
            const T* p[N];
            T* gp[N];
            for (std::size_t k = 0; k < N; ++k) {
              p[k] = in[k].data ? static_cast<const T*>(in[k].data) + off[k] : nullptr;
              gp[k] = grads[k].data ? static_cast<T*>(grads[k].data) + off[N + 2 + k] : nullptr;
            }
            const T* py = y.data ? static_cast<const T*>(y.data) + off[N] : nullptr;
            i = backward_packs(op, p, st, py, st[N], static_cast<const T*>(g.data) + off[N + 1],
                               st[N + 1], gp, n, std::make_index_sequence<N>{});
          }
        }
        std::int64_t o[N], go[N];
        for (; i < n; ++i) {
          for (std::size_t k = 0; k < N; ++k) {
            o[k] = off[k] + i * st[k];
            go[k] = off[N + 2 + k] + i * st[N + 2 + k];
          }
          const T gv = static_cast<const T*>(g.data)[off[N + 1] + i * st[N + 1]];
          backward_element<Op, T>(op, in, o, y, off[N] + i * st[N], gv, grads, go,
                                  std::make_index_sequence<N>{});
        }
      });
}

// Note [Long rows]: the elementwise kernels loop over rows of the index space's last dimension.
// When that has at most 4 elements under a dimension of at least 64 ([k, n, 2] against a
// [k, 1, 2] operand, which no merging of dimensions removes), the rows run along the longest
// dimension instead: strided, element by element, but a 16th of the rows or fewer, each of which
// costs its walk over the outer dimensions. An elementwise kernel visits every index once, so
// the order is free. long_row_dim: that dimension, or -1 to keep the last.
inline int long_row_dim(const nd_space& s) {
  if (s.rank < 2 || s.extents[s.rank - 1] > 4) return -1;
  int d = 0;
  for (int k = 1; k < s.rank - 1; ++k)
    if (s.extents[k] > s.extents[d]) d = k;
  return s.extents[d] >= 64 ? d : -1;
}
// s, or an operand of it, with dimensions d and the last swapped
inline nd_space swap_last(nd_space s, int d) {
  std::swap(s.extents[d], s.extents[s.rank - 1]);
  return s;
}
inline nd_operand swap_last(nd_operand o, int rank, int d) {
  std::swap(o.strides[d], o.strides[rank - 1]);
  return o;
}

template <class Op>
void cpu_forward(const void* op, dtype value, const nd_space& s, const nd_operand& out,
                 const nd_operand* in) {
  dispatch_floating(value, [&]<class T>(std::type_identity<T>) {
    const int d = long_row_dim(s);
    if (d < 0) {
      cpu_forward_typed<Op, T>(*static_cast<const Op*>(op), s, out, in);
      return;
    }
    constexpr std::size_t N = op_arity<Op>();
    nd_operand in2[N > 0 ? N : 1];
    for (std::size_t k = 0; k < N; ++k) in2[k] = swap_last(in[k], s.rank, d);
    cpu_forward_typed<Op, T>(*static_cast<const Op*>(op), swap_last(s, d),
                             swap_last(out, s.rank, d), in2);
  });
}

template <class Op>
void cpu_backward(const void* op, dtype value, const nd_space& s, const nd_operand* in,
                  const nd_operand& y, const nd_operand& g, const nd_operand* grads) {
  if constexpr (is_differentiable<Op>()) {
    dispatch_floating(value, [&]<class T>(std::type_identity<T>) {
      const int d = long_row_dim(s);
      if (d < 0) {
        cpu_backward_typed<Op, T>(*static_cast<const Op*>(op), s, in, y, g, grads);
        return;
      }
      constexpr std::size_t N = op_arity<Op>();
      nd_operand in2[N > 0 ? N : 1], grads2[N > 0 ? N : 1];
      for (std::size_t k = 0; k < N; ++k) {
        in2[k] = swap_last(in[k], s.rank, d);
        grads2[k] = swap_last(grads[k], s.rank, d);
      }
      cpu_backward_typed<Op, T>(*static_cast<const Op*>(op), swap_last(s, d), in2,
                                swap_last(y, s.rank, d), swap_last(g, s.rank, d), grads2);
    });
  }
}

template <class Op>
inline constexpr elementwise_kernels cpu_kernels{&cpu_forward<Op>, &cpu_backward<Op>};

// ---- the backend table -------------------------------------------------------------------------

// Host memory comes from the caching allocator (Note [Host caching allocator]).
inline void* cpu_allocate(std::size_t nbytes) { return host_allocate(nbytes); }
inline void cpu_release(void* p, std::size_t nbytes, int) { host_release(p, nbytes); }
inline cache_stats cpu_memory_stats(int) { return host_statistics(); }
inline void cpu_empty_cache(int) { host_empty_cache(); }
inline void cpu_reset_peak(int) { host_reset_peak(); }
inline void cpu_memcpy(void* dst, const void* src, std::size_t nbytes) {
  std::memcpy(dst, src, nbytes);
}

inline void cpu_fill(void* dst, dtype d, std::int64_t n, double value) {
  dispatch(d, [&]<class T>(std::type_identity<T>) {
    T* p = static_cast<T*>(dst);
    const T v = static_cast<T>(value);
    const std::int64_t chunks =
        n < 2 * parallel_grain ? 1 : std::min<std::int64_t>(intra_op_threads(), n / parallel_grain);
    // zeros (every dtype's are all bits 0) by memset, whose large-block stores beat a loop's
    const auto fill = [&](T* q, std::int64_t m) {
      if (value == 0.0 && !std::signbit(value))  // not -0.0, whose sign bit is set
        std::memset(static_cast<void*>(q), 0, static_cast<std::size_t>(m) * sizeof(T));
      else
        std::fill_n(q, m, v);
    };
    if (chunks <= 1) {
      fill(p, n);
      return;
    }
    parallel_chunks(chunks, [&](std::int64_t c) {
      const std::int64_t lo = n * c / chunks / 64 * 64;
      const std::int64_t hi = c + 1 == chunks ? n : n * (c + 1) / chunks / 64 * 64;
      fill(p + lo, hi - lo);
    });
  });
}

inline void cpu_copy(const nd_space& s, dtype out_t, const nd_operand& out, dtype in_t,
                     const nd_operand& in) {
  dispatch(out_t, [&]<class O>(std::type_identity<O>) {
    dispatch(in_t, [&]<class I>(std::type_identity<I>) {
      O* o = static_cast<O*>(out.data);
      const I* x = static_cast<const I*>(in.data);
      const std::int64_t so = inner_stride(s, out), si = inner_stride(s, in);
      const std::array<const nd_operand*, 2> ops{&out, &in};
      parallel_for_each_row(s, ops, 1u,
                            [&](const std::array<std::int64_t, 2>& off, std::int64_t n) {
                              O* oo = o + off[0];
                              const I* xx = x + off[1];
                              if (so == 1 && si == 1) {
                                for (std::int64_t i = 0; i < n; ++i) oo[i] = static_cast<O>(xx[i]);
                              } else if (so == 1 && si == 0) {  // a broadcast value
                                std::fill_n(oo, n, static_cast<O>(*xx));
                              } else {
                                for (std::int64_t i = 0; i < n; ++i)
                                  oo[i * so] = static_cast<O>(xx[i * si]);
                              }
                            });
    });
  });
}

#if !MG_NVCC  // Note [nvcc and packs]
// The sum of n contiguous floating elements in double packs, four at a time.
template <class T>
double packed_sum(const T* p, std::int64_t n) {
  using B = xsimd::batch<double>;
  constexpr std::int64_t w = B::size;
  B a0(0.0), a1(0.0), a2(0.0), a3(0.0);
  std::int64_t i = 0;
  for (; i + 4 * w <= n; i += 4 * w) {
    a0 += B::load_unaligned(p + i);
    a1 += B::load_unaligned(p + i + w);
    a2 += B::load_unaligned(p + i + 2 * w);
    a3 += B::load_unaligned(p + i + 3 * w);
  }
  double total = xsimd::hadd((a0 + a1) + (a2 + a3));
  for (; i < n; ++i) total += static_cast<double>(p[i]);
  return total;
}
// Contiguous floats: each lane of four float packs adds 8 values, then the lanes go into double
// packs (a conversion per 8 values instead of per value: the loads then limit the loop).
template <int = 0>
double blocked_float_sum(const float* p, std::int64_t n) {
  using F = xsimd::batch<float>;
  using B = xsimd::batch<double>;
  constexpr std::int64_t w = F::size, steps = 8;
  B d0(0.0), d1(0.0);
  alignas(64) float lanes[2 * w];
  std::int64_t i = 0;
  for (; i + 4 * w * steps <= n;) {
    F a0(0.f), a1(0.f), a2(0.f), a3(0.f);
    for (std::int64_t k = 0; k < steps; ++k, i += 4 * w) {
      a0 += F::load_unaligned(p + i);
      a1 += F::load_unaligned(p + i + w);
      a2 += F::load_unaligned(p + i + 2 * w);
      a3 += F::load_unaligned(p + i + 3 * w);
    }
    (a0 + a1).store_aligned(lanes);
    (a2 + a3).store_aligned(lanes + w);
    for (std::int64_t k = 0; k < 2 * w; k += 2 * B::size) {
      d0 += B::load_unaligned(lanes + k);
      d1 += B::load_unaligned(lanes + k + B::size);
    }
  }
  return xsimd::hadd(d0 + d1) + packed_sum(p + i, n - i);
}

// The product of n contiguous floating elements in double packs, four at a time (the lanes'
// partial products are multiplied in lane order, so the result does not depend on the thread
// count, Note [Intra-op parallelism]).
template <class T>
double packed_prod(const T* p, std::int64_t n) {
  using B = xsimd::batch<double>;
  constexpr std::int64_t w = B::size;
  B a0(1.0), a1(1.0), a2(1.0), a3(1.0);
  std::int64_t i = 0;
  for (; i + 4 * w <= n; i += 4 * w) {
    a0 *= B::load_unaligned(p + i);
    a1 *= B::load_unaligned(p + i + w);
    a2 *= B::load_unaligned(p + i + 2 * w);
    a3 *= B::load_unaligned(p + i + 3 * w);
  }
  alignas(64) double lanes[w];
  ((a0 * a1) * (a2 * a3)).store_aligned(lanes);
  double r = 1.0;
  for (std::int64_t k = 0; k < w; ++k) r *= lanes[k];
  for (; i < n; ++i) r *= static_cast<double>(p[i]);
  return r;
}

// The largest (Max) or smallest of n contiguous floating elements, NaN if one is NaN (as
// pick_extreme): four packs of running extremes, the NaNs tracked apart.
template <bool Max, class T>
T packed_extreme(const T* p, std::int64_t n, T init) {
  using P = xsimd::batch<T>;
  constexpr std::int64_t w = P::size;
  const auto pick = [](const P& a, const P& v) {
    // v where v > a (v < a), else a; where a lane is NaN, either (NaNs are tracked apart): one
    // max or min instruction on x86 instead of a comparison and a blend
    if constexpr (Max)
      return xsimd::max(v, a);
    else
      return xsimd::min(v, a);
  };
  P a0(init), a1(init), a2(init), a3(init);
  // (xsimd's != is an ordered comparison: false at NaN, so isnan)
  auto nan = xsimd::isnan(P(T(0)));  // all false
  std::int64_t i = 0;
  for (; i + 4 * w <= n; i += 4 * w) {
    const P v0 = P::load_unaligned(p + i), v1 = P::load_unaligned(p + i + w);
    const P v2 = P::load_unaligned(p + i + 2 * w), v3 = P::load_unaligned(p + i + 3 * w);
    nan = nan | xsimd::isnan(v0) | xsimd::isnan(v1) | xsimd::isnan(v2) | xsimd::isnan(v3);
    a0 = pick(a0, v0);
    a1 = pick(a1, v1);
    a2 = pick(a2, v2);
    a3 = pick(a3, v3);
  }
  if (xsimd::any(nan)) return std::numeric_limits<T>::quiet_NaN();
  alignas(64) T lanes[w];
  pick(pick(a0, a1), pick(a2, a3)).store_aligned(lanes);
  T r = init;
  for (std::int64_t k = 0; k < w; ++k) r = pick_extreme<Max>(r, lanes[k]);
  for (; i < n; ++i) r = pick_extreme<Max>(r, p[i]);
  return r;
}

// The position of the first largest (Max) or smallest of n >= 1 contiguous floating elements,
// a NaN ranking first (Note [Selection order]): the extreme by packs, then the first element
// equal to it by packs.
template <bool Max, class T>
std::int64_t first_extreme_position(const T* p, std::int64_t n) {
  using P = xsimd::batch<T>;
  constexpr std::int64_t w = P::size;
  const T m = packed_extreme<Max>(p, n, p[0]);
  std::int64_t j = 0;
  if (m != m) {
    while (p[j] == p[j]) ++j;
    return j;
  }
  for (const P mv(m); j + w <= n; j += w)
    if (xsimd::any(P::load_unaligned(p + j) == mv)) break;
  while (p[j] != m) ++j;
  return j;
}
#endif

// The sum of n elements p[0], p[stride], ... in double. See Note [Accurate sums].
template <class T>
double row_sum(const T* p, std::int64_t stride, std::int64_t n) {
  if constexpr (!MG_NVCC && std::is_same_v<T, float>) {
    if (stride == 1) return blocked_float_sum(p, n);
  } else if constexpr (!MG_NVCC && std::is_same_v<T, double>) {
    if (stride == 1) return packed_sum(p, n);
  }
  double total = 0;
  for (std::int64_t b = 0; b < n; b += 1024) {
    const std::int64_t m = std::min<std::int64_t>(1024, n - b);
    const T* q = p + b * stride;
    double a[8] = {};
    std::int64_t i = 0;
    if (stride == 1) {
      for (; i + 8 <= m; i += 8)
        for (int j = 0; j < 8; ++j) a[j] += static_cast<double>(q[i + j]);
    }
    for (; i < m; ++i) a[i & 7] += static_cast<double>(q[i * stride]);
    total += ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  }
  return total;
}

// The reductions of the CPU backend: how each starts, combines and reads a row.
struct sum_reduction {
  template <class T>
  using acc = double;
  template <class T>
  static double init() {
    return 0.0;
  }
  static double combine(double a, double b) { return a + b; }
  template <class T>
  static double row(const T* p, std::int64_t stride, std::int64_t n) {
    return row_sum(p, stride, n);
  }
};
struct prod_reduction {
  template <class T>
  using acc = double;
  template <class T>
  static double init() {
    return 1.0;
  }
  static double combine(double a, double b) { return a * b; }
  template <class T>
  static double row(const T* p, std::int64_t stride, std::int64_t n) {
#if !MG_NVCC  // Note [nvcc and packs]
    if constexpr (std::is_floating_point_v<T>)
      if (stride == 1) return packed_prod(p, n);
#endif
    double r = 1.0;
    for (std::int64_t i = 0; i < n; ++i) r *= static_cast<double>(p[i * stride]);
    return r;
  }
};
template <bool Max>
struct extreme_reduction {
  template <class T>
  using acc = T;
  template <class T>
  static T init() {
    if constexpr (std::numeric_limits<T>::has_infinity) {
      return Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    } else {
      return Max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
  }
  template <class T>
  static T combine(T a, T b) {
    return pick_extreme<Max>(a, b);
  }
  template <class T>
  static T row(const T* p, std::int64_t stride, std::int64_t n) {
#if !MG_NVCC  // Note [nvcc and packs]
    if constexpr (std::is_floating_point_v<T>)
      if (stride == 1) return packed_extreme<Max>(p, n, init<T>());
#endif
    T r = init<T>();
    for (std::int64_t i = 0; i < n; ++i) r = combine(r, p[i * stride]);
    return r;
  }
};

// Note [Intra-op parallelism] for a reduction of s into n_out accumulators at acc, o = ops[0]
// walking them: with several outputs, s splits along its outermost kept dimension (each output
// still accumulated by one thread, in one thread's order); into one output, from
// 2 * parallel_grain elements on, in fixed blocks along dimension 0, each into its own partial,
// the partials then combined in order. Neither depends on the number of threads.
template <class A, class Rows, class Combine>
void parallel_reduce_rows(const nd_space& s, const std::array<const nd_operand*, 2>& ops,
                          std::int64_t n_out, A* acc, A init, const Rows& rows,
                          const Combine& combine) {
  if (s.rank == 0 || s.numel < 2 * parallel_grain) {
    rows(s, {}, acc);
    return;
  }
  const int threads = intra_op_threads();
  if (n_out > 1) {
    int d = 0;
    while (d < s.rank && (ops[0]->strides[d] == 0 || s.extents[d] < 2)) ++d;
    const std::int64_t n = d < s.rank ? s.extents[d] : 1;
    const std::int64_t chunks = std::min<std::int64_t>({threads, s.numel / parallel_grain, n});
    if (chunks <= 1) {
      rows(s, {}, acc);
      return;
    }
    parallel_chunks(chunks, [&](std::int64_t c) {
      const auto [sub, off] = sub_space(s, ops, d, n * c / chunks, n * (c + 1) / chunks);
      rows(sub, off, acc);
    });
    return;
  }
  const std::int64_t n = s.extents[0], per = s.numel / n;
  const std::int64_t step = std::max<std::int64_t>(1, parallel_grain / per);  // per block
  const std::int64_t blocks = (n + step - 1) / step;
  std::vector<A> partial(static_cast<std::size_t>(blocks), init);
  const std::int64_t chunks = std::min<std::int64_t>(threads, blocks);
  parallel_chunks(chunks, [&](std::int64_t c) {
    for (std::int64_t b = blocks * c / chunks; b < blocks * (c + 1) / chunks; ++b) {
      const auto [sub, off] = sub_space(s, ops, 0, b * step, std::min(n, (b + 1) * step));
      rows(sub, {0, off[1]}, &partial[static_cast<std::size_t>(b)]);
    }
  });
  for (const A& v : partial) *acc = combine(*acc, v);
}

// n rows of m <= 16 elements of q (rows sx1 apart, elements sx) into the accumulators at a
// (rows so1 apart, elements so; so == 0: each row reduces to one): [k, n, 2] reduced over n keeps
// its 2 accumulators in registers across the n rows. M = m, or 0 for a run-time m.
template <class R, int M, class A, class T>
void short_rows_of(A* a, const T* q, std::int64_t n, std::int64_t m, std::int64_t so,
                   std::int64_t so1, std::int64_t sx, std::int64_t sx1) {
  const std::int64_t w = M > 0 ? M : m;
  if (so != 0 && so1 == 0) {
    A r[M > 0 ? M : 16];
    for (std::int64_t i = 0; i < w; ++i) r[i] = a[i * so];
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < w; ++i)
        r[i] = R::combine(r[i], static_cast<A>(q[j * sx1 + i * sx]));
    for (std::int64_t i = 0; i < w; ++i) a[i * so] = r[i];
  } else if (so == 0) {
    for (std::int64_t j = 0; j < n; ++j) {
      A r = R::template init<T>();
      for (std::int64_t i = 0; i < w; ++i) r = R::combine(r, static_cast<A>(q[j * sx1 + i * sx]));
      a[j * so1] = R::combine(a[j * so1], r);
    }
  } else {
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < w; ++i)
        a[j * so1 + i * so] = R::combine(a[j * so1 + i * so], static_cast<A>(q[j * sx1 + i * sx]));
  }
}
template <class R, class A, class T>
void short_rows(A* a, const T* q, std::int64_t n, std::int64_t m, std::int64_t so, std::int64_t so1,
                std::int64_t sx, std::int64_t sx1) {
  switch (m) {
    case 1:
      return short_rows_of<R, 1>(a, q, n, m, so, so1, sx, sx1);
    case 2:
      return short_rows_of<R, 2>(a, q, n, m, so, so1, sx, sx1);
    case 3:
      return short_rows_of<R, 3>(a, q, n, m, so, so1, sx, sx1);
    case 4:
      return short_rows_of<R, 4>(a, q, n, m, so, so1, sx, sx1);
    default:
      return short_rows_of<R, 0>(a, q, n, m, so, so1, sx, sx1);
  }
}

template <class R>
void cpu_reduce(dtype d, const nd_space& s, const nd_operand& x, std::uint32_t reduced, void* out) {
  // acc has one accumulator per output element; `o` walks it: contiguous strides over the kept
  // dimensions, 0 along the reduced ones.
  nd_operand o;
  std::int64_t n_out = 1;
  for (int k = s.rank - 1; k >= 0; --k) {
    if ((reduced >> k) & 1u) {
      o.strides[k] = 0;
    } else {
      o.strides[k] = n_out;
      n_out *= s.extents[k];
    }
  }
  dispatch(d, [&]<class T>(std::type_identity<T>) {
    if constexpr (std::is_same_v<T, bool>) {
      fail("reduce: a bool tensor; convert it first, e.g. with .to(mg::f32)");
    } else {
      using A = typename R::template acc<T>;
      std::vector<A> acc(static_cast<std::size_t>(n_out), R::template init<T>());
      o.data = acc.data();
      const std::int64_t so = inner_stride(s, o), sx = inner_stride(s, x);
      const T* p = static_cast<const T*>(x.data);
      const std::array<const nd_operand*, 2> ops{&o, &x};
      // the rows of `sub` into the accumulators at `a0`
      const auto rows = [&](const nd_space& sub, const std::array<std::int64_t, 2>& start, A* a0) {
        for_each_row(
            sub, ops,
            [&](const std::array<std::int64_t, 2>& off, std::int64_t n) {
              A* a = a0 + off[0];
              if (so == 0) {
                *a = R::combine(*a, static_cast<A>(R::row(p + off[1], sx, n)));
              } else {
                const T* q = p + off[1];
                if (sx == 1) {  // a contiguous row: the loop vectorises
                  for (std::int64_t i = 0; i < n; ++i)
                    a[i] = R::combine(a[i], static_cast<A>(q[i]));
                } else {
                  for (std::int64_t i = 0; i < n; ++i)
                    a[i] = R::combine(a[i], static_cast<A>(q[i * sx]));
                }
              }
            },
            start);
      };
      const auto combine = [](A a, A b) { return R::combine(a, b); };
      const int last = s.rank - 1;
      if (s.rank >= 2 && s.numel > 0 && s.extents[last] <= 16) {
        // short rows ([k, n, 2] summed over n or over the 2): each call takes the last two
        // dimensions, not one row
        nd_space s2 = s;
        s2.rank = last;
        s2.numel = s.numel / s.extents[last];
        const std::int64_t m = s.extents[last], so1 = o.strides[last - 1],
                           sx1 = x.strides[last - 1];
        const auto blocks = [&](const nd_space& sub, const std::array<std::int64_t, 2>& start,
                                A* a0) {
          for_each_row(
              sub, ops,
              [&](const std::array<std::int64_t, 2>& off, std::int64_t n) {
                short_rows<R, A>(a0 + off[0], p + off[1], n, m, so, so1, sx, sx1);
              },
              start);
        };
        parallel_reduce_rows<A>(s2, ops, n_out, acc.data(), R::template init<T>(), blocks, combine);
      } else {
        parallel_reduce_rows<A>(s, ops, n_out, acc.data(), R::template init<T>(), rows, combine);
      }
      T* r = static_cast<T*>(out);
      for (std::int64_t i = 0; i < n_out; ++i)
        r[i] = static_cast<T>(acc[static_cast<std::size_t>(i)]);
    }
  });
}

inline void cpu_sum(dtype d, const nd_space& s, const nd_operand& x, std::uint32_t reduced,
                    void* out) {
  cpu_reduce<sum_reduction>(d, s, x, reduced, out);
}

inline constexpr backend cpu_backend{"cpu",
                                     &cpu_allocate,
                                     &cpu_release,
                                     &cpu_memcpy,
                                     &cpu_memcpy,
                                     &cpu_fill,
                                     &cpu_copy,
                                     &cpu_sum,
                                     &cpu_reduce<prod_reduction>,
                                     &cpu_reduce<extreme_reduction<true>>,
                                     &cpu_reduce<extreme_reduction<false>>,
                                     nullptr,  // gemm: the runtime calls BLAS (backend/blas.hpp)
                                     &cpu_memory_stats,
                                     &cpu_empty_cache,
                                     &cpu_reset_peak};

}  // namespace mg::detail
