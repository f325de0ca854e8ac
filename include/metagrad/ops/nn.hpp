// Neural-network functions: softmax, log_softmax (stable: shifted by the max)
// and mse_loss (mean reduction). Composites of the ops of the other families: their gradients,
// first and higher order, are those ops' gradients.
#pragma once

#include <cstdint>

#include <metagrad/detail/dispatch.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/math.hpp>
#include <metagrad/ops/reductions.hpp>

namespace mg {

/// exp(x) / sum(exp(x)) along `dim`.
template <class X>
requires detail::Operands<X>
auto softmax(const X& x, std::int64_t dim) {
  const auto e = mg::exp(x - mg::max(x, dim, true));
  return detail::call(div_op{}, e, mg::sum(e, dim, true));
}

/// log(softmax(x)) along `dim`, without forming softmax (no log of 0 for very negative x).
template <class X>
requires detail::Operands<X>
auto log_softmax(const X& x, std::int64_t dim) {
  const auto shifted = detail::call(sub_op{}, x, mg::max(x, dim, true));
  return detail::call(sub_op{}, shifted, mg::log(mg::sum(mg::exp(shifted), dim, true)));
}

/// mean((input - target)^2) over all elements (torch's reduction='mean').
template <class A, class B>
requires detail::Operands<A, B>
auto mse_loss(const A& input, const B& target) { return mg::mean(mg::square(input - target)); }

}  // namespace mg
