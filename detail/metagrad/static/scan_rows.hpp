// mg::repeat's per-step inputs, `xs` (Note [Per-step inputs]): the rows a loop's step reads,
// row k at step k, as jax.lax.scan reads its xs.
//
// Note [Per-step inputs]: mg::repeat<N>(step, init, xs) calls step(state, row k of xs) at step
// k. The rows are data: they get no gradient. rows_traits<X> says how X is kept and read:
//   - here, a std::vector or std::array of values (or any type with x[k] and x.size() and no
//     shape()): row k is x[k];
//   - in xt/array_family.hpp, an xtensor array or expression, whose first dimension is the steps:
//     row k of a 1-D array is a number, of a higher-rank one a container of the other dimensions.
// The loop keeps its own copy of xs (shared by the copies of its node): an xtensor expression
// over temporaries of the traced function would not outlive the call that built it. Traced, a
// loop with rows is always one node unless unroll::always says otherwise: a row is run-time
// data, as a constant is, so unrolled steps could not share their slots (Note [Scan]).
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/error.hpp>

namespace mg::detail {

template <class X>
struct rows_traits;  // undefined: X is not rows (mg::repeat says so in one sentence)

template <class X>
requires(
    requires(const X& x) {
      x[std::size_t{0}];
      { x.size() } -> std::convertible_to<std::size_t>;
    } &&
    !requires(const X& x) { x.shape(); }) struct rows_traits<X> {
  using stored = X;
  static stored store(const X& x) { return x; }
  static std::size_t count(const stored& x) { return x.size(); }
  static auto row(const stored& x, std::size_t k) { return x[k]; }
};

template <class X>
concept Rows = requires(const X& x) {
  rows_traits<X>::store(x);
};

// No rows: the loop's step takes the state alone.
struct no_rows {
  static constexpr bool present = false;
  static std::tuple<> at(std::size_t) { return {}; }
};

// The rows a loop node holds: row(k) is step k's input.
template <class X>
struct scan_rows {
  static constexpr bool present = true;
  using traits = rows_traits<X>;
  std::shared_ptr<const typename traits::stored> x;

  auto row(std::size_t k) const { return traits::row(*x, k); }
  auto at(std::size_t k) const { return std::tuple{row(k)}; }
  using row_type = decltype(traits::row(std::declval<const typename traits::stored&>(), 0));
};

// The rows of xs for a loop of N steps: exactly N of them.
template <std::size_t N, class X>
scan_rows<X> make_rows(const X& xs) {
  scan_rows<X> r{
      std::make_shared<const typename rows_traits<X>::stored>(rows_traits<X>::store(xs))};
  const std::size_t n = rows_traits<X>::count(*r.x);
  if (n != N)
    fail("mg::repeat<", N, ">: xs has ", n, " rows, one per step is ", N,
         "; give as many rows as steps (for fewer steps, slice xs)");
  return r;
}

}  // namespace mg::detail
