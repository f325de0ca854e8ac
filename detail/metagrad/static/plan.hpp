// Compile-time planning of a static expression: every distinct subexpression gets one value
// slot, slots are numbered in topological order, and each slot knows its children and its uses.
//
// Note [Slot identity]: a subtree whose type carries no run-time state (leaves arg<I>, ops with
// no attributes) is fully determined by its type, so equal types share one slot however often
// they occur: `t = x*y; t + sin(t)` computes x*y once. A subtree holding a constant or an op
// attribute (the 2 in pow(x, 2)) gets one slot per occurrence, because two occurrences of the
// same type may hold different numbers. That is always correct; it only shares less.
//
// Note [Planning on the DAG]: the expression is a tree of types in which a subexpression used
// twice occurs twice (`t = sin(t) * x + t`, unrolled 16 times, has 2^16 occurrences of the first
// step but 49 distinct types). Planning therefore never enumerates occurrences of stateless
// subtrees:
//   1. distinct_t<E> lists the distinct types of E, children before parents, in the order of
//      their first occurrence (a merge per distinct type: the compiler memoises each);
//   2. type_table describes each distinct type by indices into that list (arity, statelessness,
//      children);
//   3. make_plan walks the tree from the root as a constexpr loop over those indices, entering a
//      stateless type once and a stateful one at each occurrence; slots come out in post-order of
//      first occurrences. A stateful slot knows its parent slot and its position there, which is
//      how the sweep reaches its run-time state (object<s>).
// Work and storage grow with the distinct types plus the occurrences of stateful subtrees; an
// expression that repeats a stateful subtree exponentially often is refused with a static_assert.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/core/config.hpp>
#include <metagrad/core/tuple.hpp>
#include <metagrad/core/type_list.hpp>
#include <metagrad/expr.hpp>

