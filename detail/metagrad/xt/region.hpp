// Elementwise regions of the static engine on xtensor arrays; the loop that evaluates them is
// xt/element_loop.hpp.
//
// Note [Regions]: before the general evaluator runs, regionize() rewrites the traced expression:
// every maximal subtree of elementwise ops becomes ONE node, node<region_op<Inner, K>, In...>.
// Its inputs In are the subtree's boundary: leaves, and the outputs of shaped ops (sum along an
// axis, matmul); constants stay inside. Inner is the subtree itself with input k replaced by
// arg<k>. So `tanh(matmul(x, w) + b) * 0.5` is matmul, then one region over (matmul, b):
//   - forward: one SIMD loop computes the region's value (numpy broadcasting between inputs of
//     different shapes, which are copied to the common shape first);
//   - backward: one loop recomputes the values in registers and writes the gradient of every
//     input in the common shape; the general evaluator then sums each back to its input's shape.
// No intermediate of the region is ever materialised. A boundary subtree without run-time state
// that occurs several times (x in sin(x) * x) is one input, read once per element; that mirrors
// Note [Slot identity]. Like the planner (Note [Planning on the DAG]), the rewrite handles a
// stateless subtree by its type once, however often it occurs, and the region's shape is worked
// out slot by slot over the inner expression's plan. Because elementwise op bodies only ever run
// on numbers and packs, Note [Lazy locals] concerns only custom ops that declare themselves not
// elementwise.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xtensor.hpp>

#include <metagrad/concepts.hpp>
#include <metagrad/core/broadcast.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/core/simd.hpp>
#include <metagrad/core/type_list.hpp>
#include <metagrad/core/type_name.hpp>
#include <metagrad/error.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/static/plan.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/element_loop.hpp>
#include <metagrad/xt/pool.hpp>

namespace mg::detail {

// ---------------------------------------------------------------------------------------------
// Shapes inside a region: numpy broadcasting, checked op by op so that an error names the op.

// The region's shape from its inputs', slot by slot over the inner expression's plan (each distinct
// subexpression once), broadcasting as numpy does; an error names the op.
template <class Inner, std::size_t s, std::size_t N, std::size_t K>
dims slot_dims(const std::array<dims, N>& r, const std::array<dims, K>& in) {
  using X = slot_expr_t<Inner, s>;
  if constexpr (is_arg_v<X>) {
    return in[arg_index_v<X>];
  } else if constexpr (is_cst_v<X>) {
    return {};
  } else {
    using Op = std::remove_cvref_t<decltype(std::declval<const X&>().op)>;
    dims d = r[plan_v<Inner>.child[s][0]];
    for (std::size_t k = 1; k < plan_v<Inner>.nchild[s]; ++k)
      d = broadcast_extents(d, r[plan_v<Inner>.child[s][k]], op_name<Op>());
    return d;
  }
}
template <class Inner, std::size_t K>
dims region_dims(const Inner&, const std::array<dims, K>& in, bool& uniform) {
  // the common case first: the array inputs have one shape (numbers aside), which is then the
  // region's, and no op can fail to broadcast
  const dims* common = nullptr;
  bool one_shape = true;
  for (const dims& d : in) {
    if (d.empty()) continue;
    if (!common) {
      common = &d;
    } else if (*common != d) {
      one_shape = false;
      break;
    }
  }
  uniform = one_shape;
  if (one_shape) return common ? *common : dims{};
  constexpr std::size_t N = plan_v<Inner>.nslots;
  std::array<dims, N> r;
  [&]<std::size_t... s>(std::index_sequence<s...>) { ((r[s] = slot_dims<Inner, s>(r, in)), ...); }
  (std::make_index_sequence<N>{});
  return std::move(r[N - 1]);
}

template <class X>
dims dims_of(const X& x) {
  if constexpr (XtExpr<X>) {
    return dims(x.shape().begin(), x.shape().end());
  } else {
    return {};
  }
}

// Where the loop reads input x: a number, or n contiguous elements of T in the region's shape
// (read in place when x already is that, else copied once into `copy`, a copy_for<T, X>).
template <class T, class X>
using copy_for = std::conditional_t<XtExpr<X>, std::optional<work_array<T>>, char>;
template <class T, class X, class Shape, class C>
auto region_source(const X& x, const Shape& shape, C& copy) {
  if constexpr (!XtExpr<X>) {
    return static_cast<T>(x);
  } else {
    if constexpr (XtStridedOf<X, T>) {
      if (x.layout() == xt::layout_type::row_major && same_extents(shape, x.shape()))
        return static_cast<const T*>(x.data() + x.data_offset());
    }
    copy = broadcast_copy<T>(x, dims(shape.begin(), shape.end()));
    return static_cast<const T*>(copy->data());
  }
}

// Do extents xs repeat along the leading dimensions of `shape` (they are its last ones, and fewer),
// in periods of at least `least` elements? See Note [Periodic sources] in xt/element_loop.hpp.
template <class XS, class S>
bool periodic_in(const XS& xs, const S& shape, std::size_t least) {
  if (xs.size() >= shape.size()) return false;
  const std::size_t lead = shape.size() - xs.size();
  std::size_t q = 1;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (static_cast<std::size_t>(xs[i]) != static_cast<std::size_t>(shape[lead + i])) return false;
    q *= static_cast<std::size_t>(xs[i]);
  }
  return q >= least;
}

