// mg::to_string(e): a static-engine expression as readable text, e.g. for a function traced with
// mg::trace:
//   auto f = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
//   mg::to_string(mg::trace<2>(f))   // "(sin(x0) * x1 + exp(x0 * x1)) / (1 + x0 * x0)"
// Arguments print as x0, x1, ...; constants as numbers (an array as `array[3x4]`); add, sub, mul,
// div and neg as operators with the parentheses precedence needs; every other op as its name
// applied to its operands.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/core/type_name.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/static/sweep.hpp>

namespace mg {

namespace detail {

// Precedence of an expression printed at the top of e: 1 sums, 2 products, 3 negation, 4 atoms.
template <class E>
inline constexpr int text_precedence = 4;
template <class... A>
inline constexpr int text_precedence<node<add_op, A...>> = 1;
template <class... A>
inline constexpr int text_precedence<node<sub_op, A...>> = 1;
template <class... A>
inline constexpr int text_precedence<node<mul_op, A...>> = 2;
template <class... A>
inline constexpr int text_precedence<node<div_op, A...>> = 2;
template <class... A>
inline constexpr int text_precedence<node<neg_op, A...>> = 3;

// How the arguments print: x0, x1, ... at the top; inside a loop's step (Note [Scan]), the
// step's captured values as their text outside and its state as s0, s1 (t0, t1 one loop deeper).
struct text_names {
  const std::vector<std::string>* names = nullptr;
  int depth = 0;
};

template <class Op, class... A>
void append_node_text(std::string& s, const node<Op, A...>& n, text_names t);

inline void append_number(std::string& s, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  s += buf;
}

template <class E>
void append_text(std::string& s, const E& e, text_names t = {});

// e, in parentheses when its precedence is below `least`.
template <class E>
void append_operand(std::string& s, const E& e, int least, text_names t) {
  const bool paren = text_precedence<E> < least;
  if (paren) s += '(';
  append_text(s, e, t);
  if (paren) s += ')';
}

template <class E>
void append_text(std::string& s, const E& e, text_names t) {
  if constexpr (is_arg_v<E>) {
    if (t.names) {
      s += (*t.names)[arg_index_v<E>];
    } else {
      s += 'x';
      s += std::to_string(arg_index_v<E>);
    }
  } else if constexpr (is_cst_v<E>) {
    using T = decltype(e.value);
    if constexpr (requires { T::value; } && std::is_empty_v<T>) {
      append_number(s, T::value);  // cst<known<V>>
    } else if constexpr (std::is_arithmetic_v<T>) {
      append_number(s, static_cast<double>(e.value));
    } else if constexpr (requires { e.value.array.shape(); }) {  // a captured array
      s += "array[";
      std::size_t k = 0;
      for (const auto n : e.value.array.shape()) {
        if (k++) s += 'x';
        s += std::to_string(n);
      }
      s += ']';
    } else {
      s += "constant";
    }
  } else {
    append_node_text(s, e, t);
  }
}

// A loop node (Note [Scan]): `repeat<N>(s0 -> step; s0 = initial)`, and `[J]` for component J
// of a state of several values. A loop with per-step inputs (Note [Per-step inputs]) names the
// step's row after its state: `repeat<N>(s0, r0 -> step; s0 = initial)`.
template <class Op, class... A>
void append_loop_text(std::string& s, const node<Op, A...>& n, text_names t) {
  constexpr std::size_t K = Op::ncaps, M = Op::nstate;
  constexpr bool with_row = decltype(n.op.rows)::present;
  std::vector<std::string> inner(K + M + with_row);
  [&]<std::size_t... c>(std::index_sequence<c...>) {
    ((c < K ? append_text(inner[c], child<c>(n), t) : void()), ...);
  }
  (std::index_sequence_for<A...>{});
  for (std::size_t j = 0; j < M; ++j)
    inner[K + j] = static_cast<char>('s' + t.depth % 8) + std::to_string(j);
  if (with_row) inner[K + M] = static_cast<char>('r' + t.depth % 8) + std::string("0");
  const text_names body_names{&inner, t.depth + 1};
  auto list = [&](auto&& item) {
    if (M > 1) s += '(';
    for (std::size_t j = 0; j < M; ++j) {
      if (j) s += ", ";
      item(j);
    }
    if (M > 1) s += ')';
  };
  s += "repeat<" + std::to_string(Op::steps) + ">(";
  list([&](std::size_t j) { s += inner[K + j]; });
  if (with_row) s += ", " + inner[K + M];
  s += " -> ";
  if (M > 1) s += '(';
  [&]<std::size_t... j>(std::index_sequence<j...>) {
    ((s += j ? ", " : "", append_text(s, std::get<j>(n.op.body), body_names)), ...);
  }
  (std::make_index_sequence<M>{});
  if (M > 1) s += ')';
  s += "; ";
  [&]<std::size_t... c>(std::index_sequence<c...>) {
    ((c >= K ? (s += c > K ? ", " : "", s += inner[c], s += " = ", append_text(s, child<c>(n), t))
             : void()),
     ...);
  }
  (std::index_sequence_for<A...>{});
  s += ')';
  if (M > 1) s += '[' + std::to_string(Op::component) + ']';
}

template <class Op, class... A>
void append_node_text(std::string& s, const node<Op, A...>& n, text_names t) {
  constexpr int p = text_precedence<node<Op, A...>>;
  if constexpr (requires { Op::steps, Op::ncaps, Op::nstate, n.op.body; }) {
    append_loop_text(s, n, t);
  } else if constexpr (p == 1 || p == 2) {
    static_assert(sizeof...(A) == 2);
    append_operand(s, child<0>(n), p, t);
    s += std::is_same_v<Op, add_op>   ? " + "
         : std::is_same_v<Op, sub_op> ? " - "
         : std::is_same_v<Op, mul_op> ? " * "
                                      : " / ";
    // a - (b + c) and a / (b * c) keep their parentheses: the right operand binds tighter
    append_operand(s, child<1>(n), p + 1, t);
  } else if constexpr (p == 3) {
    s += '-';
    append_operand(s, child<0>(n), 3, t);
  } else {
    s += op_name<Op>();
    s += '(';
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      ((s += J ? ", " : "", append_text(s, child<J>(n), t)), ...);
    }
    (std::index_sequence_for<A...>{});
    if constexpr (std::is_same_v<Op, pow_op>) {  // the exponent is the op's attribute
      s += ", ";
      append_number(s, n.op.p);
    }
    s += ')';
  }
}

}  // namespace detail

/// A static-engine expression as text: `mg::to_string(sin(x) * y)` is "sin(x0) * x1".
template <Expr E>
std::string to_string(const E& e) {
  std::string s;
  detail::append_text(s, e);
  return s;
}

/// The expression a generic callable builds from N symbolic arguments (mg::arg<0> ...
/// mg::arg<N-1>): `mg::to_string(mg::trace<2>(f))` shows the formula the static engine
/// differentiates.
template <std::size_t N, class F>
auto trace(F&& f) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return detail::as_expr(std::forward<F>(f)(arg<I>{}...));
  }
  (std::make_index_sequence<N>{});
}

}  // namespace mg
