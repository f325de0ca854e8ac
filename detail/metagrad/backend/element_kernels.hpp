// An elementwise op evaluated on the elements at one index: the per-element body of every
// backend's elementwise kernels (the CPU's scalar loops, the Thrust functors). One place says how
// an op struct's forward and backward meet memory: which values backward reads (the op's
// `saves`; the others are passed as mg::not_saved), and which gradients are written (those whose
// operand has data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <metagrad/backend/backend.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/grads.hpp>

namespace mg::detail {

// A T repeated once per input, for computing result types.
template <class T, std::size_t>
using repeat_t = T;

template <class Op, class T, class Seq = std::make_index_sequence<op_arity<Op>()>>
struct forward_result;
template <class Op, class T, std::size_t... k>
struct forward_result<Op, T, std::index_sequence<k...>> {
  using type = std::remove_cvref_t<decltype(std::declval<const Op&>().forward(
      std::declval<repeat_t<T, k>>()...))>;
};
// The element type Op's forward gives on inputs of type T (bool for comparisons).
template <class Op, class T>
using forward_result_t = typename forward_result<Op, T>::type;

template <bool Saved, class T>
MG_HD MG_INLINE auto saved_element(const nd_operand& o, std::int64_t off) {
  if constexpr (Saved) {
    return static_cast<const T*>(o.data)[off];
  } else {
    return not_saved{};
  }
}

// out[off_out] = op(in[k][off[k]]...)
template <class Op, class T, std::size_t... k>
MG_HD MG_INLINE void forward_element(const Op& op, const nd_operand& out, std::int64_t off_out,
                                     const nd_operand* in, const std::int64_t* off,
                                     std::index_sequence<k...>) {
  using R = forward_result_t<Op, T>;
  static_cast<R*>(out.data)[off_out] =
      static_cast<R>(op.forward(static_cast<const T*>(in[k].data)[off[k]]...));
}

template <std::size_t k, class T, class B>
MG_HD MG_INLINE void store_gradient(const B& b, const nd_operand& out, std::int64_t off) {
  if constexpr (!std::is_same_v<component_t<k, B>, no_grad>) {
    if (out.data) static_cast<T*>(out.data)[off] = static_cast<T>(component<k>(b));
  }
}

// grads[k][goff[k]] = component k of op.backward(x..., y, g) for the wanted k
template <class Op, class T, std::size_t... k>
MG_HD MG_INLINE void backward_element(const Op& op, const nd_operand* in, const std::int64_t* off,
                                      const nd_operand& y, std::int64_t off_y, T g,
                                      const nd_operand* grads, const std::int64_t* goff,
                                      std::index_sequence<k...>) {
  using R = forward_result_t<Op, T>;
  const auto b = op.backward(saved_element<saves_inputs_v<Op>, T>(in[k], off[k])...,
                             saved_element<saves_output_v<Op>, R>(y, off_y), g);
  (store_gradient<k, T>(b, grads[k], goff[k]), ...);
}

// The larger (Max) or smaller of a and b, NaN winning as in torch: every backend's max and min.
template <bool Max, class A>
MG_HD MG_INLINE A pick_extreme(A a, A b) {
  if (a != a) return a;
  if (b != b) return b;
  return (Max ? b > a : b < a) ? b : a;
}

// Merges neighbouring dimensions that every operand walks as one (a contiguous tensor becomes
// rank 1) and drops extent-1 dimensions, so that kernels compute fewer index divisions.
inline void coalesce(nd_space& s, nd_operand* const* ops, std::size_t count) {
  int r = 0;
  for (int d = 0; d < s.rank; ++d) {
    if (s.extents[d] == 1) continue;
    bool merge = r > 0;
    for (std::size_t k = 0; k < count && merge; ++k)
      merge = ops[k]->strides[r - 1] == ops[k]->strides[d] * s.extents[d];
    if (merge) {
      s.extents[r - 1] *= s.extents[d];
      for (std::size_t k = 0; k < count; ++k) ops[k]->strides[r - 1] = ops[k]->strides[d];
    } else {
      s.extents[r] = s.extents[d];
      for (std::size_t k = 0; k < count; ++k) ops[k]->strides[r] = ops[k]->strides[d];
      ++r;
    }
  }
  s.rank = r;
}

}  // namespace mg::detail
