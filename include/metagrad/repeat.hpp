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

}  // namespace mg