// A source as above, or read in place where x repeats along the region's leading dimensions (a
// bias row of a batch): then `period` is its size (Note [Periodic sources]).
template <class T, class X, class Shape, class C>
auto region_source(const X& x, const Shape& shape, C& copy, std::size_t& period) {
  if constexpr (XtStridedOf<X, T>) {
    if (x.layout() == xt::layout_type::row_major && periodic_in(x.shape(), shape, pack<T>::size)) {
      period = x.size();
      return static_cast<const T*>(x.data() + x.data_offset());
    }
  }
  return region_source<T>(x, shape, copy);
}

template <class X>
struct value_type_of {
  using type = X;  // a number
};

// The element type a region computes in: the common type of its array inputs (numbers do not
// promote, as on tensors), double when all are numbers; bool arrays (comparison results) count
// as double.
template <class A, class B>
struct region_join {
  using type = std::common_type_t<A, B>;
};
template <class B>
struct region_join<void, B> {
  using type = B;
};
template <class A>
struct region_join<A, void> {
  using type = A;
};
template <>
struct region_join<void, void> {
  using type = void;
};
template <class... A>
struct region_fold {
  using type = void;
};
template <class A, class... R>
struct region_fold<A, R...> {
  using type = typename region_join<A, typename region_fold<R...>::type>::type;
};
template <class A>
using region_array_t = std::conditional_t<XtExpr<A>, typename value_type_of<A>::type, void>;
template <class... X>
struct region_value {
  using found = typename region_fold<region_array_t<X>...>::type;
  using type = std::conditional_t<std::is_floating_point_v<found>, found, double>;
};
template <XtExpr X>
struct value_type_of<X> {
  using type = std::remove_cv_t<xt_value_t<X>>;
};

/// A maximal elementwise subtree as one op of the general evaluator. See Note [Regions].
template <class Inner, std::size_t K>
struct region_op {
  static constexpr const char* name = "elementwise";
  // it materialises arrays: the evaluators apply it as a whole, never per element
  static constexpr bool elementwise = false;
  static constexpr bool is_stateless = stateless_v<Inner>;  // then region_op{} is the region
  Inner inner;

  template <class... X>
  auto forward(const X&... x) const {
    static_assert(sizeof...(X) == K);
    using T = typename region_value<X...>::type;
    if constexpr (!(XtExpr<X> || ...)) {
      return scalar_sweep<T, false>(T(0), x...).first;
    } else {
      bool uniform = false;
      const dims shape = region_dims(inner, std::array<dims, K>{dims_of(x)...}, uniform);
      std::tuple<copy_for<T, X>...> copies;
      work_array<T> out = work_array<T>::from_shape(shape);
      store_sink<T> value{out.data()};
      std::tuple<> none;
      if (uniform) {  // the arrays have one shape: nothing repeats
        const auto srcs = sources<T>(shape, copies, x...);
        element_loop<T, false>(std::index_sequence<>{}, inner, srcs, out.size(), T(0), value, none);
      } else {
        std::array<std::size_t, K> period{};
        const auto srcs = sources<T>(shape, copies, period, x...);
        element_rows<T, false>(std::index_sequence<>{}, inner, srcs, period, {}, out.size(), T(0),
                               value, none);
      }
      return out;
    }
  }

