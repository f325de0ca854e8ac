// mg::fuse's node: a static callable lifted into the runtime engine as ONE recorded node, whose
// forward is the array evaluator's value of f (or its fused loop, which also yields every
// gradient) and whose backward is the statically generated vector-Jacobian product; under
// create_graph the backward runs the same sweep on tensors (tensor_policy), so it is recorded.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <xtensor/xarray.hpp>

#include <metagrad/autograd.hpp>
#include <metagrad/call_site.hpp>
#include <metagrad/error.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/runtime/profiler.hpp>
#include <metagrad/static/evaluator.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>
#include <metagrad/xt/array_family.hpp>

namespace mg::detail {

// The static sweep on mg::tensor values: every op is a recorded tensor op, so the gradients it
// computes are themselves differentiable (used by fused nodes under create_graph).
struct tensor_policy {
  template <class Op, class X>
  static auto keep(X&& x) {
    return std::remove_cvref_t<X>(std::forward<X>(x));
  }
  template <class G, class X>
  static auto reduce_like(const G& g, const X& x) {
    if constexpr (std::is_same_v<G, tensor> && std::is_same_v<X, tensor>) {
      return g.shape() == x.shape() ? g : sum_to(g, x.shape());
    } else {
      return g;
    }
  }
  template <class B>
  static auto keep_bwd(B&& b) {
    return std::remove_cvref_t<B>(std::forward<B>(b));
  }
};

template <class T, std::size_t... k>
auto as_arrays(const std::array<tensor, sizeof...(k)>& xs, std::index_sequence<k...>) {
  return std::tuple{xs[k].template to_xtensor<T>()...};
}

template <class F, std::size_t N>
struct fused_node : graph_node {
  F f;
  std::array<edge, N> next;
  std::array<saved_variable, N> saved_values;
  tensor_meta meta;
  // For a fusible f (a full sum of an elementwise expression over equal shapes) the forward
  // loop already produced d f / d x_k; backward then only scales them by the incoming gradient.
  std::array<tensor, N> cached;

  explicit fused_node(F fn) : f(std::move(fn)) {}
  const char* name() const override { return "fused"; }
  std::span<edge> next_edges() override { return next; }
  std::span<tensor_meta> outputs() override { return {&meta, 1}; }
  std::span<saved_variable> saved() override { return saved_values; }
  void surrender_extra() override {
    for (auto& c : cached)
      if (c.defined()) drain().others.push_back(c.impl());
    cached = {};
  }

  void backward(std::span<impl_ptr> grads, std::span<impl_ptr> out) {
    if (!grads[0]) return;
    std::array<tensor, N> x;
    for (std::size_t i = 0; i < N; ++i) x[i] = tensor(saved_values[i].unpack(this, name()));
    const tensor g(std::move(grads[0]));
    std::array<tensor, N> gs;
    if (grad_mode()) {
      gs = differentiable_vjp(x, g, std::make_index_sequence<N>{});
    } else if (cached[0].defined()) {
      for (std::size_t i = 0; i < N; ++i) gs[i] = g * cached[i];
    } else if (g.dtype() == f32 && all_f32(x)) {
      gs = static_vjp<float>(x, g, std::make_index_sequence<N>{});
    } else {
      gs = static_vjp<double>(x, g, std::make_index_sequence<N>{});
    }
    for (std::size_t i = 0; i < N; ++i)
      if (next[i]) out[i] = gs[i].impl();
  }

  static bool all_f32(const std::array<tensor, N>& x) {
    for (const auto& t : x)
      if (t.dtype() != f32) return false;
    return true;
  }

  // First order: the static engine's generated backward on the raw elements; nothing recorded.
  template <class T, std::size_t... k>
  std::array<tensor, N> static_vjp(const std::array<tensor, N>& x, const tensor& g,
                                   std::index_sequence<k...> ks) const {
    const auto xs = as_arrays<T>(x, ks);
    const xt::xarray<T> seed = g.template to_xtensor<T>();
    const auto r = std::apply(
        [&](const auto&... a) {
          return evaluator<array_family>::template vjp<k...>(f, seed, a...);
        },
        xs);
    return {tensor(xt::xarray<T>(std::get<k>(r)))...};
  }

