// The static engine's evaluator: one forward sweep over the value slots of a planned
// expression, then one reverse sweep in which every node's backward runs exactly once and each
// slot's adjoint is the sum of what its uses send it (pulled, so no zero-initialisation and no
// `0 + g` the compiler may not fold). With MG_INLINE everything here disappears into straight-line
// code for scalars and SIMD packs.
//
// The element type is open: float/double, a SIMD pack, an element inside a Thrust functor, an
// expression of an enclosing static engine (grad of grad), or an xtensor array. A Policy says how
// a family keeps its values (materialised or as is) and how a broadcast gradient is summed back
// to an input's shape.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <metagrad/concepts.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/lent_results.hpp>
#include <metagrad/core/slot_cell.hpp>
#include <metagrad/error.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/static/plan.hpp>

namespace mg::detail {

// Values kept as computed; gradients already have their input's shape (scalars, packs, nodes).
struct plain_policy {
  template <class Op, class X>
  MG_HD MG_INLINE static constexpr auto keep(X&& x) {
    return std::remove_cvref_t<X>(std::forward<X>(x));
  }
  template <class G, class X>
  MG_HD MG_INLINE static constexpr auto reduce_like(G&& g, const X&) {
    return std::remove_cvref_t<G>(std::forward<G>(g));
  }
  template <class B>
  MG_HD MG_INLINE static constexpr auto keep_bwd(B&& b) {
    return std::remove_cvref_t<B>(std::forward<B>(b));
  }
};

struct no_value {};

// A node's value with what its op kept of the forward for its backward (Note [The loop's forward
// kept] in static/scan.hpp): an op declaring forward_keeping(x...) returns one, and the sweep that
// will go back hands `kept` to its backward_kept(kept, x..., value, adjoint).
template <class V, class K>
struct kept_forward {
  V value;
  K kept;
};
template <class V, class K>
MG_HD MG_INLINE constexpr const V& cell_value(const kept_forward<V, K>& c) noexcept {
  return c.value;
}

// A backward result is built when computed if any of its gradients is (Note [Slots built when
// computed] in core/slot_cell.hpp).
template <class... G>
inline constexpr bool built_when_computed_v<grads<G...>> = (built_when_computed_v<G> || ...);

// Note [No gradient]: a use contributes nothing to its child's adjoint when the user's backward
// did not run (a non-differentiable op such as a comparison, or a node no gradient reached) or
// returned mg::no_grad for that input (the condition of where). Adjoints are sums of adj_term,
// for which no_grad is the identity; an adjoint that is nothing but no_grad makes the node's
// backward skip, and an argument's gradient zero.
// A reference, no copy: an rvalue when the sweep hands the component over (Note [Handing over]).
template <std::size_t k, class BRef>
MG_HD MG_INLINE constexpr decltype(auto) contribution(BRef&& b) {
  using B = std::remove_cvref_t<BRef>;
  if constexpr (std::is_same_v<B, no_value>) {
    return no_grad{};
  } else if constexpr (std::is_same_v<component_t<k, B>, no_grad>) {
    return no_grad{};
  } else if constexpr (std::is_lvalue_reference_v<BRef>) {
    return component<k>(b);
  } else if constexpr (is_grads_v<B>) {
    return std::move(get<k>(b));
  } else {
    return std::move(b);
  }
}

template <class T>
struct adj_term {
  T v;
};
template <class T>
MG_HD MG_INLINE constexpr adj_term<T> make_term(T&& v) {
  return {std::move(v)};
}
// Does an adjoint of type T add its uses' contributions in place rather than as a lazy sum? For
// an array that owns its elements (xt/algebra.hpp says so for the pooled arrays): a lazy sum of a
// slot's many uses nests one expression type per use, whose shape bookkeeping costs more than the
// additions on small arrays, and whose depth exceeds the compiler's template depth past a few
// hundred uses.
template <class T>
inline constexpr bool adds_in_place_v = false;

// How a family adds one such term into another: `a += b` unless it says otherwise.
template <class T>
struct in_place_add {
  MG_HD MG_INLINE static constexpr void add(T& a, const T& b) { a += b; }
};

template <class A, class B>
MG_HD MG_INLINE constexpr auto operator+(adj_term<A>&& a, adj_term<B>&& b) {
  if constexpr (std::is_same_v<A, no_grad>) {
    return std::move(b);
  } else if constexpr (std::is_same_v<B, no_grad>) {
    return std::move(a);
  } else if constexpr (adds_in_place_v<A> && std::is_same_v<A, B>) {
    in_place_add<A>::add(a.v, b.v);
    return std::move(a);
  } else {
    return make_term(std::move(a.v) + std::move(b.v));
  }
}

template <class Policy, class C, class X>
MG_HD MG_INLINE constexpr auto reduce_term(C&& c, const X& x) {
  if constexpr (std::is_same_v<std::remove_cvref_t<C>, no_grad>) {
    return adj_term<no_grad>{};
  } else {  // built in the term (make_term would move it there)
    using R = decltype(Policy::reduce_like(std::forward<C>(c), x));
    return adj_term<R>{Policy::reduce_like(std::forward<C>(c), x)};
  }
}

// Are I... pairwise different? Then each argument's adjoint is asked for once and may be taken
// (Note [Handing over]).
template <std::size_t... I>
constexpr bool distinct_indices() {
  const std::size_t i[] = {I..., 0};
  for (std::size_t a = 0; a < sizeof...(I); ++a)
    for (std::size_t b = a + 1; b < sizeof...(I); ++b)
      if (i[a] == i[b]) return false;
  return true;
}

template <class T>
inline constexpr bool is_arg_v = false;
template <std::size_t I>
inline constexpr bool is_arg_v<arg<I>> = true;
template <class T>
inline constexpr std::size_t arg_index_v = 0;
template <std::size_t I>
inline constexpr std::size_t arg_index_v<arg<I>> = I;
// Are the arguments static-engine expressions (a sweep traced by an enclosing one)?
template <class Args>
inline constexpr bool traced_args_v = false;
template <std::size_t... I, class... A>
inline constexpr bool traced_args_v<tuple_impl<std::index_sequence<I...>, A...>> = (Expr<A> || ...);

template <class T>
inline constexpr bool is_cst_v = false;
template <class T, class O>
inline constexpr bool is_cst_v<cst<T, O>> = true;

// The value of a constant: a number, or for cst<known<V>> the double V.
template <class T>
struct constant_value {
  using type = T;
};
template <class T>
requires std::is_empty_v<T>
struct constant_value<T> {
  using type = double;
};
// A wrapped constant (a captured array: Note [Captured arrays] in xt/array_family.hpp) is
// read through its `array` member.
template <class T>
requires requires { typename T::array_type; }
struct constant_value<T> {
  using type = typename T::array_type;
};
// Note [Constant origins]: a table node of e whose constants met two values for one origin is
// refused (the sweep would read one value for all).
[[noreturn]] inline void origins_conflict() {
  fail(
      "a constant that one call in the traced function's code makes took two different values "
      "in one trace (a helper called with different numbers, or a loop), in an expression that "
      "repeats its subexpressions, each of which metagrad computes once: pass those numbers as "
      "arguments of the function (an array argument for many), or give the helper's calls "
      "arguments of different types");
}
// (plan_v<E> named directly: Note [nvcc host constants])
template <class E>
constexpr std::size_t table_root_count() {
  std::size_t n = 0;
  for (std::size_t t = 0; t < plan_v<E>.nslots; ++t) n += plan_v<E>.table_root[t];
  return n;
}
template <class E, std::size_t n>
constexpr std::array<std::size_t, n> table_roots() {
  std::array<std::size_t, n> r{};
  std::size_t k = 0;
  for (std::size_t t = 0; t < plan_v<E>.nslots; ++t)
    if (plan_v<E>.table_root[t]) r[k++] = t;
  return r;
}
template <class E>
MG_HD constexpr void check_origins(const E& e) {
  constexpr std::size_t n = table_root_count<E>();
  if constexpr (n > 0) {
    constexpr auto roots = table_roots<E, n>();
    const bool conflict = [&]<std::size_t... k>(std::index_sequence<k...>) {
      return (object<roots[k]>(e).table.conflict || ...);
    }
    (std::make_index_sequence<n>{});
#ifndef __CUDA_ARCH__
    if (conflict) origins_conflict();
#endif
  }
}

template <class T>
MG_HD MG_INLINE constexpr const auto& constant_ref(const T& v) {
  if constexpr (requires { typename T::array_type; }) {
    return v.array;
  } else {
    return v;
  }
}

// Note [Wanted gradients]: the arguments whose gradients a sweep is asked for: all of them, or
// wanted_args<I...>. A slot is wanted when a wanted argument lies below it; any other slot's
// adjoint is nothing (Note [No gradient]), so its backward never runs. An op that declares
// `gradient_reads` (Note [What a node saves]) gets, in place of a value that no wanted gradient
// reads, the policy's stand-in for it (Policy::unread, where the policy has one: an array that
// has only a shape), and skips the gradients that read it (detail::gradient_reading): matmul
// computes no gradient for its data operand.
struct all_args {
  static constexpr bool has(std::size_t) { return true; }
};
template <std::size_t... I>
struct wanted_args {
  static constexpr bool has(std::size_t i) { return ((i == I) || ...); }
};

// What a backward of Op reads, as a mask over its inputs (bit k) and its output (bit n), when the
// gradients of the inputs with wanted[k] are wanted: everything, unless Op declares
// gradient_reads. Shared by the sweep and the fused form's boundaries (xt/boundaries.hpp).
template <class Op, std::size_t N>
constexpr std::uint32_t read_mask_for(const std::array<bool, N>& wanted) {
  if constexpr (requires { Op::gradient_reads; }) {
    std::uint32_t m = 0;
    for (std::size_t k = 0; k < N; ++k)
      if (wanted[k]) m |= Op::gradient_reads[k];
    return m;
  } else {
    return ~0u;
  }
}

template <class E, class Wanted>
constexpr auto wanted_slots() {
  constexpr auto& d = plan_v<E>;
  std::array<bool, d.nslots> w{};
  [&]<std::size_t... s>(std::index_sequence<s...>) {
    const auto one = [&]<std::size_t t>(std::integral_constant<std::size_t, t>) {
      using X = slot_expr_t<E, t>;
      if constexpr (is_arg_v<X>) {
        w[t] = Wanted::has(arg_index_v<X>);
      } else {
        // counted down: `k < nchild` with a constant 0 is a warning under nvcc (#186-D)
        for (std::size_t k = d.nchild[t]; k-- > 0;) w[t] = w[t] || w[d.child[t][k]];
      }
    };
    (one(std::integral_constant<std::size_t, s>{}), ...);
  }
  (std::make_index_sequence<d.nslots>{});
  return w;
}
template <class E, class Wanted>
inline constexpr auto wanted_v = wanted_slots<E, Wanted>();

// The value types of a sweep's slots: val_t<s> is slot s's (leaves: the argument or constant
// type). They do not depend on the seed, so that the sweeps of one expression with different seeds
// (a Jacobian's rows: Note [One forward for a Jacobian] in static/evaluator.hpp) share them.
template <class E, class Args, class Policy>
struct value_types {
  static constexpr auto& d = plan_v<E>;
  template <std::size_t s>
  using expr_of = slot_expr_t<E, s>;
  template <std::size_t s, class X = expr_of<s>>
  struct val;
  template <std::size_t s, std::size_t I>
  struct val<s, arg<I>> {
    using type = std::remove_cvref_t<decltype(at<I>(std::declval<const Args&>()))>;
  };
  // A constant with an origin stays that constant in a traced sweep (grad of grad), so that the
  // gradient's expression keeps its origins (Note [Constant origins]).
  static constexpr bool traced = traced_args_v<Args>;
  template <std::size_t s, class T, class O>
  struct val<s, cst<T, O>> {
    using type = std::conditional_t<traced && sited_v<cst<T, O>>, cst<T, O>,
                                    typename constant_value<T>::type>;
  };
  template <std::size_t s, class Op, class... A>
  struct val<s, node<Op, A...>> {
    template <std::size_t... j>
    static auto f(std::index_sequence<j...>) -> decltype(Policy::template keep<Op>(call(
        std::declval<const Op&>(), std::declval<const typename val<d.child[s][j]>::type&>()...)));
    using type = std::remove_cvref_t<decltype(f(std::index_sequence_for<A...>{}))>;
  };
  template <std::size_t s>
  using val_t = typename val<s>::type;
};

template <class E, class Args, class Policy, class Seed, class Wanted = all_args>
struct sweep_types {
  static constexpr auto& d = plan_v<E>;
  static constexpr std::size_t N = d.nslots;
  static constexpr std::size_t root = N - 1;