namespace mg::detail {

template <class E>
struct tree_info;

template <std::size_t I>
struct tree_info<arg<I>> {
  static constexpr std::size_t count = 1, arity = 0, max_arity = 0;
  static constexpr bool stateless = true, table = false;
  static constexpr std::size_t held = 0;
};
template <class T, class O>
struct tree_info<cst<T, O>> {
  static constexpr std::size_t count = 1, arity = 0, max_arity = 0;
  static constexpr bool stateless = stateless_v<cst<T, O>>;  // cst<known<V>>
  static constexpr bool table = false;
  static constexpr std::size_t held = stateless ? 0 : 1;
};
template <class Op, class... A>
struct tree_info<node<Op, A...>> {
  static constexpr std::size_t count = 1 + (tree_info<A>::count + ... + 0);  // occurrences
  static constexpr std::size_t arity = sizeof...(A);
  static constexpr std::size_t max_arity = std::max({arity, tree_info<A>::max_arity...});
  static constexpr bool stateless = stateless_v<node<Op, A...>>;
  static constexpr bool table = is_table_node<Op, A...>();  // Note [Constant origins]
  // a table node: the distinct stateful types of its tree, each one slot of its context
  static constexpr std::size_t held = [] {
    if constexpr (table) {
      return held_types_v<node<Op, A...>>;
    } else {
      return std::size_t{0};
    }
  }();
};

// ---- 1. the distinct types ----------------------------------------------------------------------

// (distinct_t<E>, the distinct types of E's tree, is in expr.hpp: a node asks it whether it is a
// table node)

template <std::size_t i, class L>
struct type_at;
template <std::size_t i, class... T>
struct type_at<i, type_list<T...>> {
  using type = std::tuple_element_t<i, std::tuple<T...>>;
};

// ---- 2. what each distinct type is
// ---------------------------------------------------------------

template <class L, std::size_t K>
struct type_table;
template <class... T, std::size_t K>
struct type_table<type_list<T...>, K> {
  static constexpr std::size_t n = sizeof...(T);
  struct row {
    std::size_t arity = 0;
    bool stateless = true, table = false;
    std::size_t held = 0;
    std::array<std::size_t, K> child{};
  };
  template <class X>
  static constexpr row row_of() {
    row r{
        tree_info<X>::arity, tree_info<X>::stateless, tree_info<X>::table, tree_info<X>::held, {}};
    if constexpr (tree_info<X>::arity > 0) {
      [&]<class Op, class... A>(std::type_identity<node<Op, A...>>) {
        std::size_t k = 0;
        ((r.child[k++] = index_in<A>(type_list<T...>{})), ...);
      }(std::type_identity<X>{});
    }
    return r;
  }
  static constexpr std::array<row, n> rows = {row_of<T>()...};
  // slots needed: one per stateless type, one per occurrence of a stateful one (saturating), and
  // below a table node one per distinct stateful type
  static constexpr std::size_t slots = [] {
    std::array<std::size_t, n> inside{};  // stateful occurrences in the tree of type d
    std::size_t stateless = 0;
    for (std::size_t d = 0; d < n; ++d) {
      if (rows[d].stateless) {
        ++stateless;
        continue;
      }
      if (rows[d].table) {
        inside[d] = rows[d].held;
        continue;
      }
      std::size_t c = 1;
      for (std::size_t k = 0; k < rows[d].arity; ++k) c += inside[rows[d].child[k]];
      inside[d] = std::min<std::size_t>(c, std::size_t{1} << 20);
    }
    return stateless + inside[n - 1];
  }();
};

// ---- 3. the slots
// --------------------------------------------------------------------------------

inline constexpr std::size_t max_slots = 4096;

template <std::size_t N, std::size_t K>
struct plan_data {
  std::size_t nslots = 0;
  std::array<std::size_t, N> type{};    // slot -> index in distinct_t<E>
  std::array<std::size_t, N> parent{};  // stateful slots: the slot of the node holding it
  std::array<std::size_t, N> pos{};     // ... and its position among that node's children
  std::array<bool, N> stateless{};
  // Note [Constant origins]: a slot below a table node (its parent is that node, whose table
  // holds its constants), and the table nodes that hold such slots
  std::array<bool, N> in_table{}, table_root{};
  std::array<std::size_t, N> nchild{};
  std::array<std::array<std::size_t, K>, N> child{};
  // uses of slot s: edges [use_begin[s], use_begin[s+1]) of (use_p, use_k)
  std::array<std::size_t, N + 1> use_begin{};
  std::array<std::size_t, N * K + 1> use_p{}, use_k{};
};

template <class table, std::size_t K>
constexpr auto make_plan_rows();

template <class E>
constexpr auto make_plan() {
  using L = distinct_t<E>;
  constexpr std::size_t K = tree_info<E>::max_arity == 0 ? 1 : tree_info<E>::max_arity;
  using table = type_table<L, K>;
  static_assert(table::slots <= max_slots,
                "metagrad: this expression repeats a subexpression that holds constants too many "
                "times to plan (each repetition is planned apart): write the loop as "
                "mg::repeat<N>(step, state), or pass those constants as arguments");
  if constexpr (table::slots > max_slots) {
    // after the assertion, no plan of a million slots to evaluate: a plan of the first distinct
    // type alone (a leaf), which the sweep evaluates without further errors
    plan_data<1, 1> p{};
    p.nslots = 1;
    p.stateless[0] = tree_info<typename type_at<0, L>::type>::stateless;
    return p;
  } else {
    return make_plan_rows<table, K>();
  }
}

template <class table, std::size_t K>
constexpr auto make_plan_rows() {
  constexpr std::size_t N = table::slots;
  constexpr std::size_t D = table::n;
  constexpr auto& rows = table::rows;
  plan_data<N, K> d{};
  // Depth-first from the root, post-order; a stateless type becomes a slot at its first visit.
  // Below a table node (a context: Note [Constant origins]) a stateful type does too, within
  // that context.
  std::array<std::size_t, D> slot_of_type{}, in_context{};
  for (auto& s : slot_of_type) s = N;
  struct frame {
    std::size_t type = 0, next = 0;
    std::array<std::size_t, K> kids{};
  };
  std::array<frame, D + 1> stack{};  // a path from the root repeats no type
  std::size_t top = 0;
  stack[0].type = D - 1;
  constexpr std::size_t none = D + 1;
  std::size_t context = rows[D - 1].table ? 0 : none;  // the stack depth of the table node
  std::size_t context_first = 0;                       // its first slot
  for (auto& s : in_context) s = N;
  for (;;) {
    frame& f = stack[top];
    const auto& r = rows[f.type];
    if (f.next < r.arity) {
      const std::size_t c = r.child[f.next];
      if (rows[c].stateless && slot_of_type[c] != N) {
        f.kids[f.next++] = slot_of_type[c];
      } else if (!rows[c].stateless && context != none && in_context[c] != N) {
        f.kids[f.next++] = in_context[c];
      } else {
        stack[++top] = frame{c, 0, {}};
        if (context == none && rows[c].table) {
          context = top;
          context_first = d.nslots;
          for (auto& s : in_context) s = N;
        }
      }
      continue;
    }
    const std::size_t s = d.nslots++;
    d.type[s] = f.type;
    d.stateless[s] = r.stateless;
    d.nchild[s] = r.arity;
    d.parent[s] = N;
    for (std::size_t k = 0; k < r.arity; ++k) {
      d.child[s][k] = f.kids[k];
      if (!d.stateless[f.kids[k]] && d.parent[f.kids[k]] == N) {
        d.parent[f.kids[k]] = s;
        d.pos[f.kids[k]] = k;
      }
    }
    if (r.stateless) slot_of_type[f.type] = s;
    if (context != none && !r.stateless) {
      if (top == context) {  // the table node: its context's slots read its table
        d.table_root[s] = true;
        for (std::size_t t = context_first; t < s; ++t)
          if (!d.stateless[t]) {
            d.in_table[t] = true;
            d.parent[t] = s;
          }
        context = none;
      } else {
        in_context[f.type] = s;
      }
    }
    if (top == 0) break;
    --top;
    stack[top].kids[stack[top].next++] = s;
  }
  // Uses, grouped by the slot used; within a group in decreasing consumer order.
  std::array<std::size_t, N + 1> count{};
  for (std::size_t p = 0; p < d.nslots; ++p)
    for (std::size_t k = 0; k < d.nchild[p]; ++k) ++count[d.child[p][k] + 1];
  for (std::size_t s = 0; s < d.nslots; ++s) count[s + 1] += count[s];
  d.use_begin = count;
  for (std::size_t p = d.nslots; p-- > 0;)
    for (std::size_t k = 0; k < d.nchild[p]; ++k) {
      const std::size_t e = count[d.child[p][k]]++;
      d.use_p[e] = p;
      d.use_k[e] = k;
    }
  return d;
}

template <class E>
inline constexpr auto plan_v = make_plan<E>();

// The expression type of slot s.
template <class E, std::size_t s>
using slot_expr_t = typename type_at<plan_v<E>.type[s], distinct_t<E>>::type;

// The object of stateful slot s inside the expression e: a chain of member accesses from the
// root. (Stateless slots carry no state: their type is all there is.)
template <std::size_t s, class E>
MG_HD MG_INLINE constexpr const auto& object(const E& e) {
  if constexpr (s + 1 == plan_v<E>.nslots) {
    return e;
  } else {
    return at<plan_v<E>.pos[s]>(object<plan_v<E>.parent[s]>(e).args);  // a stateful child
  }
}

// The slot holding leaf arg<I>, or nslots when the expression does not use argument I.
template <class E, std::size_t I>
constexpr std::size_t slot_of_arg() {
  constexpr auto& d = plan_v<E>;
  constexpr std::size_t t = index_in<arg<I>>(distinct_t<E>{});
  for (std::size_t s = 0; s < d.nslots; ++s)
    if (d.type[s] == t) return s;
  return d.nslots;
}

}  // namespace mg::detail
