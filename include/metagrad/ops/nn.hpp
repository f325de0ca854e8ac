// Neural-network functions: softmax, log_softmax (stable: shifted by the max), mse_loss and
// cross_entropy (mean reduction). Composites of the ops of the other families: their gradients,
// first and higher order, are those ops' gradients.
#pragma once

#include <cstdint>
#include <vector>

#include <metagrad/core/shape_rules.hpp>
#include <metagrad/ops/indexing.hpp>
#include <metagrad/ops/shape.hpp>

#include <metagrad/core/dispatch.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/math.hpp>
#include <metagrad/ops/reductions.hpp>

namespace mg {

/// exp(x) / sum(exp(x)) along `dim`.
template <class X>
requires detail::Operands<X>
auto softmax(const X& x, std::int64_t dim, call_site site = {}) {
  const detail::site_scope_for<X> here(site);
  const auto e = mg::exp(x - mg::max(x, dim, true));
  return detail::call(div_op{}, e, mg::sum(e, dim, true));
}

/// log(softmax(x)) along `dim`, without forming softmax (no log of 0 for very negative x).
template <class X>
requires detail::Operands<X>
auto log_softmax(const X& x, std::int64_t dim, call_site site = {}) {
  const detail::site_scope_for<X> here(site);
  const auto shifted = detail::call(sub_op{}, x, mg::max(x, dim, true));
  return detail::call(sub_op{}, shifted, mg::log(mg::sum(mg::exp(shifted), dim, true)));
}

/// mean((input - target)^2) over all elements (torch's reduction='mean').
template <class A, class B>
requires detail::Operands<A, B>
auto mse_loss(const A& input, const B& target, call_site site = {}) {
  const detail::site_scope_for<A, B> here(site);
  return mg::mean(mg::square(input - target));
}

/// The mean over the batch of -log softmax(logits)[n, target[n]]: logits [N, C] (or [C] with one
/// target), targets class indices in [0, C) (torch's cross_entropy, reduction='mean'). Runs on
/// tensors (targets: an i64 mg::tensor, or a vector) and on xtensor arrays, not inside the static
/// engine, whose expressions have no shape until evaluated.
template <class X>
requires detail::Operands<X>
auto cross_entropy(const X& logits, const std::vector<std::int64_t>& targets, call_site site = {}) {
  const detail::site_scope_for<X> here(site);
  const shape_t s = detail::shape_of(logits);
  if (s.empty() || s.size() > 2)
    detail::fail("cross_entropy: expected logits of shape [N, C] (or [C]), got ",
                 detail::shape_string(s));
  const std::int64_t n = s.size() == 2 ? s[0] : 1, c = s.back();
  if (static_cast<std::int64_t>(targets.size()) != n)
    detail::fail("cross_entropy: ", targets.size(), " targets for logits of shape ",
                 detail::shape_string(s), "; give one class index per row (", n, ")");
  std::vector<std::int64_t> flat(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] < 0 || targets[i] >= c)
      detail::fail("cross_entropy: target ", targets[i], " (row ", i, ") is out of range for ", c,
                   " classes (logits of shape ", detail::shape_string(s), "); valid: 0 to ", c - 1);
    flat[i] = static_cast<std::int64_t>(i) * c + targets[i];
  }
  const auto picked = mg::index_select(mg::reshape(mg::log_softmax(logits, -1), {-1}), 0, flat);
  return detail::call(neg_op{}, mg::mean(picked));
}

}  // namespace mg
