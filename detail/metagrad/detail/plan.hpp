// Compile-time planning of a static expression: every distinct subexpression gets one value
// slot, slots are numbered in topological order, and each slot knows its children and its uses.
//
// Note [Slot identity]: a subtree whose type carries no run-time state (leaves arg<I>, ops with
// no attributes) is fully determined by its type, so equal types share one slot however often
// they occur: `t = x*y; t + sin(t)` computes x*y once. A subtree holding a constant or an op
// attribute (the 2 in pow(x, 2)) gets one slot per occurrence, because two occurrences of the
// same type may hold different numbers. That is always correct; it only shares less.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <metagrad/detail/config.hpp>
#include <metagrad/detail/tuple.hpp>
#include <metagrad/expr.hpp>

namespace mg::detail {

template <class E>
struct tree_info;

template <std::size_t I>
struct tree_info<arg<I>> {
  static constexpr std::size_t count = 1, arity = 0, max_arity = 0;
  static constexpr bool stateless = true;
};
template <class T>
struct tree_info<cst<T>> {
  static constexpr std::size_t count = 1, arity = 0, max_arity = 0;
  static constexpr bool stateless = false;
};
template <class Op, class... A>
struct tree_info<node<Op, A...>> {
  static constexpr std::size_t count = 1 + (tree_info<A>::count + ... + 0);
  static constexpr std::size_t arity = sizeof...(A);
  static constexpr std::size_t max_arity = std::max({arity, tree_info<A>::max_arity...});
  static constexpr bool stateless = std::is_empty_v<Op> && (tree_info<A>::stateless && ...);
  // first occurrence index of child i, in post-order within this subtree
  static constexpr std::array<std::size_t, sizeof...(A) + 1> start = [] {
    std::array<std::size_t, sizeof...(A) + 1> s{};
    std::size_t counts[] = {tree_info<A>::count...};
    for (std::size_t i = 0; i < sizeof...(A); ++i) s[i + 1] = s[i] + counts[i];
    return s;
  }();
};

template <std::size_t N, std::size_t K>
struct plan_data {
  // per occurrence, in post-order
  std::array<std::size_t, N> canon{};  // the first occurrence of the same type
  std::array<bool, N> ostateless{};
  std::array<std::size_t, N> onchild{};
  std::array<std::array<std::size_t, K>, N> ochild{};
  // per slot, in topological order
  std::size_t nslots = 0;
  std::array<std::size_t, N> slot_of{};  // occurrence -> slot
  std::array<std::size_t, N> rep{};      // slot -> first occurrence
  std::array<std::size_t, N> nchild{};
  std::array<std::array<std::size_t, K>, N> child{};
  // uses of slot s: edges [use_begin[s], use_begin[s+1]) of (use_p, use_k)
  std::array<std::size_t, N + 1> use_begin{};
  std::array<std::size_t, N * K + 1> use_p{}, use_k{};
};

template <class E, class D>
constexpr std::size_t record(D& d, std::size_t& pos) {
  using T = tree_info<E>;
  std::array<std::size_t, T::arity + 1> kids{};
  if constexpr (T::arity > 0) {
    [&]<class Op, class... A>(std::type_identity<node<Op, A...>>) {
      std::size_t i = 0;
      ((kids[i++] = record<A>(d, pos)), ...);
    }(std::type_identity<E>{});
  }
  const std::size_t me = pos++;
  d.ostateless[me] = T::stateless;
  d.onchild[me] = T::arity;
  if constexpr (T::arity > 0) {  // for leaves nvcc warns "pointless comparison" (#186)
    for (std::size_t i = 0; i < T::arity; ++i) d.ochild[me][i] = kids[i];
  }
  return me;
}

// Which child of node E holds its occurrence o, and where that child's occurrences start.
// Namespace-scope scalars, read by device code only as template arguments: see
// Note [nvcc host constants] in config.hpp.
template <class E, std::size_t o>
inline constexpr std::size_t child_holding = [] {
  std::size_t c = 0;
  while (tree_info<E>::start[c + 1] <= o) ++c;
  return c;
}();
template <class E, std::size_t o>
inline constexpr std::size_t child_start = tree_info<E>::start[child_holding<E, o>];

// The object of occurrence o inside the expression e (a chain of member accesses).
template <std::size_t o, class E>
MG_HD MG_INLINE constexpr const auto& occurrence(const E& e) {
  if constexpr (o + 1 == tree_info<E>::count) {
    return e;
  } else {
    return occurrence<o - child_start<E, o>>(at<child_holding<E, o>>(e.args));
  }
}

template <class E, std::size_t o>
using occurrence_t = std::remove_cvref_t<decltype(occurrence<o>(std::declval<const E&>()))>;

// The first occurrence q <= o whose type is that of occurrence o. Types are compared with
// is_same (address or name comparisons are not constant expressions under sanitizers).
template <class E, std::size_t o, std::size_t... q>
constexpr std::size_t first_same(std::index_sequence<q...>) {
  std::size_t r = o;
  ((r = (r == o && std::is_same_v<occurrence_t<E, q>, occurrence_t<E, o>>) ? q : r), ...);
  return r;
}

template <class E, std::size_t... o>
constexpr auto canonical_occurrences(std::index_sequence<o...>) {
  return std::array<std::size_t, sizeof...(o)>{
      first_same<E, o>(std::make_index_sequence<o + 1>{})...};
}

template <class E>
constexpr auto make_plan() {
  constexpr std::size_t N = tree_info<E>::count;
  constexpr std::size_t K = tree_info<E>::max_arity == 0 ? 1 : tree_info<E>::max_arity;
  plan_data<N, K> d{};
  std::size_t pos = 0;
  record<E>(d, pos);
  d.canon = canonical_occurrences<E>(std::make_index_sequence<N>{});
  // Deduplicate stateless subtrees by type; post-order keeps children before parents.
  for (std::size_t o = 0; o < N; ++o) {
    std::size_t found = N;
    if (d.ostateless[o]) {
      if (d.canon[o] != o) found = d.slot_of[d.canon[o]];
    }
    if (found != N) {
      d.slot_of[o] = found;
      continue;
    }
    const std::size_t s = d.nslots++;
    d.slot_of[o] = s;
    d.rep[s] = o;
    d.nchild[s] = d.onchild[o];
    for (std::size_t i = 0; i < d.onchild[o]; ++i) d.child[s][i] = d.slot_of[d.ochild[o][i]];
  }
  // Uses, grouped by the slot used; within a group in decreasing consumer order.
  std::size_t e = 0;
  for (std::size_t s = 0; s < d.nslots; ++s) {
    d.use_begin[s] = e;
    for (std::size_t p = d.nslots; p-- > s + 1;)
      for (std::size_t k = 0; k < d.nchild[p]; ++k)
        if (d.child[p][k] == s) {
          d.use_p[e] = p;
          d.use_k[e] = k;
          ++e;
        }
  }
  d.use_begin[d.nslots] = e;
  return d;
}

template <class E>
inline constexpr auto plan_v = make_plan<E>();

// The slot holding leaf arg<I>, or nslots when the expression does not use argument I.
template <class E, std::size_t I>
constexpr std::size_t slot_of_arg() {
  constexpr auto& d = plan_v<E>;
  return [&]<std::size_t... o>(std::index_sequence<o...>) {
    std::size_t r = d.nslots;
    ((r = std::is_same_v<occurrence_t<E, o>, arg<I>> ? d.slot_of[o] : r), ...);
    return r;
  }
  (std::make_index_sequence<tree_info<E>::count>{});
}

}  // namespace mg::detail