  // backward(x_0, ..., x_{K-1}, y, g): the gradient of every input, in the region's shape (a
  // number input gets the sum over the elements).
  template <class... A>
  auto backward(const A&... a) const {
    static_assert(sizeof...(A) == K + 2);
    return [&]<std::size_t... k>(std::index_sequence<k...>) {
      const auto args = std::forward_as_tuple(a...);
      return backward_of(std::get<K>(args), std::get<K + 1>(args), std::get<k>(args)...);
    }
    (std::make_index_sequence<K>{});
  }

 private:
  template <class T, class C, class... X>
  static auto sources(const dims& shape, C& copies, const X&... x) {
    return [&]<std::size_t... k>(std::index_sequence<k...>) {
      return std::tuple{region_source<T>(x, shape, std::get<k>(copies))...};
    }
    (std::index_sequence_for<X...>{});
  }
  // ... reading those that repeat along the region's leading dimensions in place
  template <class T, class C, class... X>
  static auto sources(const dims& shape, C& copies, std::array<std::size_t, K>& period,
                      const X&... x) {
    return [&]<std::size_t... k>(std::index_sequence<k...>) {
      return std::tuple{region_source<T>(x, shape, std::get<k>(copies), period[k])...};
    }
    (std::index_sequence_for<X...>{});
  }

  // All inputs and the seed are numbers: one scalar sweep; returns the value and the gradients.
  template <class T, bool Backward, class... X>
  auto scalar_sweep(T g, const X&... x) const {
    const tuple<std::conditional_t<true, T, X>...> args{{static_cast<T>(x)}...};
    sweep<Inner, decltype(args), plain_policy, T> s(inner, args);
    s.forward();
    const T v = static_cast<T>(s.result());
    if constexpr (Backward) {
      s.backward(g);
      return [&]<std::size_t... k>(std::index_sequence<k...>) {
        return std::pair{v, grads{static_cast<T>(s.template gradient<k>(g, T(0)))...}};
      }
      (std::index_sequence_for<X...>{});
    } else {
      return std::pair{v, 0};
    }
  }

  // The loop reads the region's value y as its forward stored it (Note [A known result]).
  template <class Y, class G, class... X>
  auto backward_of(const Y& y, const G& g, const X&... x) const {
    using T = typename region_value<X...>::type;
    if constexpr (!XtExpr<G> && !(XtExpr<X> || ...)) {
      return scalar_sweep<T, true>(static_cast<T>(g), x...).second;
    } else {
      bool uniform = false;
      dims shape = region_dims(inner, std::array<dims, K>{dims_of(x)...}, uniform);
      shape = broadcast_extents(shape, dims_of(g), "backward");
      std::tuple<copy_for<T, X>...> copies;
      std::array<std::size_t, K> period{};
      const auto srcs =
          uniform ? sources<T>(shape, copies, x...) : sources<T>(shape, copies, period, x...);
      copy_for<T, G> seed_copy;
      const auto seed = region_source<T>(g, shape, seed_copy);
      std::size_t n = 1;
      for (auto e : shape) n *= e;
      // every input's gradient: an array of the region's shape, of its own for one that repeats
      // (summed per column in the loop), or a sum for a number input
      auto out = [&]<std::size_t... k>(std::index_sequence<k...>) {
        return std::tuple{gradient_holder<T>(x, shape, period[k])...};
      }
      (std::index_sequence_for<X...>{});
      auto sinks = [&]<std::size_t... k>(std::index_sequence<k...>) {
        return std::tuple{sink_of(std::get<k>(out))...};
      }
      (std::index_sequence_for<X...>{});
      no_sink none;
      // the region's value is read where the forward stored it (it has the region's shape)
      copy_for<T, Y> y_copy;
      const auto known = [&] {
        if constexpr (std::is_same_v<Y, work_array<T>>) {  // row-major: its size says it all
          if (y.size() == n) return static_cast<const T*>(y.data());
        }
        return region_source<T>(y, shape, y_copy);
      }();
      if (uniform) {
        element_loop<T, true>(std::index_sequence_for<X...>{}, inner, srcs, n, seed, none, sinks,
                              known);
      } else {
        element_rows<T, true>(std::index_sequence_for<X...>{}, inner, srcs, period, period, n, seed,
                              none, sinks, known);
      }
      return [&]<std::size_t... k>(std::index_sequence<k...>) {
        return grads{finish(std::move(std::get<k>(out)), std::get<k>(sinks))...};
      }
      (std::index_sequence_for<X...>{});
    }
  }

