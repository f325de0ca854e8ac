// The element loop of the static engine on arrays: one sweep of an elementwise expression per
// SIMD pack (then a scalar tail), forward and, optionally, reverse. It evaluates a region
// (Note [Regions] in xt/region.hpp) and is the loop of the fused paths (xt/fused_paths.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/core/config.hpp>
#include <metagrad/core/simd.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/static/sweep.hpp>

namespace mg::detail {

// The element loop. A source is a number (the same for every element) or a pointer to n
// contiguous elements; a sink receives one value per element.

template <class V, class S>
MG_INLINE V load_element(const S& s, std::size_t i) {
  if constexpr (std::is_pointer_v<S>) {
    if constexpr (std::is_arithmetic_v<V>) {
      return s[i];
    } else {
      return V::load(s + i);
    }
  } else {
    return V(s);
  }
}

struct no_sink {
  template <class V>
  MG_INLINE void put(std::size_t, const V&) {}
  MG_INLINE void flush() {}
};

template <class T>
struct store_sink {
  T* p;
  MG_INLINE void put(std::size_t i, const T& v) { p[i] = v; }
  MG_INLINE void put(std::size_t i, const pack<T>& v) { v.store(p + i); }
  MG_INLINE void flush() {}
};

// Note [Blocked sums]: a pack accumulates at most `loop_block` values per lane; then the block's
// total goes into a double. A float sum over 1e7 elements was 1.2e-3 off with one running pack;
// blocked, it is as accurate as the elements themselves, at the cost of one horizontal add per
// block.
template <class T>
struct sum_sink {
  pack<T> acc{T(0)};
  double total_ = 0;
  MG_INLINE void put(std::size_t, const T& v) { total_ += static_cast<double>(v); }
  MG_INLINE void put(std::size_t, const pack<T>& v) { acc += v; }
  MG_INLINE void flush() {
    total_ += static_cast<double>(acc.reduce_add());
    acc = pack<T>(T(0));
  }
  T total() const { return static_cast<T>(total_ + static_cast<double>(acc.reduce_add())); }
};

// The value sink of a fused product: packs multiply within a block, the block's product goes
// into a double.
template <class T>
struct prod_sink {
  pack<T> acc{T(1)};
  double total_ = 1;
  MG_INLINE void put(std::size_t, const T& v) { total_ *= static_cast<double>(v); }
  MG_INLINE void put(std::size_t, const pack<T>& v) { acc = acc * v; }
  MG_INLINE void flush() {
    total_ *= static_cast<double>(acc.reduce_mul());
    acc = pack<T>(T(1));
  }
  T total() const { return static_cast<T>(total_ * static_cast<double>(acc.reduce_mul())); }
};

// The seed of a fused product's backward at element i: d prod / d v_i = prod / v_i, from the
// element's own value v_i (no v_i is zero: a product with zeros takes the general path).
template <class T>
struct quotient_seed {
  T product;
};
template <class V, class S>
MG_INLINE V seed_at(const S& s, std::size_t i, const V& value) {
  if constexpr (requires { s.product; }) {
    return V(s.product) / value;
  } else {
    return load_element<V>(s, i);
  }
}

// Packs per block of the element loop. See Note [Blocked sums].
inline constexpr std::size_t loop_block = 64;

// Do all ops of an expression run on SIMD packs (none says simd = false)?
template <class E>
inline constexpr bool simd_tree_v = true;
template <class Op, class... A>
inline constexpr bool simd_tree_v<node<Op, A...>> = simd_enabled<Op>() && (simd_tree_v<A> && ...);

// Runs the sweep of `inner` (elementwise, over arg<0..K-1>) on elements [0, n) of the sources:
// SIMD packs, then a scalar tail. The value goes to `value`; with Backward, the reverse sweep
// runs with the seed's element, and the gradient of arg<I_j> goes to grads' sink j.
// The seed and the sinks are copied into locals: a pack accumulator, a sink's pointer or the seed
// reached through a reference would be reloaded after every store (a store of T may alias it),
// and the accumulator's chain would then run through memory (3x slower on sum(x)). Copying the
// sources too measured no better.
template <class T, bool Backward, std::size_t... I, class Inner, class Srcs, class Seed,
          class VSink, class GSinks>
MG_FLATTEN void element_loop(std::index_sequence<I...>, const Inner& inner, const Srcs& srcs,
                             std::size_t n, const Seed& seed_in, VSink& value_out,
                             GSinks& gsinks_out) {
  constexpr std::size_t K = std::tuple_size_v<Srcs>;
  const Seed seed = seed_in;
  const auto body = [&]<class V>(std::type_identity<V>, std::size_t i, VSink& value,
                                 GSinks& gsinks) {
    const auto a = [&]<std::size_t... k>(std::index_sequence<k...>) {
      return tuple<std::conditional_t<k == k, V, void>...>{
          {load_element<V>(std::get<k>(srcs), i)}...};
    }
    (std::make_index_sequence<K>{});
    sweep<Inner, decltype(a), plain_policy, V, wanted_args<I...>> s(inner, a);
    s.forward();
    value.put(i, V(s.result()));
    if constexpr (Backward) {
      const V g = seed_at<V>(seed, i, V(s.result()));
      s.backward(g);
      [&]<std::size_t... j>(std::index_sequence<j...>) {
        (std::get<j>(gsinks).put(i, V(s.template gradient<I>(g, V(T(0))))), ...);
      }
      (std::make_index_sequence<sizeof...(I)>{});
    }
  };
  using P = pack<T>;
  std::size_t i = 0;
  VSink value = value_out;
  GSinks gsinks = gsinks_out;
  if constexpr (simd_tree_v<Inner>) {
    while (i + P::size <= n) {
      const std::size_t packs = std::min((n - i) / P::size, loop_block);
      for (std::size_t j = 0; j < packs; ++j, i += P::size)
        body(std::type_identity<P>{}, i, value, gsinks);
      value.flush();
      std::apply([](auto&... s) { (s.flush(), ...); }, gsinks);
    }
  }
  for (; i < n; ++i) body(std::type_identity<T>{}, i, value, gsinks);
  value_out = value;
  gsinks_out = gsinks;
}

}  // namespace mg::detail