  // What node p's backward reads, as a mask over its children (bit j) and its output (bit
  // nchild): everything, unless the op declares gradient_reads, then what the gradients of its
  // wanted children read.
  template <std::size_t p, class Op>
  static constexpr std::uint32_t read_mask() {
    constexpr std::size_t n = plan_v<E>.nchild[p];
    std::array<bool, n> wanted{};
    for (std::size_t k = 0; k < n; ++k) wanted[k] = wanted_v<E, Wanted>[plan_v<E>.child[p][k]];
    return read_mask_for<Op>(wanted);
  }
  // Does node p's backward read its value at position j? (32 bits: gradient_reads; a position
  // past them is read.)
  template <std::size_t p, class Op, std::size_t j>
  static constexpr bool reads() {
    if constexpr (j < 32) {
      return (read_mask<p, Op>() >> j) & 1u;
    } else {
      return true;
    }
  }
  // Value v as node p's backward receives it at position j: itself, or the policy's stand-in
  // when nothing that is wanted reads it.
  template <std::size_t p, class Op, std::size_t j, class V>
  MG_HD MG_INLINE static constexpr decltype(auto) pass(const V& v) {
    if constexpr (requires { Policy::unread(v); }) {
      if constexpr (!reads<p, Op, j>()) {
        return Policy::unread(v);
      } else {
        return (v);
      }
    } else {
      return (v);
    }
  }