  template <class T, class X>
  static auto gradient_holder(const X& x, const dims& shape, std::size_t period) {
    if constexpr (XtExpr<X>) {
      if (period == 0) return work_array<T>::from_shape(shape);
      return work_array<T>::from_shape(x.shape());
    } else {
      return T(0);
    }
  }
  template <class T>
  static store_sink<T> sink_of(work_array<T>& a) {
    return {a.data()};
  }
  template <class T>
  requires std::is_arithmetic_v<T>
  static sum_sink<T> sink_of(T&) { return {}; }
  template <class T>
  static work_array<T> finish(work_array<T>&& a, const store_sink<T>&) {
    return std::move(a);
  }
  template <class T>
  static T finish(T&&, const sum_sink<T>& s) {
    return s.total();
  }
};

// ---------------------------------------------------------------------------------------------
// Captured arrays (Note [Captured arrays] in xt/array_family.hpp): the elements of an array a
// traced function read from outside, as a constant of the expression. Rank R, or xt::xarray for
// a rank known only at run time (R = 0 stands for that). The copy is made once per evaluation,
// from the pool (Note [Pooled arrays]): from the heap, freeing it at the end of each call let
// glibc return the heap's top to the system and fault it in again on the next call, which cost
// a 64 x 64 captured matrix 3.5x the time of its gradient.

template <class T, std::size_t R>
struct captured_array {
  using array_type = std::conditional_t<
      R == 0, work_array<T>,
      xt::xtensor_container<xt::uvector<T, pool_allocator<T>>, R, xt::layout_type::row_major>>;
  array_type array;
};
template <class T>
inline constexpr bool is_captured_array_v = false;
template <class T, std::size_t R>
inline constexpr bool is_captured_array_v<captured_array<T, R>> = true;

// The rank of an xtensor expression when its type fixes it, else 0.
template <class X>
constexpr std::size_t static_rank() {
  using S = typename std::remove_cvref_t<X>::shape_type;
  if constexpr (requires { std::tuple_size<S>::value; }) {
    return std::tuple_size<S>::value;
  } else if constexpr (
      requires { S::size(); } && !requires { std::declval<S&>().resize(1); }) {
    return S::size();  // xt::fixed_shape
  } else {
    return 0;
  }
}
template <class X>
inline constexpr std::size_t static_rank_v = static_rank<X>();

// ---------------------------------------------------------------------------------------------
// The rewrite. See Note [Regions].

template <class E>
inline constexpr bool elementwise_node_v = false;
template <class Op, class... A>
inline constexpr bool elementwise_node_v<node<Op, A...>> = is_elementwise<Op>();

// Note [Shared region values]: an elementwise subexpression whose value is materialised anyway,
// because an op that is not elementwise reads it (the logits that logsumexp reads, a layer's new
// hidden value that mg::repeat's step returns), is an input of every other region that holds it
// rather than computed again inside each: forward, one loop computes it; backward, its
// consumers' gradients are summed into one, and one loop takes that back. Without this, the step
// of a 2-layer LSTM computed its first layer in the region of every value that reads it (the
// second layer's hidden and cell values, the prediction), forward and again backward. Only
// stateless subexpressions are shared so (one slot by type: Note [Slot identity]); a value used
// twice within one region is one slot of that region's loop already.
template <class L>
struct elementwise_rows;
template <class... T>
struct elementwise_rows<type_list<T...>> {
  static constexpr std::array<bool, sizeof...(T)> value{elementwise_node_v<T>...};
};
template <class Root>
struct shared_region_values {
  using L = distinct_t<Root>;
  static constexpr std::size_t K = tree_info<Root>::max_arity == 0 ? 1 : tree_info<Root>::max_arity;
  using table = type_table<L, K>;
  // d is read by an elementwise parent and by one that is not, and holds no run-time state
  static constexpr std::array<bool, table::n> shared = [] {
    constexpr auto& rows = table::rows;
    constexpr auto& ew = elementwise_rows<L>::value;
    std::array<bool, table::n> in_region{}, whole{}, r{};
    for (std::size_t d = 0; d < table::n; ++d)
      for (std::size_t k = 0; k < rows[d].arity; ++k)
        (ew[d] ? in_region : whole)[rows[d].child[k]] = true;
    for (std::size_t d = 0; d < table::n; ++d)
      r[d] = ew[d] && rows[d].stateless && in_region[d] && whole[d];
    return r;
  }();
};
template <class X, class Root>
constexpr bool shared_region_value() {
  if constexpr (elementwise_node_v<X> && stateless_v<X>) {
    using S = shared_region_values<Root>;
    return S::shared[index_in<X>(typename S::L{})];
  } else {
    return false;
  }
}

