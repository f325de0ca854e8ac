// The gradient harness every op test goes through (see docs/testing.md).
//
// check_static(f, x...) on float64 scalars:
//   1. value: the static engine's value equals f called on plain doubles;
//   2. first order: each static gradient matches a central finite difference;
//   3. second order: grad of grad (generated at compile time) matches a central difference of
//      the static gradient.
// Runtime and Thrust checks add to this in their own headers (harness_runtime.hpp,
// harness_thrust.hpp), comparing against the static engine.
#pragma once

#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>

#include <metagrad/error.hpp>
#include <metagrad/static.hpp>

namespace mg_test {

// EXPECT that f throws mg::error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected mg::error";
  } catch (const mg::error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// The message of the mg::error f throws (a test failure if it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const mg::error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected mg::error";
  return {};
}

inline constexpr double fd_step = 1e-6;

// Central difference of f with respect to argument I at x.
template <std::size_t I, class F, class... X>
double central_difference(const F& f, std::tuple<X...> x, double h = fd_step) {
  auto plus = x, minus = x;
  std::get<I>(plus) += h;
  std::get<I>(minus) -= h;
  return (std::apply(f, plus) - std::apply(f, minus)) / (2 * h);
}

// |a - b| <= tol * max(1, |a|, |b|)
inline ::testing::AssertionResult near_rel(double a, double b, double tol) {
  const double scale = std::fmax(1.0, std::fmax(std::fabs(a), std::fabs(b)));
  if (std::fabs(a - b) <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a << " vs " << b << " (tolerance " << tol * scale << ")";
}

template <class T>
auto as_tuple(const T& t) {
  if constexpr (requires { std::tuple_size<T>::value; }) {
    return t;
  } else {
    return std::tuple{t};
  }
}

// Checks value, first and second order of the static engine on f at the point x (float64).
template <class F, class... X>
void check_static(const F& f, X... xs) {
  constexpr std::size_t n = sizeof...(X);
  const auto at = std::tuple{double(xs)...};
  auto [value, grads] = mg::value_and_grad(f)(double(xs)...);
  EXPECT_TRUE(near_rel(value, f(double(xs)...), 1e-14)) << "value";
  const auto g = as_tuple(grads);
  const auto first = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    EXPECT_TRUE(near_rel(std::get<I>(g), central_difference<I>(f, at), 1e-6)) << "d/dx" << I;
  };
  // second order: entry (I, J) of the Hessian against a difference of the static gradient
  const auto second = [&]<std::size_t I, std::size_t J>(std::integral_constant<std::size_t, I>,
                                                        std::integral_constant<std::size_t, J>) {
    auto gi = [&](auto... y) { return mg::grad<I>(f)(y...); };
    const double hij = std::get<J>(as_tuple(mg::grad(mg::grad<I>(f))(double(xs)...)));
    EXPECT_TRUE(near_rel(hij, central_difference<J>(gi, at, 1e-5), 1e-5))
        << "d2/dx" << I << "dx" << J;
  };
  const auto row = [&]<std::size_t I>(std::integral_constant<std::size_t, I> i) {
    first(i);
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      (second(i, std::integral_constant<std::size_t, J>{}), ...);
    }
    (std::make_index_sequence<n>{});
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (row(std::integral_constant<std::size_t, I>{}), ...);
  }
  (std::make_index_sequence<n>{});
}

}  // namespace mg_test