  template <std::size_t s>
  using expr_of = slot_expr_t<E, s>;
  static constexpr bool traced = traced_args_v<Args>;
  template <std::size_t s>
  using val_t = typename value_types<E, Args, Policy>::template val_t<s>;

  template <std::size_t s, bool>
  struct adj_inner;
  // (the flag is spelt out: clang does not apply a member template's default argument given on
  // its declaration alone)
  template <std::size_t s>
  using adj_t = typename std::conditional_t<s == root, std::type_identity<Seed>,
                                            adj_inner<s, wanted_v<E, Wanted>[s]>>::type;

  // Does node p's backward run? Not for leaves, non-differentiable ops, or an adjoint that is
  // nothing (Note [No gradient]).
  template <std::size_t p>
  static constexpr bool runs_impl() {
    using X = expr_of<p>;
    if constexpr (is_node_v<X>) {
      using Op = std::remove_cvref_t<decltype(std::declval<const X&>().op)>;
      return is_differentiable<Op>() && wanted_v<E, Wanted>[p] &&
             !std::is_same_v<adj_t<p>, no_grad>;
    } else {
      return false;
    }
  }
  template <std::size_t p>
  static constexpr bool runs = runs_impl<p>();

  // bwd<p>: what node p's backward returns (nothing when it does not run).
  template <std::size_t p, class X = expr_of<p>, bool = runs<p>>
  struct bwd {
    using type = no_value;
  };
  template <std::size_t p, class Op, class... A>
  struct bwd<p, node<Op, A...>, true> {
    template <std::size_t... j>
    static auto f(std::index_sequence<j...>)
        -> decltype(Policy::keep_bwd(std::declval<const Op&>().backward(
            pass<p, Op, j>(std::declval<const val_t<d.child[p][j]>&>())...,
            pass<p, Op, sizeof...(A)>(std::declval<const val_t<p>&>()),
            std::declval<const adj_t<p>&>())));
    using type = std::remove_cvref_t<decltype(f(std::index_sequence_for<A...>{}))>;
  };
  template <std::size_t p>
  using bwd_t = typename bwd<p>::type;

