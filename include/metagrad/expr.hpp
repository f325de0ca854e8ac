// The static engine's expression types: the typed graph a generic callable builds when it is
// called with symbolic leaves. They live in namespace mg so that argument-dependent lookup finds
// the ops' functions and operators, and error messages read
// `mg::node<mg::mul_op, mg::arg<0>, mg::arg<1>>`.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/concepts.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/tuple.hpp>
#include <metagrad/core/type_list.hpp>

namespace mg {

namespace detail {
template <class T>
inline constexpr bool always_false_v = false;

// The conversion of a symbolic value to bool fails here, in its template's default argument:
// overload resolution instantiates that at once, so this sentence comes before whatever error
// the branch would cause next (g++'s "inconsistent types deduced for lambda return type" of an
// if with two returns, or the ?: of two expression types). Other target types pass through.
template <class T>
struct branch_on_symbolic {
  static_assert(!std::is_same_v<T, bool>,
                "metagrad: a traced function cannot branch on a symbolic value (if (x > 0)): "
                "use mg::where(x > 0, a, b), or mg::tensor for data-dependent control flow");
  using type = void;
};
}  // namespace detail

// Note [Misuse in one sentence]: a traced function's values are expressions, not numbers. The
// common mistakes of a new user each meet a member below that fails with one sentence naming the
// fix, instead of forty overload candidates:
//   - `if (x > 0)` or `x > 0 ? a : b`: an explicit conversion to bool;
//   - `std::sin(x)`, a function metagrad lacks (`erf(x)` finds ::erf(double)), `double d = x`: a
//     conversion to double (a template constrained to double exactly, so it never makes an
//     overload set ambiguous, and exact matches such as mg::sin(x) always win over it);
//   - `t = step(t)` in a loop: an assignment from another expression type;
//   - `std::cout << x`: operator<< below.
// They are templates: nothing is instantiated unless a program makes the mistake. (A macro
// here, because the expression types are aggregates without a common base.)
#define MG_SYMBOLIC_MISUSE_DIAGNOSTICS(Self)                                                     \
  template <class B, class = typename detail::branch_on_symbolic<B>::type>                       \
  requires std::is_same_v<B, bool>                                                               \
  explicit operator B() const { return false; }                                                  \
  template <class D>                                                                             \
  requires std::is_same_v<D, double>                                                             \
  operator D() const {                                                                           \
    static_assert(detail::always_false_v<D>,                                                     \
                  "metagrad: a traced function's values are symbolic, not numbers: call "        \
                  "metagrad's ops on them (sin(x), not std::sin(x)); a function metagrad lacks " \
                  "is a custom op, mg::apply<F>(x) (docs/static.md)");                           \
    return 0;                                                                                    \
  }                                                                                              \
  template <class E>                                                                             \
  requires(!std::is_same_v<std::remove_cvref_t<E>, Self>) Self& operator=(const E&) {            \
    static_assert(detail::always_false_v<E>,                                                     \
                  "metagrad: an expression's type is its formula, so `t = step(t)` cannot loop " \
                  "in a traced function: write mg::repeat<N>(step, t), or use mg::tensor");      \
    return *this;                                                                                \
  }

/// Leaf of the static engine: the I-th argument of the differentiated function.
template <std::size_t I>
struct arg {
  using mg_family = detail::expr_family;
  MG_SYMBOLIC_MISUSE_DIAGNOSTICS(arg)
};

/// A constant captured by value (a literal such as the 1 in `1 + x * x`). Origin names the place
/// in the traced function's code that made it, where an operator did (Note [Constant origins]).
template <class T, class Origin = void>
struct cst {
  using mg_family = detail::expr_family;
  T value;
  MG_SYMBOLIC_MISUSE_DIAGNOSTICS(cst)
};

/// A constant known from its type, for cst<known<V>>: the seed 1 of grad of grad and the 0 of
/// an unused argument. It holds no run-time state, so subexpressions that contain it still share
/// their slots (Note [Slot identity]).
template <int V>
struct known {
  static constexpr int value = V;
};

template <class Op, class... Args>
struct node;

namespace detail {
// Does expression E read arg<J>?
template <std::size_t J, class E>
inline constexpr bool reads_arg_v = false;
template <std::size_t J>
inline constexpr bool reads_arg_v<J, arg<J>> = true;
template <std::size_t J, class Op, class... A>
inline constexpr bool reads_arg_v<J, node<Op, A...>> = (reads_arg_v<J, A> || ...);

// Does expression type T carry no run-time state (Note [Slot identity] in plan.hpp)? Then T{} is
// the expression, and a node stores nothing for such a child: however often a stateless
// subexpression is reused, an expression object grows only with its stateful parts.
template <class T>
inline constexpr bool stateless_v = false;
template <std::size_t I>
inline constexpr bool stateless_v<arg<I>> = true;
template <class T, class O>
inline constexpr bool stateless_v<cst<T, O>> = std::is_empty_v<T>;
// An op carries no state when it is empty, or says so (`static constexpr bool is_stateless`: a
// region whose inner expression is stateless) and is then rebuilt by Op{}.
template <class Op>
constexpr bool op_stateless() {
  if constexpr (requires { Op::is_stateless; }) {
    return Op::is_stateless;
  } else {
    return std::is_empty_v<Op>;
  }
}
template <class Op, class... A>
inline constexpr bool stateless_v<node<Op, A...>> = op_stateless<Op>() && (stateless_v<A> && ...);

struct no_state {};
template <class A>
using stored_t = std::conditional_t<stateless_v<A>, no_state, A>;
template <class A>
MG_HD constexpr stored_t<A> store(const A& a) {
  if constexpr (stateless_v<A>) {
    return {};
  } else {
    return a;
  }
}

// Note [Constant origins]: a number that an operator joins to a traced value (the 1 in `1 / t`, a
// captured `fx` in `u - fx`) becomes cst<T, Origin>, where Origin is a type made at that call in
// the traced function's code (the operator's default template argument `decltype([] {})`: each
// call in the source, once per instantiation of the function around it, is a new type). A copy of
// such a value keeps its type, so `const auto inv = 1 / t;` used in three places is one type
// three times, and planning can share it as it shares stateless subtrees (Note [Slot identity] in
// static/plan.hpp). Planned and stored apart, each occurrence would be a slot of its own: a
// reprojection with a dozen named intermediate values is 920 slots for 79 distinct
// subexpressions.
//
// A type no longer fixes the value, though: a helper called twice with different numbers, or a
// loop, runs one call in the source twice. So a subtree whose ops are stateless and whose state is
// only such constants (shareable_v) is shared only where the values are checked to agree. A
// shareable node whose tree repeats its stateful subexpressions (more than 2 n + 8 occurrences of
// its n distinct stateful types; the smallest factor that keeps the reprojection's objects small)
// stores, instead of its children, a table with one value per origin below it (site_table),
// filled when the node is made; two different values for one origin set
// its `conflict` flag, and the sweep that plans the node refuses it with an mg::error. Below such
// a node every distinct subexpression is one slot (a context: make_plan_rows), and the table
// bounds the object: a named value used n times costs its origins once, not n copies. Every other
// node keeps its children, and its occurrences are planned apart, exactly as without origins, so
// `f(x, 1.0) + f(x, 2.0)` stays right.
template <class X>
inline constexpr bool sited_v = false;
template <class T, class O>
inline constexpr bool sited_v<cst<T, O>> = !std::is_void_v<O> && !std::is_empty_v<T>;

template <class X>
inline constexpr bool shareable_v = stateless_v<X> || sited_v<X>;
template <class Op, class... A>
inline constexpr bool shareable_v<node<Op, A...>> = op_stateless<Op>() && (shareable_v<A> && ...);

// The distinct types of E's tree, children before parents, in the order of their first occurrence
// (a merge per distinct type, which the compiler memoises; the planner lists them too: Note
// [Planning on the DAG] in static/plan.hpp).
template <class E>
struct distinct {
  using type = type_list<E>;  // a leaf
};
template <class Op, class... A>
struct distinct<node<Op, A...>> {
  using type =
      typename push_unique<typename merge_all<type_list<>, typename distinct<A>::type...>::type,
                           node<Op, A...>>::type;
};
template <class E>
using distinct_t = typename distinct<E>::type;

// How many of those hold state, and how often such types occur in the tree (saturating): more
// occurrences than types is a repeat.
template <class L>
inline constexpr std::size_t stateful_in_v = 0;
template <class... T>
inline constexpr std::size_t stateful_in_v<type_list<T...>> = (std::size_t{!stateless_v<T>} + ... +
                                                               0);
template <class X>
inline constexpr std::size_t held_types_v = stateful_in_v<distinct_t<X>>;
template <class X>
inline constexpr std::size_t held_count_v = stateless_v<X> ? 0 : 1;
template <class Op, class... A>
inline constexpr std::size_t held_count_v<node<Op, A...>> =
    stateless_v<node<Op, A...>>
        ? 0
        : std::min<std::size_t>(1 + (held_count_v<A> + ... + 0), std::size_t{1} << 40);

// The origins below X: its distinct constants cst<T, O> with an origin.
template <class X>
struct origins_of {
  using type = std::conditional_t<sited_v<X>, type_list<X>, type_list<>>;
};
template <class Op, class... A>
struct origins_of<node<Op, A...>> {
  using type = typename merge_all<type_list<>, typename origins_of<A>::type...>::type;
};

// Does node<Op, A...> store a table of its constants (Note [Constant origins])?
template <class Op, class... A>
constexpr bool is_table_node() {
  using N = node<Op, A...>;
  if constexpr (!shareable_v<N> || stateless_v<N>) {
    return false;
  } else {
    return held_count_v<N> > 2 * held_types_v<N> + 8;
  }
}

// One value per origin; `conflict` when one origin met two values.
template <class... C>
struct site_table {
  tuple<std::remove_cv_t<decltype(C::value)>...> values;
  bool conflict = false;
  template <class X>
  MG_HD constexpr const auto& get() const {
    return at<index_in<X>(type_list<C...>{})>(values);
  }
};
template <class L>
struct site_table_of;
template <class... C>
struct site_table_of<type_list<C...>> {
  using type = site_table<C...>;
};
template <class Op, class... A>
using table_t = typename site_table_of<typename origins_of<node<Op, A...>>::type>::type;
}  // namespace detail

/// An interior node: Op applied to Args. Op holds the attributes of the op (empty for most); args
/// holds the children that have run-time state (read them with detail::child<j>).
template <class Op, class... Args>
struct node {
  using mg_family = detail::expr_family;
  MG_NO_UNIQUE_ADDRESS Op op;
  detail::tuple<detail::stored_t<Args>...> args;
  MG_SYMBOLIC_MISUSE_DIAGNOSTICS(node)
};
/// A node that repeats a subexpression holding constants: it stores one value per origin of its
/// constants instead of its children (Note [Constant origins]; detail::child rebuilds a child).
template <class Op, class... Args>
requires(detail::is_table_node<Op, Args...>()) struct node<Op, Args...> {
  using mg_family = detail::expr_family;
  MG_NO_UNIQUE_ADDRESS Op op;
  detail::table_t<Op, Args...> table;
  MG_SYMBOLIC_MISUSE_DIAGNOSTICS(node)
};
#undef MG_SYMBOLIC_MISUSE_DIAGNOSTICS

namespace detail {
template <class T>
inline constexpr bool is_expr_v = false;
template <std::size_t I>
inline constexpr bool is_expr_v<arg<I>> = true;
template <class T, class O>
inline constexpr bool is_expr_v<cst<T, O>> = true;
template <class Op, class... Args>
inline constexpr bool is_expr_v<node<Op, Args...>> = true;
}  // namespace detail

/// A static-engine expression: a leaf, a constant or a node.
template <class T>
concept Expr = detail::is_expr_v<std::remove_cvref_t<T>>;

namespace detail {
// What a constant of type T becomes in an expression: itself, unless a family's header says
// otherwise (<metagrad/xtensor.hpp> for captured arrays: Note [Captured arrays]).
template <class T>
struct constant_traits {
  using type = T;
  MG_HD static constexpr const T& make(const T& t) { return t; }
};

template <class T>
MG_HD constexpr auto as_expr(T&& t) {
  if constexpr (Expr<T>) {
    return std::remove_cvref_t<T>(std::forward<T>(t));
  } else if constexpr (std::is_same_v<typename constant_traits<std::remove_cvref_t<T>>::type,
                                      std::remove_cvref_t<T>>) {
    return cst<std::remove_cvref_t<T>>{std::forward<T>(t)};
  } else {
    using C = constant_traits<std::remove_cvref_t<T>>;
    return cst<typename C::type>{C::make(t)};
  }
}

template <class X>
inline constexpr bool is_node_v = false;
template <class Op, class... A>
inline constexpr bool is_node_v<node<Op, A...>> = true;
template <class X>
inline constexpr bool is_table_node_v = false;
template <class Op, class... A>
inline constexpr bool is_table_node_v<node<Op, A...>> = is_table_node<Op, A...>();

template <class X, class Table>
MG_HD constexpr X from_table(const Table& t);

// Child j of node n: a reference to it, or for a stateless child a value (its type is all of it);
// a table node's child is rebuilt from its table.
template <std::size_t j, class Op, class... A>
MG_HD MG_INLINE constexpr decltype(auto) child(const node<Op, A...>& n) {
  using C = std::tuple_element_t<j, std::tuple<A...>>;
  if constexpr (stateless_v<C>) {
    return C{};
  } else if constexpr (is_table_node<Op, A...>()) {
    return from_table<C>(n.table);
  } else {
    return at<j>(n.args);
  }
}

// Two numbers equal bit for bit where they are float or double (a NaN equals itself, 0.0 is not
// -0.0): two values of one origin, two traces of one loop step (scan_body.hpp).
template <class T>
MG_HD constexpr bool same_number(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, double>) {
    return std::bit_cast<unsigned long long>(a) == std::bit_cast<unsigned long long>(b);
  } else if constexpr (std::is_same_v<T, float>) {
    return std::bit_cast<unsigned>(a) == std::bit_cast<unsigned>(b);
  } else {
    return a == b;
  }
}

// f(value) for every value of origin C that the object x stores, and whether a table in x
// already met two values for one origin.
template <class C, class X, class F>
MG_HD constexpr void each_origin_value(const X& x, F& f) {
  if constexpr (std::is_same_v<X, C>) {
    f(x.value);
  } else if constexpr (is_table_node_v<X>) {
    using L = typename origins_of<X>::type;
    if constexpr (index_in<C>(L{}) < list_size<L>::value) f(x.table.template get<C>());
  } else if constexpr (is_node_v<X> && !stateless_v<X>) {
    [&]<class Op, class... A>(const node<Op, A...>& n) {
      [&]<std::size_t... j>(std::index_sequence<j...>) {
        (each_origin_value<C>(at<j>(n.args), f), ...);
      }
      (std::index_sequence_for<A...>{});
    }(x);
  }
}
template <class X>
MG_HD constexpr bool holds_conflict(const X& x) {
  if constexpr (is_table_node_v<X>) {
    return x.table.conflict;
  } else if constexpr (is_node_v<X> && !stateless_v<X>) {
    return [&]<class Op, class... A>(const node<Op, A...>& n) {
      return [&]<std::size_t... j>(std::index_sequence<j...>) {
        return (holds_conflict(at<j>(n.args)) || ...);
      }
      (std::index_sequence_for<A...>{});
    }(x);
  } else {
    return false;
  }
}

// The table of a node over children c: each origin's first value, and `conflict` when another
// differs.
template <class... C, class... X>
MG_HD constexpr site_table<C...> gather_table(type_list<C...>, const X&... c) {
  bool conflict = (holds_conflict(c) || ...);
  const auto first = [&]<class K>(std::type_identity<K>) {
    using T = std::remove_cv_t<decltype(K::value)>;
    T v{};
    bool have = false;
    auto f = [&](const T& y) {
      if (!have) {
        v = y;
        have = true;
      } else if (!same_number(v, y)) {
        conflict = true;
      }
    };
    (each_origin_value<K>(c, f), ...);
    return v;
  };
  site_table<C...> t{{{first(std::type_identity<C>{})}...}, false};
  t.conflict = conflict;
  return t;
}

// The node of op over the expressions c...
template <class Op, class... C>
MG_HD constexpr node<Op, C...> assemble(const Op& op, const C&... c) {
  if constexpr (is_table_node<Op, C...>()) {
    return {op, gather_table(typename origins_of<node<Op, C...>>::type{}, c...)};
  } else {
    return {op, {{store(c)}...}};
  }
}

// The subexpression X (below a table node) from that node's table t.
template <class X, class Table>
MG_HD constexpr X from_table(const Table& t) {
  if constexpr (stateless_v<X>) {
    return X{};
  } else if constexpr (sited_v<X>) {
    return X{t.template get<X>()};
  } else {
    return [&]<class Op, class... A>(std::type_identity<node<Op, A...>>) {
      if constexpr (is_table_node<Op, A...>()) {
        return [&]<class... C>(type_list<C...>) {
          return X{Op{}, {{{t.template get<C>()}...}, t.conflict}};
        }(typename origins_of<X>::type{});
      } else {
        return assemble(Op{}, from_table<A>(t)...);
      }
    }(std::type_identity<X>{});
  }
}

template <class Op, class... Ts>
MG_HD constexpr auto make_expr(Op op, Ts&&... ts) {
  return assemble(op, as_expr(std::forward<Ts>(ts))...);
}

// A number made a constant at Origin (Note [Constant origins] in expr.hpp); anything else
// as as_expr.
template <class Origin, class T>
MG_HD constexpr auto as_expr_from(const T& t) {
  if constexpr (std::is_arithmetic_v<T>) {
    return cst<T, Origin>{t};
  } else {
    return as_expr(t);
  }
}
template <class Origin, class Op, class... X>
MG_HD constexpr auto apply_in_from(expr_family, const Op& op, const X&... x) {
  return assemble(op, as_expr_from<Origin>(x)...);
}

// The expression family of detail::call: applying an op records a node.
template <class Op, class... X>
MG_HD constexpr auto apply_in(expr_family, const Op& op, const X&... x) {
  return make_expr(op, x...);
}
}  // namespace detail

