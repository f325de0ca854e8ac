// mg::repeat's step with its loop-invariant reads taken out of the loop (Note [Loop-invariant
// reads] in static/scan.hpp): which subexpressions of the step read the caps only, the pack of
// them that runs once before the loop, and the step rewritten to read their values.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/core/type_list.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/static/scan_body.hpp>

namespace mg::detail {

// Which leaves E reads, the caps being arg<0..K-1>: any cap, and nothing but caps and constants.
template <std::size_t K, class E>
struct cap_reads {  // a constant
  static constexpr bool any = false, only = true;
};
template <std::size_t K, std::size_t I>
struct cap_reads<K, arg<I>> {
  static constexpr bool any = I < K, only = I < K;
};
template <std::size_t K, class Op, class... A>
struct cap_reads<K, node<Op, A...>> {
  static constexpr bool any = (cap_reads<K, A>::any || ...);
  static constexpr bool only = (cap_reads<K, A>::only && ...);
};
// Is E the same at every step: does it read caps and nothing that changes (state, row)?
template <std::size_t K, class E>
inline constexpr bool invariant_v = cap_reads<K, E>::any&& cap_reads<K, E>::only;

// The outermost invariant subexpressions of E are read once per call, before the loop. One whose
// type determines it (shareable_v: no op attribute, constants with origins only) is one value
// however often it occurs, as the planner has it (Note [Slot identity] in plan.hpp): these are
// listed by type. Any other (a slice with its bounds) is one value per occurrence, since two
// occurrences of its type may hold different attributes: these are counted.
template <std::size_t K, class E>
inline constexpr bool shared_invariant_v = invariant_v<K, E>&& shareable_v<E>;
template <std::size_t K, class E>
inline constexpr bool held_invariant_v = invariant_v<K, E> && !shareable_v<E>;

template <std::size_t K, class E>
struct shared_invariants {
  using type = std::conditional_t<shared_invariant_v<K, E>, type_list<E>, type_list<>>;
};
template <std::size_t K, class Op, class... A>
requires(!invariant_v<K, node<Op, A...>>) struct shared_invariants<K, node<Op, A...>> {
  using type = typename merge_all<type_list<>, typename shared_invariants<K, A>::type...>::type;
};

template <std::size_t K, class E>
struct held_count {
  static constexpr std::size_t value = held_invariant_v<K, E> ? 1 : 0;
};
template <std::size_t K, class Op, class... A>
requires(!invariant_v<K, node<Op, A...>>) struct held_count<K, node<Op, A...>> {
  static constexpr std::size_t value = (std::size_t{0} + ... + held_count<K, A>::value);
};

// The held invariants of e, in depth-first order: a std::tuple.
template <std::size_t K, class E>
auto held_invariants(const E& e) {
  if constexpr (held_invariant_v<K, E>) {
    return std::tuple<E>{e};
  } else if constexpr (held_count<K, E>::value == 0) {
    return std::tuple<>{};
  } else {
    return [&]<class Op, class... A>(std::type_identity<node<Op, A...>>) {
      return [&]<std::size_t... j>(std::index_sequence<j...>) {
        return std::tuple_cat(held_invariants<K>(child<j>(e))...);
      }
      (std::index_sequence_for<A...>{});
    }(std::type_identity<E>{});
  }
}

// The number of held invariants before child j of a node with children A...
template <std::size_t K, std::size_t j, class... A>
constexpr std::size_t held_before() {
  std::size_t i = 0, n = 0;
  ((n += i < j ? held_count<K, A>::value : 0, ++i), ...);
  return n;
}

template <class X, class E>
inline constexpr bool contains_v = std::is_same_v<X, E>;
template <class X, class Op, class... A>
inline constexpr bool contains_v<X, node<Op, A...>> = std::is_same_v<X, node<Op, A...>> ||
                                                      (contains_v<X, A> || ...);

template <class X, class... A>
constexpr std::size_t first_containing() {
  std::size_t i = 0, r = sizeof...(A);
  ((r = r == sizeof...(A) && contains_v<X, A> ? i : r, ++i), ...);
  return r;
}

// The subexpression of type X in e, X shareable (its first occurrence: they are all one value).
template <class X, class E>
X find_sub(const E& e) {
  if constexpr (std::is_same_v<X, E>) {
    return e;
  } else if constexpr (stateless_v<X>) {
    return X{};
  } else {
    return [&]<class Op, class... A>(std::type_identity<node<Op, A...>>) {
      return find_sub<X>(child<first_containing<X, A...>()>(e));
    }(std::type_identity<E>{});
  }
}
template <class X, class... B>
X find_in_body(const std::tuple<B...>& body) {
  return find_sub<X>(std::get<first_containing<X, B...>()>(body));
}

// e with its invariants read as arguments: shared invariant i of SL as arg<i>, the held ones as
// arg<size(SL) + First>, arg<size(SL) + First + 1>, ... in depth-first order, and the state and
// row after all H of them (arg<K + j> becomes arg<H + j>).
template <std::size_t K, class SL, std::size_t H, std::size_t First, class E>
constexpr auto read_hoisted(const E& e) {
  constexpr std::size_t S = list_size<SL>::value;
  if constexpr (shared_invariant_v<K, E>) {
    return arg<index_in<E>(SL{})>{};
  } else if constexpr (held_invariant_v<K, E>) {
    return arg<S + First>{};
  } else if constexpr (is_arg_v<E>) {
    return arg<H + arg_index_v<E> - K>{};  // (a cap is only read inside an invariant)
  } else if constexpr (is_cst_v<E>) {
    return e;
  } else {
    return [&]<class Op, class... A>(std::type_identity<node<Op, A...>>) {
      return [&]<std::size_t... j>(std::index_sequence<j...>) {
        return assemble(e.op,
                        read_hoisted<K, SL, H, First + held_before<K, j, A...>()>(child<j>(e))...);
      }
      (std::index_sequence_for<A...>{});
    }(std::type_identity<E>{});
  }
}

// The step of body (its M values over caps, state and row) split at its invariants: `caps`, a
// pack of the invariants over the caps (pack_token when there are none), and `step`, a pack of
// the M values over the invariants' values, the state and the row.
template <class Caps, class Step>
struct hoisted_step {
  Caps caps;
  Step step;
};
template <std::size_t K, class... B>
auto hoist(const std::tuple<B...>& body) {
  using SL = typename merge_all<type_list<>, typename shared_invariants<K, B>::type...>::type;
  constexpr std::size_t H = list_size<SL>::value + (std::size_t{0} + ... + held_count<K, B>::value);
  auto step = [&]<std::size_t... m>(std::index_sequence<m...>) {
    return make_expr(pack_op{},
                     read_hoisted<K, SL, H, held_before<K, m, B...>()>(std::get<m>(body))...);
  }
  (std::index_sequence_for<B...>{});
  if constexpr (H == 0) {
    return hoisted_step<pack_token, decltype(step)>{{}, std::move(step)};
  } else {
    auto caps = [&]<class... X>(type_list<X...>) {
      return std::apply(
          [&](const auto&... h) { return make_expr(pack_op{}, find_in_body<X>(body)..., h...); },
          std::apply([](const auto&... b) { return std::tuple_cat(held_invariants<K>(b)...); },
                     body));
    }(SL{});
    return hoisted_step<decltype(caps), decltype(step)>{std::move(caps), std::move(step)};
  }
}

}  // namespace mg::detail