  // adjoint of a slot other than the root: the sum of what its uses send it
  template <std::size_t s, bool>
  struct adj_inner {
    using type = no_grad;  // Note [Wanted gradients]
  };
  template <std::size_t s>
  struct adj_inner<s, true> {
    template <std::size_t... u>
    static auto f(std::index_sequence<u...>)
        -> decltype((reduce_term<Policy>(
                         contribution<d.use_k[d.use_begin[s] + u]>(
                             std::declval<const bwd_t<d.use_p[d.use_begin[s] + u]>&>()),
                         std::declval<const val_t<s>&>()) +
                     ...)
                        .v);
    using type = std::remove_cvref_t<decltype(f(
        std::make_index_sequence<d.use_begin[s + 1] - d.use_begin[s]>{}))>;
  };

  template <std::size_t s>
  using stored_val_t = std::conditional_t<(d.nchild[s] == 0), no_value, val_t<s>>;
};

// Borrows: the sweep reads the values of another sweep's forward() (its own forward() is not
// to be called). Writes: its forward() writes the values into storage it is given.
template <class E, class Args, class Policy, class Seed, class Wanted = all_args,
          bool Borrows = false, bool Writes = false>
class sweep {
  using T = sweep_types<E, Args, Policy, Seed, Wanted>;
  // plan_v<E> is named directly, never through a reference member: Note [nvcc host constants]
  static constexpr std::size_t N = T::N;

  template <class Seq>
  struct storage;
  // Does node s keep its forward for its backward (Note [The loop's forward kept])? When its op
  // can and its backward runs in this sweep, which owns its values.
  template <std::size_t s, class Op, std::size_t... j>
  static constexpr bool can_keep(std::index_sequence<j...>) {
    return requires(const Op& op) {
      op.forward_keeping(
          std::declval<const typename T::template val_t<plan_v<E>.child[s][j]>&>()...);
    };
  }
  static constexpr bool policy_keeps = requires { Policy::keeps_forwards; };
  template <std::size_t s>
  static constexpr bool keeps_impl() {
    if constexpr (!policy_keeps || Borrows || Writes || !T::template runs<s>) {
      return false;
    } else {
      using Op =
          std::remove_cvref_t<decltype(std::declval<const typename T::template expr_of<s>&>().op)>;
      return can_keep<s, Op>(std::make_index_sequence<plan_v<E>.nchild[s]>{});
    }
  }
  template <std::size_t s>
  static constexpr bool keeps = keeps_impl<s>();
  template <std::size_t s, bool = keeps<s>>
  struct stored {
    using type = typename T::template stored_val_t<s>;
  };
  template <std::size_t s>
  struct stored<s, true> {
    using Op =
        std::remove_cvref_t<decltype(std::declval<const typename T::template expr_of<s>&>().op)>;
    template <std::size_t... j>
    static auto f(std::index_sequence<j...>) -> decltype(std::declval<const Op&>().forward_keeping(
        std::declval<const typename T::template val_t<plan_v<E>.child[s][j]>&>()...));
    using K = decltype(f(std::make_index_sequence<plan_v<E>.nchild[s]>{}).kept);
    using type = kept_forward<typename T::template val_t<s>, K>;
  };