template <Expr X>
MG_HD constexpr auto operator+(X&& x) {
  return std::remove_cvref_t<X>(std::forward<X>(x));
}

// Note [Misuse in one sentence]: printing a symbolic value. (A template on the stream, so that
// this header needs no <ostream>.)
template <class Stream, Expr X>
requires requires(Stream& s) { s.flush(); }
Stream& operator<<(Stream& s, const X&) {
  static_assert(detail::always_false_v<X>,
                "metagrad: a traced function's values are symbolic: print mg::to_string(x) for "
                "the formula, or the numbers that mg::value_and_grad returns");
  return s;
}

/// Applies a ctx-free custom op. On static-engine expressions this records a node, on numbers
/// it evaluates the op; mg::tensor has its overload in <metagrad/function.hpp>:
/// ```cpp
/// struct softplus {
///   static auto forward(const auto& x) { using std::exp, std::log; return log(1 + exp(x)); }
///   // d/dx log(1 + e^x) = 1 - 1/(1 + e^x) = 1 - exp(-y)
///   static auto backward(const auto&, const auto& y, const auto& g) {
///     using std::exp; return g * (1 - exp(-y)); }
/// };
/// auto df = mg::grad([](auto x) { return mg::apply<softplus>(x * x); })(0.5);
/// ```
template <class F, class... A>
requires((Expr<A> || ...) || (std::is_arithmetic_v<std::remove_cvref_t<A>> && ...) ||
         std::is_same_v<detail::family_t<A...>, detail::dual_family>) MG_HD
    constexpr auto apply(const A&... a) {
  constexpr bool arity_ok = sizeof...(A) == detail::op_arity<F>();
  if constexpr (arity_ok) detail::diagnose_static_op<F>();
  static_assert(arity_ok,
                "metagrad: apply<F> got a different number of inputs than F::forward takes (an "
                "mg::Function, whose forward takes a ctx first, runs in the runtime engine only, "
                "on mg::tensor)");
  if constexpr (StaticOp<F> && arity_ok) {
    return detail::call(F{}, a...);
  } else {
    return cst<double>{0.0};  // after the assertion: no cascade of errors
  }
}

}  // namespace mg