// The boundary of a region node (Note [Planning on the DAG] in plan.hpp): its stateless boundary
// subtrees once each, by type (stateless_boundary), and its stateful ones at each occurrence, left
// to right (stateful_boundary). Only stateful subtrees have stateful boundaries. Root is the whole
// expression (Note [Shared region values]).
template <class E, class Root>
struct stateless_boundary {  // a leaf, or a node that is not elementwise
  using type = std::conditional_t<stateless_v<E>, type_list<E>, type_list<>>;
};
template <class T, class O, class Root>
struct stateless_boundary<cst<T, O>, Root> {
  using type = type_list<>;
};
// ... of the region whose root is the elementwise node E
template <class E, class Root>
struct region_boundary;
template <class Op, class... A, class Root>
struct region_boundary<node<Op, A...>, Root> {
  using type = typename merge_all<type_list<>, typename stateless_boundary<A, Root>::type...>::type;
};
template <class Op, class... A, class Root>
requires(is_elementwise<Op>()) struct stateless_boundary<node<Op, A...>, Root> {
  using type = typename std::conditional_t<shared_region_value<node<Op, A...>, Root>(),
                                           std::type_identity<type_list<node<Op, A...>>>,
                                           region_boundary<node<Op, A...>, Root>>::type;
};
template <class E>
struct stateful_boundary {
  using type = std::conditional_t<stateless_v<E>, type_list<>, type_list<E>>;
};
template <class T, class O>
struct stateful_boundary<cst<T, O>> {  // a number stays inside; a captured array is an input
  using type = std::conditional_t<is_captured_array_v<T>, type_list<cst<T, O>>, type_list<>>;
};
template <class Op, class... A>
requires(is_elementwise<Op>()) struct stateful_boundary<node<Op, A...>> {
  using type = typename concat<type_list<>, typename stateful_boundary<A>::type...>::type;
};

template <class E>
inline constexpr std::size_t stateful_count = list_size<typename stateful_boundary<E>::type>::value;

// Where each child's stateful boundaries start, counted within its parent.
template <class... A>
inline constexpr std::array<std::size_t, sizeof...(A) + 1> stateful_starts = [] {
  std::array<std::size_t, sizeof...(A) + 1> s{};
  const std::size_t counts[] = {stateful_count<A>...};
  for (std::size_t k = 0; k < sizeof...(A); ++k) s[k + 1] = s[k] + counts[k];
  return s;
}();

// The child holding stateful boundary M.
template <std::size_t M, class... A>
inline constexpr std::size_t child_holding_stateful = [] {
  std::size_t k = 0;
  while (M >= stateful_starts<A...>[k + 1]) ++k;
  return k;
}();

// The inner expression of a stateless subtree E of a region whose stateless boundaries are SL:
// boundary B becomes arg<its index in SL>. A type: nothing of E's object is needed.
template <class E, class SL>
struct rebuilt {
  using type = arg<index_in<E>(SL{})>;  // a boundary
};
template <class T, class O, class SL>
struct rebuilt<cst<T, O>, SL> {
  using type = cst<T, O>;
};
template <class E, class SL>
struct rebuilt_node;
template <class Op, class... A, class SL>
struct rebuilt_node<node<Op, A...>, SL> {
  using type = node<Op, typename rebuilt<A, SL>::type...>;
};
template <class Op, class... A, class SL>
requires(is_elementwise<Op>()) struct rebuilt<node<Op, A...>, SL> {
  // (an elementwise boundary: a shared value, Note [Shared region values])
  using type = typename std::conditional_t<(index_in<node<Op, A...>>(SL{}) < list_size<SL>::value),
                                           std::type_identity<arg<index_in<node<Op, A...>>(SL{})>>,
                                           rebuilt_node<node<Op, A...>, SL>>::type;
};