  template <std::size_t... s>
  struct storage<std::index_sequence<s...>> {
    using vals = tuple<slot_storage_t<typename stored<s>::type>...>;
    using bwds = tuple<slot_storage_t<typename T::template bwd_t<s>>...>;
    using tangents = tuple<typename T::template val_t<s>...>;
  };
  using slots = std::make_index_sequence<N>;

  template <class, class, class, class, class, bool, bool>
  friend class sweep;

  const E& e_;
  const Args& args_;
  std::conditional_t<
      Borrows, const typename storage<slots>::vals&,
      std::conditional_t<Writes, typename storage<slots>::vals&, typename storage<slots>::vals>>
      vals_;
  typename storage<slots>::bwds bwds_;

 public:
  MG_HD MG_INLINE constexpr sweep(const E& e, const Args& args) requires(!Borrows && !Writes)
      : e_(e), args_(args) {
    check_origins(e);
  }
  // A sweep of the same expression and arguments with another seed type, reading the values that
  // `from`'s forward() computed: its backward() needs no forward of its own (Note [One forward
  // for a Jacobian] in static/evaluator.hpp).
  template <class OtherSeed>
  requires Borrows MG_HD
      MG_INLINE constexpr sweep(const sweep<E, Args, Policy, OtherSeed, Wanted>& from)
      : e_(from.e_), args_(from.args_), vals_(from.vals_) {}

  // The values forward() computed, moved out (nothing of this sweep is read after), and a
  // borrowing sweep over values kept that way: mg::repeat's reverse loop keeps each step's
  // forward (Note [A kept forward] in xt/general.hpp).
  using values_type = typename storage<slots>::vals;
  values_type take_values() requires(!Borrows && !Writes) { return std::move(vals_); }
  sweep(const E& e, const Args& args, const values_type& kept) requires Borrows : e_(e),
                                                                                  args_(args),
                                                                                  vals_(kept) {}
  // ... or forward() writing them where they are kept (no move of the values out)
  sweep(const E& e, const Args& args, values_type& keep) requires Writes : e_(e),
                                                                           args_(args),
                                                                           vals_(keep) {
    check_origins(e);
  }

  // The value of slot s: a reference to the argument or constant for leaves (a number for
  // cst<known<V>>).
  template <std::size_t s>
  MG_HD MG_INLINE constexpr decltype(auto) value() const {
    using X = typename T::template expr_of<s>;
    if constexpr (is_arg_v<X>) {
      return at<arg_index_v<X>>(args_);
    } else if constexpr (is_cst_v<X>) {
      if constexpr (plan_v<E>.stateless[s]) {
        return static_cast<typename T::template val_t<s>>(decltype(X::value)::value);
      } else if constexpr (T::traced && sited_v<X>) {
        if constexpr (plan_v<E>.in_table[s]) {
          return X{object<plan_v<E>.parent[s]>(e_).table.template get<X>()};
        } else {
          return X{object<s>(e_).value};
        }
      } else if constexpr (plan_v<E>.in_table[s]) {  // Note [Constant origins]
        return constant_ref(object<plan_v<E>.parent[s]>(e_).table.template get<X>());
      } else {
        return constant_ref(object<s>(e_).value);
      }
    } else {
      return cell_value(at<s>(vals_));
    }
  }
  MG_HD MG_INLINE constexpr decltype(auto) result() const { return value<N - 1>(); }
  // Note [A known result]: after forward(), the result's value as computed before (a region's
  // backward has the value its forward stored). Nothing but the root's own backward reads the root
  // slot, so its computation in forward() is dead, and the compiler drops it from an inlined sweep:
  // the region's backward computes no tanh for tanh(x + b).
  template <class V>
  MG_HD MG_INLINE constexpr void set_result(const V& v) requires(!Borrows) {
    if constexpr (keeps<N - 1>) {
      at<N - 1>(vals_).value = v;
    } else if constexpr (plan_v<E>.nchild[N - 1] > 0) {
      set_cell(at<N - 1>(vals_), v);
    }
  }

  MG_HD MG_INLINE constexpr void forward() { forward_slots(slots{}); }

  MG_HD MG_INLINE constexpr void backward(const Seed& seed) { backward_slots(seed, slots{}); }