  // Under create_graph: the same sweep with mg::tensor values, so the gradients are recorded.
  template <std::size_t... k>
  std::array<tensor, N> differentiable_vjp(const std::array<tensor, N>& x, const tensor& g,
                                           std::index_sequence<k...>) const {
    using E = traced_t<F, N>;
    const E e = trace(f, std::make_index_sequence<N>{});
    using Args = tuple<std::conditional_t<k == k, tensor, void>...>;
    const Args a{{x[k]}...};
    sweep<E, Args, tensor_policy, tensor> s(e, a);
    s.forward();
    s.backward(g);
    return {to_tensor(s.template gradient<k>(g, tensor{}))...};
  }
  static tensor to_tensor(const tensor& t) { return t; }
  template <class V>
  requires std::is_arithmetic_v<V>
  static tensor to_tensor(V v) { return tensor(static_cast<double>(v), mg::f64); }
};

inline void check_cpu(const tensor& t) {
  if (t.device() != device::cpu)
    fail("fuse: a tensor of shape ", shape_string(t.shape()),
         " is on device cuda; mg::fuse runs on device cpu so far (on the device, mg::cuda::vjp "
         "fuses over device arrays): move the operands with .to(mg::device::cpu)");
}

template <class F>
struct fused_fn {
  F f;

  // The tensor arguments: the first as detail::tracked, so that the node names the caller's line
  // (Note [Call sites]).
  template <class... A>
  requires(std::is_same_v<A, tensor>&&...) tensor operator()(tracked x0, const A&... xs) const {
    const site_scope here(x0.site);
    const prof::op_range profiled("fused", x0.value, xs...);  // <metagrad/profiler.hpp>
    return run(x0.value, xs...);
  }

 private:
  template <class... A>
  tensor run(const A&... x) const {
    constexpr std::size_t N = sizeof...(A);
    const bool f32_only = ((x.dtype() == f32) && ...);
    (check_cpu(x), ...);  // on device cuda: mg::cuda::vjp over device arrays
    // forward-mode AD: f op by op, each op giving its output a tangent
    if (forward_ad_active() && (has_tangent(*x.impl()) || ...)) return tensor(f(x...));
    const bool record = grad_mode() && (x.requires_grad() || ...);
    auto n = record ? new_graph_node<fused_node<F, N>>(f) : nullptr;
    tensor y;
    if constexpr (fusible_v<traced_t<F, N>>) {
      if (record && full_sum(trace(f, std::make_index_sequence<N>{})) && same_shape(x...)) {
        y = f32_only ? forward_and_gradients<float>(*n, x...)
                     : forward_and_gradients<double>(*n, x...);
      }
    }
    if (!y.defined()) y = f32_only ? forward<float>(x...) : forward<double>(x...);
    if (!record) return y;
    record_node(n, std::array<tensor, N>{x...}, std::array<tensor, 1>{y});
    std::size_t i = 0;
    ((n->saved_values[i++].save(x.impl(), false, true, "fused")), ...);
    return y;
  }

  template <class... A>
  static bool same_shape(const tensor& first, const A&... x) {
    return ((x.shape() == first.shape()) && ...);
  }

  // One fused loop: the value, and every gradient kept in the node for backward.
  template <class T, class Node, class... A>
  tensor forward_and_gradients(Node& n, const A&... x) const {
    auto [v, g] = [&]<std::size_t... k>(std::index_sequence<k...>) {
      return evaluator<array_family>::template value_and_grad<k...>(f,
                                                                    x.template to_xtensor<T>()...);
    }
    (std::index_sequence_for<A...>{});
    [&]<std::size_t... k>(std::index_sequence<k...>) {
      ((n.cached[k] = tensor(std::get<k>(g))), ...);
    }
    (std::index_sequence_for<A...>{});
    return tensor(static_cast<T>(v), detail::dtype_of<T>());
  }

  template <class T, class... A>
  tensor forward(const A&... x) const {
    return tensor(evaluator<array_family>::value(f, x.template to_xtensor<T>()...));
  }
};

}  // namespace mg::detail