// The region's inner expression for the occurrence e whose stateful boundaries start at Start:
// stateless boundaries become arg<index in SL>, stateful boundary m becomes arg<S + m>.
template <class SL, std::size_t S, std::size_t Start, class E>
constexpr auto rebuild(const E& e) {
  if constexpr (stateless_v<E>) {
    return typename rebuilt<E, SL>::type{};
  } else if constexpr (is_cst_v<E>) {
    if constexpr (is_captured_array_v<decltype(e.value)>) {
      return arg<S + Start>{};  // a captured array: an input of the region
    } else {
      return e;
    }
  } else if constexpr (!elementwise_node_v<E>) {
    return arg<S + Start>{};
  } else {
    return [&]<class Op, class... A>(const node<Op, A...>& n) {
      return [&]<std::size_t... j>(std::index_sequence<j...>) {
        return assemble(n.op, rebuild<SL, S, Start + stateful_starts<A...>[j]>(child<j>(n))...);
      }
      (std::index_sequence_for<A...>{});
    }(e);
  }
}

// Stateful boundary M of the region rooted at e (a reference into e).
template <std::size_t M, class E>
constexpr const auto& stateful_at(const E& e) {
  if constexpr (!elementwise_node_v<E>) {
    static_assert(M == 0);
    return e;
  } else {
    return [&]<class Op, class... A>(const node<Op, A...>& n) -> const auto& {
      constexpr std::size_t j = child_holding_stateful<M, A...>;
      return stateful_at<M - stateful_starts<A...>[j]>(at<j>(n.args));  // a stateful child
    }
    (e);
  }
}

template <class Root, class E>
constexpr auto regionize_in(const E& e);

template <class Root, class Op, class... A>
constexpr auto make_region(const node<Op, A...>& e) {
  using E = node<Op, A...>;
  using SL = typename region_boundary<E, Root>::type;
  constexpr std::size_t S = list_size<SL>::value, F = stateful_count<E>;
  using R = region_op<decltype(rebuild<SL, S, 0>(e)), S + F>;
  const R region{rebuild<SL, S, 0>(e)};
  return [&]<std::size_t... u, std::size_t... m>(std::index_sequence<u...>,
                                                 std::index_sequence<m...>) {
    return assemble(region, regionize_in<Root>(typename type_at<u, SL>::type{})...,
                    regionize_in<Root>(stateful_at<m>(e))...);
  }
  (std::make_index_sequence<S>{}, std::make_index_sequence<F>{});
}

template <class Root, class E>
constexpr auto regionize_node(const E& e) {
  if constexpr (elementwise_node_v<E>) {
    return make_region<Root>(e);
  } else if constexpr (is_node_v<E>) {
    return [&]<class Op, class... A>(const node<Op, A...>& n) {
      return [&]<std::size_t... j>(std::index_sequence<j...>) {
        return assemble(n.op, regionize_in<Root>(child<j>(n))...);
      }
      (std::index_sequence_for<A...>{});
    }(e);
  } else {
    return e;  // a leaf or a constant
  }
}

/// The expression with every maximal elementwise subtree replaced by one region node. A stateless
/// subtree is rewritten by its type alone, so a subexpression reused many times costs nothing more
/// (Note [Planning on the DAG]). Root is the whole expression (Note [Shared region values]).
template <class Root, class E>
constexpr auto regionize_in(const E& e) {
  if constexpr (stateless_v<E>) {
    using R = decltype(regionize_node<Root>(e));
    static_assert(stateless_v<R>);
    return R{};
  } else {
    return regionize_node<Root>(e);
  }
}
template <class E>
constexpr auto regionize(const E& e) {
  return regionize_in<E>(e);
}

template <class E>
using regionized_t = decltype(regionize(std::declval<const E&>()));

}  // namespace mg::detail