  // The adjoint of slot s: the seed at the root, else the sum of what its uses sent.
  template <std::size_t s>
  MG_HD MG_INLINE constexpr auto adjoint(const Seed& seed) const {
    return adjoint_of<s>(*this, seed);
  }
  // Note [Handing over]: the same, taking what the uses sent (moved, not copied). Each use's
  // contribution is read by exactly one adjoint, so a slot's adjoint taken in the reverse sweep
  // (step) leaves nothing another reads. An argument's may be asked for twice (grad<0, 0>) and
  // is taken only where the caller knows it is asked once. So a sweep runs backward() once, and
  // after it only the arguments' adjoints (gradient, take_gradient) are to be read.
  template <std::size_t s>
  MG_HD MG_INLINE constexpr decltype(auto) take_adjoint(const Seed& seed) {
    return adjoint_of<s>(*this, seed);
  }
  template <std::size_t I, class Zero>
  MG_HD MG_INLINE constexpr auto take_gradient(const Seed& seed, const Zero& zero) {
    return gradient_of<I>(*this, seed, zero);
  }

  // Note [Forward mode from the local derivatives]: after forward(), the directional derivative
  // of the result along `dx` (one tangent per argument), in one sweep in slot order: a slot's
  // tangent is the sum over its children of d slot / d child (the op's own backward at the seed
  // `one`, component j) times the child's tangent. Each node's backward runs once, at its own
  // values; nothing runs in reverse. Tangents have the slots' value types; a constant's is 0.
  template <class Tangents>
  MG_HD MG_INLINE constexpr auto tangent(const Tangents& dx) const {
    typename storage<slots>::tangents ts{};
    tangent_slots(ts, dx, slots{});
    return at<N - 1>(ts);
  }

  // d result / d argument I, or `zero` when the expression does not use argument I.
  template <std::size_t I, class Zero>
  MG_HD MG_INLINE constexpr auto gradient(const Seed& seed, const Zero& zero) const {
    return gradient_of<I>(*this, seed, zero);
  }

 private:
  // Note [One body]: the loops over the slots. Forced inline, they make a sweep one body with its
  // caller, so that forward and reverse share their values in registers and g++ fuses sin in one
  // with cos in the other (tests/static/codegen). Past one_body_slots slots each stays a function
  // of its own, as the compiler chooses: forcing a 286-slot gradient (six unrolled steps holding
  // a literal) into one body doubled its compile time, 13.3 s to 28.6 s.
  static constexpr std::size_t one_body_slots = 128;
  static constexpr bool one_body = N <= one_body_slots;
  template <std::size_t... s>
  requires one_body MG_HD MG_INLINE constexpr void forward_slots(std::index_sequence<s...>) {
    (compute<s>(), ...);
  }
  template <std::size_t... s>
  requires(!one_body) MG_HD constexpr void forward_slots(std::index_sequence<s...>) {
    (compute<s>(), ...);
  }
  template <std::size_t... i>
  requires one_body MG_HD MG_INLINE constexpr void backward_slots(const Seed& seed,
                                                                  std::index_sequence<i...>) {
    (step<N - 1 - i>(seed), ...);
  }
  template <std::size_t... i>
  requires(!one_body) MG_HD
      constexpr void backward_slots(const Seed& seed, std::index_sequence<i...>) {
    (step<N - 1 - i>(seed), ...);
  }
  template <class TS, class DX, std::size_t... s>
  requires one_body MG_HD MG_INLINE constexpr void tangent_slots(TS& ts, const DX& dx,
                                                                 std::index_sequence<s...>) const {
    (tangent_step<s>(ts, dx), ...);
  }
  template <class TS, class DX, std::size_t... s>
  requires(!one_body) MG_HD
      constexpr void tangent_slots(TS& ts, const DX& dx, std::index_sequence<s...>) const {
    (tangent_step<s>(ts, dx), ...);
  }

  // Self is const (the contributions are copied) or not (they are handed over). The root's is the
  // seed itself, not a copy.
  template <std::size_t s, class Self>
  MG_HD MG_INLINE static constexpr decltype(auto) adjoint_of(Self& self, const Seed& seed) {
    if constexpr (s == N - 1) {
      return seed;
    } else if constexpr (!wanted_v<E, Wanted>[s]) {
      return no_grad{};
    } else {
      return [&]<std::size_t... u>(std::index_sequence<u...>) MG_LAMBDA_INLINE {
        return (reduce_term<Policy>(
                    contribution<plan_v<E>.use_k[plan_v<E>.use_begin[s] + u]>(forward_like<Self>(
                        cell_value(at<plan_v<E>.use_p[plan_v<E>.use_begin[s] + u]>(self.bwds_)))),
                    self.template value<s>()) +
                ...)
            .v;
      }
      (std::make_index_sequence<plan_v<E>.use_begin[s + 1] - plan_v<E>.use_begin[s]>{});
    }
  }
  template <std::size_t I, class Self, class Zero>
  MG_HD MG_INLINE static constexpr auto gradient_of(Self& self, const Seed& seed,
                                                    const Zero& zero) {
    constexpr std::size_t s = slot_of_arg<E, I>();
    if constexpr (s == N) {
      return zero;
    } else if constexpr (std::is_same_v<typename T::template adj_t<s>, no_grad>) {
      return zero;  // Note [No gradient]
    } else {
      return adjoint_of<s>(self, seed);
    }
  }
  // x as an lvalue of const when Self is const, else as an rvalue
  template <class Self, class X>
  MG_HD MG_INLINE static constexpr decltype(auto) forward_like(X& x) {
    if constexpr (std::is_const_v<Self>) {
      return static_cast<const X&>(x);
    } else {
      return std::move(x);
    }
  }

