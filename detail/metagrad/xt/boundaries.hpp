// The array evaluator's path for sums with shaped boundaries (Note [Shaped boundaries] in
// xt/fused.hpp): the boundaries' values (matmul, sums along an axis), one fused loop over the
// elementwise rest, then each boundary's backward; the general path when the shapes do not
// allow it.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/core/shape_rules.hpp>
#include <metagrad/core/type_list.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/fused.hpp>
#include <metagrad/xt/fused_paths.hpp>

namespace mg::detail {

struct array_boundaries : array_fused {
 protected:
  // See Note [Shaped boundaries] in xt/fused.hpp: the boundaries, one fused loop, the
  // boundaries' backward; the general path when the shapes do not allow it.
  template <int Form, std::size_t... I, class E, class... A>
  static auto boundaries_or_general(const E& e, const A&... args) {
    using T = std::common_type_t<typename value_of<A>::type...>;
    T value{};
    auto result = make_result<Form, T, I...>(args...);
    auto outs = gradients_of<Form>(result);
    if (!(full_sum(e) && fused_boundaries<I...>(e, value, outs, args...)))
      general_into<I...>(e, value, outs, args...);
    set_value<Form>(result, value);
    return result;
  }
  template <std::size_t... I, class E, class T, class Outs, class... A>
  static bool fused_boundaries(const E& e, T& value, Outs outs, const A&... args) {
    using Args = std::tuple<A...>;
    constexpr std::size_t
        K = sizeof...(A),
        M = list_length<boundary_list_t<std::remove_cvref_t<decltype(child<0>(e))>, Args>>;
    using L = boundary_list_t<std::remove_cvref_t<decltype(child<0>(e))>, Args>;
    const auto e2 = assemble(e.op, boundary_rewrite<Args, K, L>(child<0>(e)));
    using Inner2 = std::remove_cvref_t<decltype(child<0>(e2))>;
    const auto all = std::forward_as_tuple(args...);
    // the arrays the loop reads must all have one shape; where the boundaries' shapes are known
    // before they are computed (matmul), a mismatch costs no product
    constexpr bool reads_arrays = [&]<std::size_t... k>(std::index_sequence<k...>) {
      return ((reads_arg_v<k, Inner2> && XtExpr<std::tuple_element_t<k, Args>>) || ...);
    }
    (std::index_sequence_for<A...>{});
    if constexpr (reads_arrays || M > 1) {
      if (!predicted_shapes_agree<Inner2, L>(all)) return false;
    }
    // the boundaries' values, then: do the arrays the loop reads all have their shape?
    auto values = [&]<std::size_t... m>(std::index_sequence<m...>) {
      return std::tuple{boundary_value<T, typename type_at<m, L>::type>(all)...};
    }
    (std::make_index_sequence<M>{});
    const auto& shape = std::get<0>(values).shape();
    const auto same = [&](const auto& x) { return same_extents(x.shape(), shape); };
    bool ok = std::apply([&](const auto&... v) { return (same(v) && ...); }, values);
    // or a bias row (Note [Periodic sources])
    [&]<std::size_t... k>(std::index_sequence<k...>) {
      (
          [&] {
            if constexpr (reads_arg_v<k, Inner2> && XtExpr<std::tuple_element_t<k, Args>>)
              ok = ok && (same(std::get<k>(all)) ||
                          periodic_in(std::get<k>(all).shape(), shape, pack<T>::size));
          }(),
          ...);
    }
    (std::index_sequence_for<A...>{});
    if (!ok) return false;
    // the loop: value, the gradients of the wanted arguments it reads (positions P of I), and
    // the gradient of each boundary
    auto dvalues = std::apply(
        [](const auto&... v) { return std::tuple{work_array<T>::from_shape(v.shape())...}; },
        values);
    constexpr std::array<std::size_t, sizeof...(I) + 1> ids{I..., 0};
    constexpr auto read = [] {
      std::array<bool, sizeof...(I) + 1> r{reads_arg_v<I, Inner2>..., false};
      return r;
    }();
    [&]<std::size_t... m>(std::index_sequence<m...>) {
      [&]<std::size_t... P>(std::index_sequence<P...>) {
        auto loop_outs = std::tie(std::get<P>(outs)..., std::get<m>(dvalues)...);
        std::apply(
            [&](const auto&... v) {
              fused_into<ids[P]..., K + m...>(e2, value, loop_outs, args..., v...);
            },
            values);
      }
      (positions_where<read, sizeof...(I)>());
    }
    (std::make_index_sequence<M>{});
    // each boundary's backward, into the outputs; what neither reaches is 0
    std::array<bool, sizeof...(I) + 1> written = read;
    [&]<std::size_t... m>(std::index_sequence<m...>) {
      (boundary_backward<T, typename type_at<m, L>::type, I...>(
           all, std::get<m>(values), std::get<m>(dvalues), outs, written),
       ...);
    }
    (std::make_index_sequence<M>{});
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      (
          [&] {
            if (!written[j]) to_argument<T>(std::get<j>(outs), unused{}, std::get<ids[j]>(all));
          }(),
          ...);
    }
    (std::index_sequence_for<decltype(I)...>{});
    return true;
  }
  // Do the arrays the loop reads and the boundaries (whose shapes can be told beforehand) have
  // one shape? True when a boundary's shape cannot be told: the values decide.
  template <class Inner2, class L, class All>
  static bool predicted_shapes_agree(const All& all) {
    constexpr std::size_t M = list_length<L>;
    std::array<shape_t, M> s;
    bool known = true;
    [&]<std::size_t... m>(std::index_sequence<m...>) {
      (
          [&] {
            using BA = boundary_args<typename type_at<m, L>::type>;
            if constexpr (std::is_same_v<typename BA::op, matmul_op>) {
              s[m] = plan_matmul(shape_of(std::get<BA::index[0]>(all)),
                                 shape_of(std::get<BA::index[1]>(all)), "matmul")
                         .out;
            } else {
              known = false;
            }
          }(),
          ...);
    }
    (std::make_index_sequence<M>{});
    if (!known) return true;
    bool same = true;
    for (const auto& x : s) same = same && x == s[0];
    [&]<std::size_t... k>(std::index_sequence<k...>) {
      (
          [&] {
            using Ak = std::remove_cvref_t<std::tuple_element_t<k, All>>;
            if constexpr (reads_arg_v<k, Inner2> && XtExpr<Ak>) {
              const auto& xs = std::get<k>(all).shape();
              same = same && (std::equal(xs.begin(), xs.end(), s[0].begin(), s[0].end(),
                                         [](std::size_t a, std::int64_t b) {
                                           return static_cast<std::int64_t>(a) == b;
                                         }) ||
                              periodic_in(xs, s[0], 1));
            }
          }(),
          ...);
    }
    (std::make_index_sequence<std::tuple_size_v<All>>{});
    return same;
  }
  // The positions j < N where flags[j], as an index sequence.
  template <auto flags, std::size_t N>
  static constexpr auto positions_where() {
    constexpr auto pos = [] {
      std::pair<std::array<std::size_t, N + 1>, std::size_t> p{};
      for (std::size_t j = 0; j < N; ++j)
        if (flags[j]) p.first[p.second++] = j;
      return p;
    }();
    return [&]<std::size_t... q>(std::index_sequence<q...>) {
      return std::index_sequence<pos.first[q]...>{};
    }
    (std::make_index_sequence<pos.second>{});
  }
  // A boundary's value, from the arguments (a work array).
  template <class T, class B, class All>
  static auto boundary_value(const All& all) {
    using BA = boundary_args<B>;
    return [&]<std::size_t... c>(std::index_sequence<c...>) {
      return work_array<T>(call(typename BA::op{}, std::get<BA::index[c]>(all)...));
    }
    (std::make_index_sequence<BA::index.size()>{});
  }
  // The backward of boundary B at its value v and gradient g, for the wanted arguments among
  // its own (Note [Wanted gradients]: a value only unwanted gradients read is a stand-in); each
  // gradient goes into every output of its argument, written or added.
  template <class T, class B, std::size_t... I, class All, class V, class Outs>
  static void boundary_backward(const All& all, const V& v, const V& g, Outs& outs,
                                std::array<bool, sizeof...(I) + 1>& written) {
    using BA = boundary_args<B>;
    using Op = typename BA::op;
    constexpr std::size_t n = BA::index.size();
    constexpr bool any = [] {
      for (bool w : wanted_children<B, I...>())
        if (w) return true;
      return false;
    }();
    constexpr std::uint32_t reads = read_mask_for<Op>(wanted_children<B, I...>());
    if constexpr (any && std::is_same_v<Op, matmul_op>) {
      if (matmul_backward_into<T, B, I...>(all, g, outs, written)) return;
    }
    if constexpr (any) {
      const auto b = [&]<std::size_t... c>(std::index_sequence<c...>) {
        return Op{}.backward(pass_as<((reads >> c) & 1u) != 0>(std::get<BA::index[c]>(all))...,
                             pass_as<((reads >> n) & 1u) != 0>(v), g);
      }
      (std::make_index_sequence<n>{});
      [&]<std::size_t... c>(std::index_sequence<c...>) {
        (add_component<T, c, B, I...>(b, all, outs, written), ...);
      }
      (std::make_index_sequence<n>{});
    }
  }
  // Note [Gradients written in place]: the backward of a product of two matrices, or of a
  // matrix and a vector, whose wanted gradients each go to one result not written yet, a
  // row-major array of T: each gemm, gemv or outer product (G B^T and A^T G for two matrices)
  // writes into its result, as a hand-written gradient does, rather than into an array that is
  // then copied there. False, having written nothing, in any other case.
  template <class T, class B, std::size_t... I, class All, class V, class Outs>
  static bool matmul_backward_into(const All& all, const V& g, Outs& outs,
                                   std::array<bool, sizeof...(I) + 1>& written) {
    using BA = boundary_args<B>;
    constexpr std::size_t ja = BA::index[0], jb = BA::index[1];
    constexpr auto wanted = wanted_children<B, I...>();
    constexpr std::array<std::size_t, sizeof...(I) + 1> ids{I..., 0};
    // the position among I... of each wanted operand's result: it must be asked for once
    constexpr auto place = [&] {
      std::array<std::size_t, 2> at{sizeof...(I), sizeof...(I)};
      bool once = ja != jb;
      for (std::size_t c = 0; c < 2; ++c)
        for (std::size_t j = 0; j < sizeof...(I); ++j)
          if (wanted[c] && ids[j] == BA::index[c]) {
            once = once && at[c] == sizeof...(I);
            at[c] = j;
          }
      return std::pair{at, once};
    }();
    if constexpr (!place.second) {
      return false;
    } else {
      const auto& a = std::get<ja>(all);
      const auto& b = std::get<jb>(all);
      const std::size_t ra = a.dimension(), rb = b.dimension();
      if (ra + rb < 3 || ra > 2 || rb > 2) return false;
      constexpr auto at = place.first;
      bool fits = true;
      if constexpr (wanted[0]) fits = writable<T>(std::get<at[0]>(outs), written[at[0]]);
      if constexpr (wanted[1]) fits = fits && writable<T>(std::get<at[1]>(outs), written[at[1]]);
      if (!fits) return false;
      using A = algebra<V>;
      // two matrices: G B^T and A^T G; A x: G x^T and A^T G (as G A); x B: B G and x G^T
      if constexpr (wanted[0]) {
        T* out = std::get<at[0]>(outs).data();
        if (rb == 1) {
          A::outer_into(g, b, out);
        } else if (ra == 1) {
          A::matvec_into(b, g, out);
        } else {
          A::matmul_into(g, A::transpose_view(b), out);
        }
        written[at[0]] = true;
      }
      if constexpr (wanted[1]) {
        T* out = std::get<at[1]>(outs).data();
        if (ra == 1) {
          A::outer_into(a, g, out);
        } else if (rb == 1) {
          A::matvec_into(g, a, out);
        } else {
          A::matmul_into(A::transpose_view(a), g, out);
        }
        written[at[1]] = true;
      }
      return true;
    }
  }
  // Is result o, not written yet, a row-major array of T that a gemm can write into?
  template <class T, class O>
  static bool writable([[maybe_unused]] const O& o, [[maybe_unused]] bool was_written) {
    if constexpr (XtStridedOf<O, T> && requires { O::static_layout; }) {
      return !was_written && O::static_layout == xt::layout_type::row_major;
    } else {
      return false;
    }
  }
  // Component c of boundary B's backward b into the outputs of its argument, if wanted.
  template <class T, std::size_t c, class B, std::size_t... I, class Bwd, class All, class Outs>
  static void add_component(const Bwd& b, const All& all, Outs& outs,
                            std::array<bool, sizeof...(I) + 1>& written) {
    if constexpr (wanted_children<B, I...>()[c]) {
      constexpr std::size_t J = boundary_args<B>::index[c];
      constexpr std::array<std::size_t, sizeof...(I) + 1> ids{I..., 0};
      [&]<std::size_t... j>(std::index_sequence<j...>) {
        (
            [&] {
              if constexpr (ids[j] == J) {
                add_gradient<T>(std::get<j>(outs), component<c>(b), std::get<J>(all), written[j]);
                written[j] = true;
              }
            }(),
            ...);
      }
      (std::make_index_sequence<sizeof...(I)>{});
    }
  }
  template <class B, std::size_t... I>
  static constexpr auto wanted_children() {
    using BA = boundary_args<B>;
    std::array<bool, BA::index.size()> w{};
    for (std::size_t c = 0; c < w.size(); ++c) w[c] = ((BA::index[c] == I) || ...);
    return w;
  }
  template <bool Read, class X>
  static decltype(auto) pass_as(const X& x) {
    if constexpr (Read) {
      return (x);
    } else {
      return xt_policy::unread(x);
    }
  }
};

}  // namespace mg::detail
