// Neural-network functions: softmax, log_softmax, logsumexp along a dim (reductions.hpp has
// the function), cross_entropy (mean reduction) and mse_loss.
//
// Note [Fused composites]: softmax, log_softmax, logsumexp and cross_entropy are one op each,
// recorded as one node. The forward shifts by the max for stability, on values (the shift cancels
// in the result, so no gradient flows through it: differentiating the composite through its max
// cost a quarter of a small MLP step for a gradient that is zero); the backward is one formula
// written with the public ops (softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g);
// logsumexp: g exp(x - y); cross_entropy: (softmax(x) - onehot(targets)) g / N), so under
// create_graph it is recorded and second derivatives are exact. softmax and log_softmax name
// their dim `dim`, not a reduce_dims `r`: their results are not reductions (Note [Dual arrays]
// treats an op with `r` as one).
#pragma once

#include <cstdint>
#include <vector>

#include <metagrad/core/algebra.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/shape_rules.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/indexing.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/ops/math.hpp>
#include <metagrad/ops/reductions.hpp>
#include <metagrad/ops/shape.hpp>

namespace mg {

/// exp(x) / sum(exp(x)) along `dim` (Note [Fused composites]).
struct softmax_op {
  static constexpr const char* name = "softmax";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::output;
  std::int64_t dim;
  auto forward(const auto& x) const {
    using A = detail::algebra<decltype(x)>;
    const detail::reduce_dims kept{false, dim, true};
    const auto e = mg::exp(detail::call(sub_op{}, x, detail::kept_max(x, kept)));
    return detail::call(div_op{}, e, A::sum(e, kept));
  }
  // d/dx: y (g - sum(g y))
  auto backward(const auto&, const auto& y, const auto& g) const {
    const auto gy = detail::call(mul_op{}, g, y);
    return detail::call(mul_op{}, y, detail::call(sub_op{}, g, mg::sum(gy, dim, true)));
  }
};
template <class X>
requires detail::Operands<X>
auto softmax(const X& x, std::int64_t dim, call_site site = {}) {
  return detail::call_at(site, softmax_op{dim}, x);
}

/// log(softmax(x)) along `dim`, without forming softmax (no log of 0 for very negative x).
struct log_softmax_op {
  static constexpr const char* name = "log_softmax";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::output;
  std::int64_t dim;
  auto forward(const auto& x) const {
    using A = detail::algebra<decltype(x)>;
    const detail::reduce_dims kept{false, dim, true};
    const auto shifted = detail::call(sub_op{}, x, detail::kept_max(x, kept));
    return detail::call(sub_op{}, shifted, mg::log(A::sum(mg::exp(shifted), kept)));
  }
  // d/dx: g - exp(y) sum(g)
  auto backward(const auto&, const auto& y, const auto& g) const {
    return detail::call(sub_op{}, g, detail::call(mul_op{}, mg::exp(y), mg::sum(g, dim, true)));
  }
};
template <class X>
requires detail::Operands<X>
auto log_softmax(const X& x, std::int64_t dim, call_site site = {}) {
  return detail::call_at(site, log_softmax_op{dim}, x);
}

/// mean((input - target)^2) over all elements (torch's reduction='mean').
template <class A, class B>
requires detail::Operands<A, B>
auto mse_loss(const A& input, const B& target, call_site site = {}) {
  const detail::site_scope_for<A, B> here(site);
  return mg::mean(mg::square(input - target));
}

/// The mean over the rows of logsumexp(row) - row[target] (Note [Fused composites]); `flat`
/// holds row * classes + target per row, checked by mg::cross_entropy.
struct cross_entropy_op {
  static constexpr const char* name = "cross_entropy";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::inputs;
  static constexpr bool saves_indices = true;  // freed with the graph, as index_select's
  std::vector<std::int64_t> flat;
  auto forward(const auto& x) const {
    const auto picked = mg::index_select(mg::reshape(x, {-1}), 0, flat);
    return mg::mean(detail::call(sub_op{}, mg::logsumexp(x, -1), picked));
  }
  // d/dx: (softmax(x) - onehot(targets)) g / N
  auto backward(const auto& x, const auto&, const auto& g) const {
    const shape_t xs = detail::shape_of(x);
    const auto n = static_cast<std::int64_t>(flat.size());
    const auto share = detail::call(div_op{}, g, static_cast<double>(n));
    const auto picked =
        detail::call(index_add_op{{detail::numel_of(xs)}, 0, flat}, mg::expand(share, {n}));
    return detail::call(sub_op{}, detail::call(mul_op{}, mg::softmax(x, -1), share),
                        mg::reshape(picked, xs));
  }
};

namespace detail {
// (a deduced return type, so that the assertion fires where it is called, before the caller's
// other errors)
template <class X>
constexpr auto check_shaped_logits() {
  static_assert(!ZeroD<X>,
                "metagrad: mg::cross_entropy needs its logits' shape, which the static engine's "
                "traced values do not have: compute it on mg::tensor (the runtime engine, one "
                "fused op), or write the loss from logsumexp and the picked logits");
  return true;
}
}  // namespace detail

/// The mean over the batch of -log softmax(logits)[n, target[n]]: logits [N, C] (or [C] with one
/// target), targets class indices in [0, C) (torch's cross_entropy, reduction='mean'). Runs on
/// tensors (targets: an i64 mg::tensor, or a vector) and on xtensor arrays, not inside the static
/// engine, whose expressions have no shape until evaluated.
template <class X>
requires detail::Operands<X>
auto cross_entropy(const X& logits, const std::vector<std::int64_t>& targets, call_site site = {}) {
  detail::check_shaped_logits<X>();
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
  return detail::call_at(site, cross_entropy_op{std::move(flat)}, logits);
}

using nn_ops = op_list<softmax_op, log_softmax_op, cross_entropy_op>;

}  // namespace mg