  // The op of node slot s: its object's for a stateful node, else a value (an empty op).
  template <std::size_t s>
  MG_HD MG_INLINE constexpr decltype(auto) op_of() const {
    using X = typename T::template expr_of<s>;
    using Op = std::remove_cvref_t<decltype(std::declval<const X&>().op)>;
    if constexpr (plan_v<E>.stateless[s] || plan_v<E>.in_table[s]) {
      return Op{};
    } else {
      return (object<s>(e_).op);
    }
  }

  template <std::size_t s>
  MG_HD MG_INLINE constexpr void compute() {
    if constexpr (keeps<s>) {
      const auto& op = op_of<s>();
      using Op = std::remove_cvref_t<decltype(op)>;
      auto r = [&]<std::size_t... j>(std::index_sequence<j...>) {
        return op.forward_keeping(value<plan_v<E>.child[s][j]>()...);
      }
      (std::make_index_sequence<plan_v<E>.nchild[s]>{});
      at<s>(vals_) = typename stored<s>::type{Policy::template keep<Op>(std::move(r.value)),
                                              std::move(r.kept)};
    } else if constexpr (plan_v<E>.nchild[s] > 0 &&
                         built_when_computed_v<typename T::template val_t<s>>) {
      const auto& op = op_of<s>();
      using Op = std::remove_cvref_t<decltype(op)>;
      const auto value_of_op = [&]<std::size_t... j>(std::index_sequence<j...>) MG_LAMBDA_INLINE {
        return call(op, value<plan_v<E>.child[s][j]>()...);
      };
      constexpr auto children = std::make_index_sequence<plan_v<E>.nchild[s]>{};
      using R = decltype(value_of_op(children));
      set_cell_from(at<s>(vals_), [&]() MG_LAMBDA_INLINE {
        if constexpr (std::is_same_v<R, typename T::template val_t<s>>) {  // kept as it is
          return value_of_op(children);
        } else {
          // kept in the expression that calls the op: a lazy value may refer to its temporary
          // arguments (a constant's number)
          return [&]<std::size_t... j>(std::index_sequence<j...>) MG_LAMBDA_INLINE {
            return Policy::template keep<Op>(call(op, value<plan_v<E>.child[s][j]>()...));
          }
          (children);
        }
      });
    } else if constexpr (plan_v<E>.nchild[s] > 0) {  // numbers and other plain slots
      const auto& op = op_of<s>();
      at<s>(vals_) = [&]<std::size_t... j>(std::index_sequence<j...>) MG_LAMBDA_INLINE {
        using Op = std::remove_cvref_t<decltype(op)>;
        return Policy::template keep<Op>(call(op, value<plan_v<E>.child[s][j]>()...));
      }
      (std::make_index_sequence<plan_v<E>.nchild[s]>{});
    }
  }

  template <std::size_t s, class TS, class DX>
  MG_HD MG_INLINE constexpr void tangent_step(TS& ts, const DX& dx) const {
    using X = typename T::template expr_of<s>;
    using V = typename T::template val_t<s>;
    if constexpr (is_arg_v<X>) {
      at<s>(ts) = static_cast<V>(at<arg_index_v<X>>(dx));
    } else if constexpr (is_cst_v<X>) {
      at<s>(ts) = static_cast<V>(0);
    } else {
      const auto& op = op_of<s>();
      using Op = std::remove_cvref_t<decltype(op)>;
      if constexpr (!is_differentiable<Op>()) {
        at<s>(ts) = static_cast<V>(0);
      } else {
        constexpr std::size_t n = plan_v<E>.nchild[s];
        const auto b = [&]<std::size_t... j>(std::index_sequence<j...>) MG_LAMBDA_INLINE {
          return op.backward(value<plan_v<E>.child[s][j]>()..., value<s>(), static_cast<V>(1));
        }
        (std::make_index_sequence<n>{});
        const auto sum = [&]<std::size_t... j>(std::index_sequence<j...>) MG_LAMBDA_INLINE {
          return (tangent_term<j>(b, at<plan_v<E>.child[s][j]>(ts)) + ... + adj_term<no_grad>{});
        }
        (std::make_index_sequence<n>{});
        if constexpr (std::is_same_v<decltype(sum), const adj_term<no_grad>>) {
          at<s>(ts) = static_cast<V>(0);
        } else {
          at<s>(ts) = static_cast<V>(sum.v);
        }
      }
    }
  }
  template <std::size_t j, class B, class C>
  MG_HD MG_INLINE static constexpr auto tangent_term(const B& b, const C& child_tangent) {
    if constexpr (std::is_same_v<component_t<j, B>, no_grad>) {
      return adj_term<no_grad>{};
    } else {
      return make_term(component<j>(b) * child_tangent);
    }
  }

