// The element loop of the static engine on arrays: one sweep of an elementwise expression per
// SIMD pack (then a scalar tail), forward and, optionally, reverse. It evaluates a region
// (Note [Regions] in xt/region.hpp) and is the loop of the fused paths (xt/fused_paths.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

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
  static constexpr bool blocked = false;  // flush() does nothing
  template <class V>
  MG_INLINE void put(std::size_t, const V&) {}
  MG_INLINE void flush() {}
};

template <class T>
struct store_sink {
  static constexpr bool blocked = false;
  T* p;
  MG_INLINE void put(std::size_t i, const T& v) { p[i] = v; }
  MG_INLINE void put(std::size_t i, const pack<T>& v) { v.store(p + i); }
  MG_INLINE void flush() {}
};

template <class S>
inline constexpr bool is_store_sink_v = false;
template <class T>
inline constexpr bool is_store_sink_v<store_sink<T>> = true;

// Note [Blocked sums]: a pack accumulates at most `loop_block` values per lane; then the block's
// total goes into a double. A float sum over 1e7 elements was 1.2e-3 off with one running pack;
// blocked, it is as accurate as the elements themselves, at the cost of one horizontal add per
// block.
template <class T>
struct sum_sink {
  static constexpr bool blocked = true;
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
// into a double (for a product of doubles the blocks change nothing, and there are none).
template <class T>
struct prod_sink {
  static constexpr bool blocked = !std::is_same_v<T, double>;
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
// The seed 1 of a plain sum's backward, as a type: the loop's constant whichever way it is
// called (directly, or row by row through element_rows), so the compiler folds it.
struct unit_seed {};
template <class V, class S>
MG_INLINE V seed_at(const S& s, std::size_t i, const V& value) {
  if constexpr (std::is_same_v<S, unit_seed>) {
    return V(1);
  } else if constexpr (requires { s.product; }) {
    return V(s.product) / value;
  } else {
    return load_element<V>(s, i);
  }
}

// Do all ops of an expression run on SIMD packs (none says simd = false)?
template <class E>
inline constexpr bool simd_tree_v = true;
template <class Op, class... A>
inline constexpr bool simd_tree_v<node<Op, A...>> = simd_enabled<Op>() && (simd_tree_v<A> && ...);

// Runs the sweep of `inner` (elementwise, over arg<0..K-1>) on elements [0, n) of the sources:
// SIMD packs, then a scalar tail. The value goes to `value`; with Backward, the reverse sweep
// runs with the seed's element, and the gradient of arg<I_j> goes to grads' sink j.
// The expression, the sources, the seed and the sinks are copied into locals: a pack accumulator,
// a pointer, a constant of the expression or the seed reached through a reference would be
// reloaded after every store (a store of a pack may alias anything), and the accumulator's chain
// would then run through memory (3x slower on sum(x)); a source pointer reloaded per pack cost
// prod(x)'s backward one instruction in seven. The pack loop counts with one induction variable,
// the element index.
// With a `known` result (a pointer to the values the forward loop stored, not no_result), the
// reverse sweep reads the result from there rather than computing it (Note [A known result] in
// static/sweep.hpp).
struct no_result {};
template <class T, bool Backward, std::size_t... I, class Inner, class Srcs, class Seed,
          class VSink, class GSinks, class Known = no_result>
MG_FLATTEN void element_loop(std::index_sequence<I...>, const Inner& inner_in, const Srcs& srcs_in,
                             std::size_t n, const Seed& seed_in, VSink& value_out,
                             GSinks& gsinks_out, const Known& known_in = {}) {
  constexpr std::size_t K = std::tuple_size_v<Srcs>;
  const Inner inner = inner_in;  // its constants, loaded once
  const Srcs srcs = srcs_in;
  const Known known = known_in;
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
    if constexpr (!std::is_same_v<Known, no_result>) s.set_result(load_element<V>(known, i));
    value.put(i, V(s.result()));
    if constexpr (Backward) {
      const V g = seed_at<V>(seed, i, V(s.result()));
      s.backward(g);
      [&]<std::size_t... j>(std::index_sequence<j...>) {
        (
            [&] {
              // a sum of zeros is zero: an accumulator the loop never reaches takes no adds
              if constexpr (reads_arg_v<I, Inner> ||
                            is_store_sink_v<std::remove_cvref_t<decltype(std::get<j>(gsinks))>>)
                std::get<j>(gsinks).put(i, V(s.template gradient<I>(g, V(T(0)))));
            }(),
            ...);
      }
      (std::make_index_sequence<sizeof...(I)>{});
    }
  };
  using P = pack<T>;
  std::size_t i = 0;
  VSink value = value_out;
  GSinks gsinks = gsinks_out;
  if constexpr (simd_tree_v<Inner>) {
    const std::size_t packed = n - n % P::size;
    // blocks only where a sink sums (Note [Blocked sums])
    constexpr bool blocked =
        VSink::blocked || []<class... S>(std::type_identity<std::tuple<S...>>) {
          return (S::blocked || ...);
        }(std::type_identity<GSinks>{});
    while (i < packed) {
      const std::size_t end = blocked ? std::min(packed, i + loop_block * P::size) : packed;
      for (; i < end; i += P::size) body(std::type_identity<P>{}, i, value, gsinks);
      value.flush();
      std::apply([](auto&... s) { (s.flush(), ...); }, gsinks);
    }
  }
  for (; i < n; ++i) body(std::type_identity<T>{}, i, value, gsinks);
  value_out = value;
  gsinks_out = gsinks;
}

// Note [Periodic sources]: an array broadcast along leading dimensions (a bias row [n] in a batch
// [m, n]) repeats every q elements of the loop. Rather than copied to the loop's shape, it is
// read in place: the loop runs row by row, rows of the smallest period P, each source at its
// offset in the row (a periodic one's wraps at its period) and each sink likewise. Its gradient
// is summed per column as the rows go: each row's gradient is stored into a scratch row and
// added into its block's sums, and every loop_block rows those go into double accumulators (as
// in Note [Blocked sums]: a float bias gradient over a million rows is as accurate as over 64),
// written to the result at the end. The rows reuse the loop of the whole array, the same
// instantiation, so this costs no code where nothing repeats.
template <class S>
MG_INLINE S shifted(const S& s, std::size_t off) {
  if constexpr (std::is_pointer_v<S>) {
    return s + off;
  } else if constexpr (requires { s.p; }) {  // store_sink
    return S{s.p + off};
  } else {
    return s;  // a number, a seed of its own, an accumulator
  }
}
template <class S>
MG_INLINE void keep_total(S& whole, const S& row) {
  if constexpr (!is_store_sink_v<S>) whole = row;  // accumulators carry over to the next row
}

// The column sums of the store sinks that repeat (Note [Periodic sources]): for sink j, a scratch
// row the loop writes, the sums of a block of rows in T, and their total in double. As in Note
// [Blocked sums], a block of at most loop_block rows is summed in T, then added into the doubles.
template <class T, std::size_t J>
struct column_sums {
  std::array<T*, J> row{}, block{};
  std::array<double*, J> total{};
  std::vector<T> scratch;
  std::vector<double> totals;
  column_sums(const std::array<bool, J>& repeats, const std::array<std::size_t, J>& period,
              std::size_t width) {
    std::size_t r = 0, q = 0;
    for (std::size_t j = 0; j < J; ++j)
      if (repeats[j]) r += width + period[j], q += period[j];
    scratch.assign(r, T(0));
    totals.assign(q, 0.0);
    r = q = 0;
    for (std::size_t j = 0; j < J; ++j)
      if (repeats[j]) {
        row[j] = scratch.data() + r, block[j] = row[j] + width, total[j] = totals.data() + q;
        r += width + period[j], q += period[j];
      }
  }
  // the row just written, into the block's sums at offset `off`
  void add(std::size_t j, std::size_t width, std::size_t off) {
    using P = pack<T>;
    T* b = block[j] + off;
    const T* r = row[j];
    std::size_t i = 0;
    for (; i + P::size <= width; i += P::size) (P::load(b + i) + P::load(r + i)).store(b + i);
    for (; i < width; ++i) b[i] += r[i];
  }
  void flush(std::size_t j, std::size_t q) {
    for (std::size_t i = 0; i < q; ++i) {
      total[j][i] += static_cast<double>(block[j][i]);
      block[j][i] = T(0);
    }
  }
  void write(std::size_t j, std::size_t q, T* out) {
    flush(j, q);
    for (std::size_t i = 0; i < q; ++i) out[i] = static_cast<T>(total[j][i]);
  }
};

// element_loop over n elements where source k repeats every src_period[k] elements (0: never)
// and gradient sink j every sink_period[j] (a store sink, whose rows are then summed). See Note
// [Periodic sources].
template <class T, bool Backward, std::size_t... I, class Inner, class Srcs, class Seed,
          class VSink, class GSinks, class Known = no_result>
void element_rows(std::index_sequence<I...> ids, const Inner& inner, const Srcs& srcs,
                  const std::array<std::size_t, std::tuple_size_v<Srcs>>& src_period,
                  const std::array<std::size_t, sizeof...(I)>& sink_period, std::size_t n,
                  const Seed& seed, VSink& value, GSinks& gsinks, const Known& known = {}) {
  constexpr std::size_t K = std::tuple_size_v<Srcs>, J = sizeof...(I);
  std::size_t row = n;
  for (std::size_t q : src_period)
    if (q != 0) row = std::min(row, q);
  if (row == n || row == 0) {
    element_loop<T, Backward>(ids, inner, srcs, n, seed, value, gsinks, known);
    return;
  }
  constexpr std::array<bool, J> stores = [] {
    std::array<bool, J> s{};
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      ((s[j] = is_store_sink_v<std::tuple_element_t<j, GSinks>>), ...);
    }
    (std::make_index_sequence<J>{});
    return s;
  }();
  std::array<bool, J> repeats{};
  for (std::size_t j = 0; j < J; ++j) repeats[j] = stores[j] && sink_period[j] != 0;
  column_sums<T, J> columns(repeats, sink_period, row);
  std::array<std::size_t, K> src_off{};
  std::array<std::size_t, J> sink_off{};
  const auto advance = [row](auto& off, const auto& period) {
    for (std::size_t k = 0; k < off.size(); ++k)
      if (period[k] != 0 && (off[k] += row) == period[k]) off[k] = 0;
  };
  const auto sink_at = [&]<std::size_t j>(std::integral_constant<std::size_t, j>, std::size_t e) {
    const auto& s = std::get<j>(gsinks);
    using S = std::remove_cvref_t<decltype(s)>;
    if constexpr (stores[j]) {
      if (repeats[j]) return S{columns.row[j]};
    }
    return shifted(s, e);
  };
  for (std::size_t e = 0, r = 1; e < n; e += row, ++r) {
    const Srcs s = [&]<std::size_t... k>(std::index_sequence<k...>) {
      return Srcs{shifted(std::get<k>(srcs), src_period[k] != 0 ? src_off[k] : e)...};
    }
    (std::make_index_sequence<K>{});
    VSink v = shifted(value, e);
    GSinks g = [&]<std::size_t... j>(std::index_sequence<j...>) {
      return GSinks{sink_at(std::integral_constant<std::size_t, j>{}, e)...};
    }
    (std::make_index_sequence<J>{});
    element_loop<T, Backward>(ids, inner, s, row, shifted(seed, e), v, g, shifted(known, e));
    keep_total(value, v);
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      (keep_total(std::get<j>(gsinks), std::get<j>(g)), ...);
    }
    (std::make_index_sequence<J>{});
    for (std::size_t j = 0; j < J; ++j)
      if (repeats[j]) {
        columns.add(j, row, sink_off[j]);
        if (r % loop_block == 0) columns.flush(j, sink_period[j]);
      }
    advance(src_off, src_period);
    advance(sink_off, sink_period);
  }
  [&]<std::size_t... j>(std::index_sequence<j...>) {
    (
        [&] {
          if constexpr (stores[j])
            if (repeats[j]) columns.write(j, sink_period[j], std::get<j>(gsinks).p);
        }(),
        ...);
  }
  (std::make_index_sequence<J>{});
}

}  // namespace mg::detail
