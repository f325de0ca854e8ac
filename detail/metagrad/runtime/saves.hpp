// Note [What a node saves]: a node saves only what the gradients it must compute read, as
// torch's do: `x * c` with only x requiring grad saves c, not x. For an elementwise op this is
// read off its backward at compile time, by tracing it with the static engine's symbolic leaves
// (gradient_reads); other ops save what their `saves` declares. A value not saved reaches
// backward as a placeholder (a 0-d one) in the gradients nobody wants.
//
// Also the small helpers of saving: a number as a 0-d tensor, a storage without elements (a
// shape-only save), a copy, a tensor's metadata.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include <metagrad/backend/tensor_kernels.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/core/tensor_impl.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/runtime/graph.hpp>

namespace mg::detail {

inline impl_ptr number_tensor(double v, mg::dtype d, mg::device dev) {
  auto t = fill_kernel({}, v, d, dev);
  t->wrapped_number = true;
  return t;
}

inline std::shared_ptr<storage> empty_storage(mg::dtype d, mg::device dev) {
  if (dev.index() != 0) return allocate(0, d, dev);  // no bytes: only the object is made
  static const auto all = [] {
    std::array<std::shared_ptr<storage>, 8> r;
    for (int k = 0; k < 8; ++k)
      r[k] = allocate(0, static_cast<mg::dtype>(k % 4),
                      mg::device{static_cast<mg::device_type>(k / 4)});
    return r;
  }();
  return all[static_cast<int>(d) + 4 * static_cast<int>(dev.type())];
}

inline impl_ptr copy_of(const tensor_impl& t) { return copy_kernel(t, t.dtype(), t.shape); }

inline tensor_meta meta_of(const tensor_impl& t) { return {t.shape, t.dtype(), t.device()}; }

// ---- Note [What a node saves] -------------------------------------------------------------------

template <bool Saved, std::size_t I>
using traced_arg_t = std::conditional_t<Saved, arg<I>, not_saved>;

template <class Op, std::size_t N, std::size_t... I>
auto traced_backward(std::index_sequence<I...>)
    -> decltype(std::declval<const Op&>().backward(traced_arg_t<saves_inputs_v<Op>, I>{}...,
                                                   traced_arg_t<saves_output_v<Op>, N>{},
                                                   arg<N + 1>{}));

// An op whose struct holds indices that torch saves as a tensor (`static constexpr bool
// saves_indices = true`, index_select): what it saves is freed with the graph, so that a second
// backward without retain_graph is refused as torch refuses it.
template <class Op>
concept keeps_indices = requires {
  requires Op::saves_indices;
};

// Ops whose backward is not traced (not elementwise) may declare what each gradient reads:
// `static constexpr std::array<std::uint32_t, N> gradient_reads` (bit j < N: input j, bit N: the
// output). A value that no wanted gradient reads is then saved as its shape only, and the backward
// skips the gradients that read it (detail::gradient_reading).
template <class Op>
concept declares_gradient_reads = requires {
  Op::gradient_reads;
};

// Bit J set: the backward expression E reads argument J. (A function, not a lambda nested in the
// pack expansion over K below: nvcc's front end rejects a nested lambda that names an enclosing
// pack, "parameter pack K was referenced but not expanded".)
template <class E, std::size_t... J>
constexpr std::uint32_t reads_mask(std::index_sequence<J...>) {
  return ((reads_arg_v<J, E> ? 1u << J : 0u) | ... | 0u);
}

// For each input k: a mask of the saved values (inputs 0..N-1, output N) its gradient reads.
template <class Op, std::size_t N>
constexpr std::array<std::uint32_t, N> gradient_reads() {
  std::array<std::uint32_t, N> r{};
  if constexpr (declares_gradient_reads<Op>) {
    for (std::size_t k = 0; k < N; ++k) r[k] = Op::gradient_reads[k];
  } else if constexpr (!is_elementwise<Op>()) {
    r.fill(~0u);
  } else {
    using R = decltype(traced_backward<Op, N>(std::make_index_sequence<N>{}));
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      ((r[K] = reads_mask<component_t<K, R>>(std::make_index_sequence<N + 1>{})), ...);
    }
    (std::make_index_sequence<N>{});
  }
  return r;
}

}  // namespace mg::detail