  // Note [Gradients written into the results] in core/lent_results.hpp: operand j of node p is
  // argument ids[j] when that argument is wanted and this is its one use.
  template <std::size_t c>
  static constexpr std::size_t lent_operand_id() {
    using X = typename T::template expr_of<c>;
    if constexpr (is_arg_v<X>) {
      if (wanted_v<E, Wanted>[c] && plan_v<E>.use_begin[c + 1] - plan_v<E>.use_begin[c] == 1)
        return arg_index_v<X>;
    }
    return lent_results::none;
  }
  template <std::size_t p>
  static constexpr std::array<std::size_t, 2> lent_operand_ids() {
    std::array<std::size_t, 2> ids{lent_results::none, lent_results::none};
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      ((ids[j] = lent_operand_id<plan_v<E>.child[p][j]>()), ...);
    }
    (std::make_index_sequence<(plan_v<E>.nchild[p] < 2 ? plan_v<E>.nchild[p] : 2)>{});
    return ids;
  }
  template <std::size_t p, class Op>
  MG_HD MG_INLINE constexpr auto lend_operands() const {
    if constexpr (
        requires { Policy::lends_results; } && requires { Op::writes_operand_gradients; }) {
      constexpr std::array<std::size_t, 2> ids = lent_operand_ids<p>();
      if constexpr (ids[0] != lent_results::none || ids[1] != lent_results::none) {
        return operand_lending(this, ids);
      } else {
        return 0;
      }
    } else {
      return 0;
    }
  }

  template <std::size_t p>
  MG_HD MG_INLINE constexpr void step(const Seed& seed) {
    if constexpr (T::template runs<p>) {
      const auto& op = op_of<p>();
      using Op = std::remove_cvref_t<decltype(op)>;
      constexpr std::size_t n = plan_v<E>.nchild[p];
      [[maybe_unused]] const auto lending = lend_operands<p, Op>();
      if constexpr (keeps<p>) {
        set_cell(
            at<p>(bwds_), [&]<std::size_t... j>(std::index_sequence<j...>) {
              return Policy::keep_bwd(op.backward_kept(at<p>(vals_).kept,
                                                       value<plan_v<E>.child[p][j]>()...,
                                                       value<p>(), take_adjoint<p>(seed)));
            }(std::make_index_sequence<n>{}));
      } else if constexpr (built_when_computed_v<typename T::template bwd_t<p>>) {
        const auto run_backward = [&]<std::size_t... j>(std::index_sequence<j...>)
            MG_LAMBDA_INLINE {
          return op.backward(T::template pass<p, Op, j>(value<plan_v<E>.child[p][j]>())...,
                             T::template pass<p, Op, n>(value<p>()), take_adjoint<p>(seed));
        };
        using R = decltype(run_backward(std::make_index_sequence<n>{}));
        set_cell_from(at<p>(bwds_), [&]() MG_LAMBDA_INLINE {
          if constexpr (std::is_same_v<R, typename T::template bwd_t<p>>) {  // kept as it is
            return run_backward(std::make_index_sequence<n>{});
          } else {
            // kept in the expression that calls backward: a lazy gradient may refer to the
            // adjoint, a temporary
            return [&]<std::size_t... j>(std::index_sequence<j...>) MG_LAMBDA_INLINE {
              return Policy::keep_bwd(
                  op.backward(T::template pass<p, Op, j>(value<plan_v<E>.child[p][j]>())...,
                              T::template pass<p, Op, n>(value<p>()), take_adjoint<p>(seed)));
            }
            (std::make_index_sequence<n>{});
          }
        });
      } else {  // numbers and other plain results
        at<p>(bwds_) = [&]<std::size_t... j>(std::index_sequence<j...>) MG_LAMBDA_INLINE {
          return Policy::keep_bwd(
              op.backward(T::template pass<p, Op, j>(value<plan_v<E>.child[p][j]>())...,
                          T::template pass<p, Op, n>(value<p>()), take_adjoint<p>(seed)));
        }
        (std::make_index_sequence<n>{});
      }
    }
  }
};

}  // namespace mg::detail
