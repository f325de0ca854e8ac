// mg::repeat<N>(step, init): step applied N times, for fixed-length loops in a traced function.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include <metagrad/expr.hpp>
#include <metagrad/static/scan.hpp>
#include <metagrad/unroll.hpp>

namespace mg {

/// step(step(...step(init)...)), N times. In a function traced by the static engine the state's
/// type changes with every step (an expression's type is its formula), so a plain `for` loop
/// that reassigns it cannot compile; repeat unrolls the loop at compile time instead, and the
/// planner shares the steps' common subexpressions (docs/static.md, "Recurrences"). The state
/// may be a pair or tuple of values, which step returns too. Where a step keeps the state's type
/// (numbers, mg::tensor, xtensor containers) it runs as a plain loop. Data the step reads (the
/// function's other arguments) is captured by the step:
/// ```cpp
/// auto f = [](auto x, auto h) {   // 16 explicit Euler steps of t' = sin(t) * x
///   return mg::repeat<16>([&](auto t) { return t + h * sin(t) * x; }, x);
/// };
/// ```
/// A step that holds constants (a literal such as 0.05, a captured double) is not unrolled: the
/// loop becomes one node that runs the step N times, whose compile time does not grow with N
/// (Note [Scan] in static/scan.hpp). Its second derivatives are available on numbers. U says
/// when to unroll a traced loop (mg::unroll).
template <std::size_t N, unroll U = unroll::automatic, class Step, class State>
constexpr auto repeat(Step&& step, State init) {
  if constexpr (N == 0) {
    return init;
  } else if constexpr (detail::scanned_v<Step, State, U>) {
    return detail::scan<N>(step, std::move(init));
  } else if constexpr (detail::plain_loop_v<Step, State>) {
    // the state keeps its type, or is rebuilt from what step returns (an xtensor array from a
    // lazy xtensor expression, which would refer to the previous state)
    for (std::size_t k = 0; k < N; ++k) init = State(step(std::move(init)));
    return init;
  } else {
    return repeat<N - 1, U>(step, step(std::move(init)));
  }
}

namespace detail {
// Steps K..N-1 of a loop with rows, unrolled (unroll::always, or a state whose type changes).
template <std::size_t K, std::size_t N, class Step, class State, class R>
auto unrolled_rows(Step& step, State s, const R& rows) {
  if constexpr (K == N) {
    return s;
  } else {
    return unrolled_rows<K + 1, N>(step, step(std::move(s), rows.row(K)), rows);
  }
}

template <std::size_t N, unroll U, class Step, class State, class R>
auto repeat_rows(Step& step, State init, const R& rows) {
  using Row = typename R::row_type;
  if constexpr (N == 0) {
    return init;
  } else if constexpr (scanned_v<Step, State, U, Row>) {
    return scan<N>(step, std::move(init), rows);
  } else if constexpr (plain_loop_v<Step, State, Row>) {
    for (std::size_t k = 0; k < N; ++k) init = State(step(std::move(init), rows.row(k)));
    return init;
  } else {
    return unrolled_rows<0, N>(step, std::move(init), rows);
  }
}
}  // namespace detail

/// The same loop reading one row of `xs` per step, as jax.lax.scan reads its xs:
/// step(state, row k of xs) at step k (Note [Per-step inputs]). xs has exactly N rows: an
/// xtensor array whose first dimension is the steps (row k of a 1-D array is a number, of a
/// higher-rank one an array of the other dimensions), or a std::vector or std::array of one
/// value per step. The rows are data, without gradients. In a traced function the loop is one
/// node (unroll::always unrolls it): first derivatives and jvp are available, second derivatives
/// through it are not.
/// ```cpp
/// auto f = [&xs](auto w, auto u) {   // h <- tanh(w h + u x_k) over the rows x_k of xs
///   return mg::repeat<8>([&](auto h, auto x) { return tanh(w * h + u * x); }, 0.0, xs);
/// };
/// ```
template <std::size_t N, unroll U = unroll::automatic, class Step, class State, class Xs>
auto repeat(Step&& step, State init, const Xs& xs) {
  static_assert(detail::Rows<Xs>,
                "metagrad: mg::repeat's xs is data whose rows get no gradient, not a traced "
                "argument: an xtensor array whose first dimension is the steps (include "
                "<metagrad/xtensor.hpp>), or a std::vector or std::array of one value per step");
  if constexpr (!detail::Rows<Xs>) {
    return init;  // after the assertion: no cascade of errors
  } else {
    return detail::repeat_rows<N, U>(step, std::move(init), detail::make_rows<N>(xs));
  }
}

}  // namespace mg
