// mg::repeat<N>(step, init): step applied N times, for fixed-length loops in a traced function.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

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
template <std::size_t N, class Step, class State>
constexpr auto repeat(Step&& step, State init) {
  if constexpr (N == 0) {
    return init;
  } else if constexpr (std::is_same_v<std::remove_cvref_t<decltype(step(std::move(init)))>,
                                      State>) {
    for (std::size_t k = 0; k < N; ++k) init = step(std::move(init));
    return init;
  } else {
    return repeat<N - 1>(step, step(std::move(init)));
  }
}

}  // namespace mg
