// Custom operations on mg::tensor, one verb for both kinds:
//
// - `mg::apply<F>(x...)` with a ctx-free op F (mg::StaticOp, like the built-ins in
//   <metagrad/ops/>): exactly what a built-in op does (detail::call): an elementwise F runs as one
//   kernel from its struct on the tensors' device, and its node's backward is one fused kernel
//   (Note [One formula]). The same struct also works in the static engine.
// - `mg::apply<F>(x...)` with an `mg::Function` F: torch.autograd.Function as a struct with
//   `static mg::tensor forward(mg::context&, const mg::tensor&...)` and
//   `static mg::tensor_list backward(mg::context&, const mg::tensor_list&)`.
//
// A struct that is neither is rejected at compile time with one sentence naming what is missing.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/autograd.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/detail/nodes.hpp>
#include <metagrad/tensor.hpp>

namespace mg {

class context;

namespace detail {
template <std::size_t>
using tensor_arg = const tensor&;

template <class F, std::size_t... I>
concept function_forward_takes = requires(context& ctx, tensor_arg<I>... x) {
  { F::forward(ctx, x...) } -> std::convertible_to<tensor>;
};

// The number of inputs of Function F: the smallest N in 1..6 that its forward takes.
template <class F>
constexpr std::size_t function_arity() {
  return []<std::size_t... N>(std::index_sequence<N...>) {
    std::size_t r = 0;
    ((r ==
              0 && [&]<std::size_t... I>(std::index_sequence<I...>) {
                return function_forward_takes<F, I...>;
              }(std::make_index_sequence<N + 1>{})
          ? (r = N + 1)
          : 0),
     ...);
    return r;
  }
  (std::make_index_sequence<6>{});
}

template <class F>
concept function_backward_ok = requires(context& ctx, const tensor_list& g) {
  { F::backward(ctx, g) } -> std::convertible_to<tensor_list>;
};

// Does F look like an mg::Function rather than a ctx-free op? A forward callable on numbers
// makes it a ctx-free op; that is checked first, since probing a generic forward with a context
// would instantiate its body.
template <class F>
concept function_like = (op_arity<F>() == 0) &&
                        ((function_arity<F>() > 0) || function_backward_ok<F>);

struct function_node_base;
struct function_access;
}  // namespace detail

/// A torch.autograd.Function as a struct of two static functions:
/// ```cpp
/// struct my_exp {
///   static mg::tensor forward(mg::context& ctx, const mg::tensor& x) {
///     auto r = mg::exp(x); ctx.save_for_backward(r); return r;
///   }
///   static mg::tensor_list backward(mg::context& ctx, const mg::tensor_list& g) {
///     auto [r] = ctx.saved_tensors<1>(); return {g[0] * r};
///   }
/// };
/// static_assert(mg::Function<my_exp>);
/// ```
template <class F>
concept Function = (detail::op_arity<F>() == 0) &&
                   (detail::function_arity<F>() > 0) && detail::function_backward_ok<F>;

/// What `forward` passes to `backward` of an `mg::Function`.
class context {
 public:
  context() = default;
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  /// Keeps tensors for backward (call once, in forward); their versions are checked on use.
  template <class... T>
  requires(std::same_as<std::remove_cvref_t<T>, tensor>&&...) void save_for_backward(
      const T&... t) {
    to_save_ = {t...};
  }

  /// The tensors given to save_for_backward, for structured bindings: `auto [x, y] =
  /// ctx.saved_tensors<2>();`. Throws if N differs from the number saved, if they were freed
  /// (a second backward without retain_graph) or modified in place since.
  template <std::size_t N>
  std::array<tensor, N> saved_tensors() const;

  /// Does input i need a gradient? (Backward may return an undefined tensor for it if not.)
  bool needs_input_grad(std::size_t i) const { return i < needs_.size() && needs_[i]; }

  /// Declares an output as not differentiable: it will not require grad.
  void mark_non_differentiable(const tensor& t) { non_differentiable_.push_back(t.impl()); }

 private:
  friend struct detail::function_node_base;
  friend struct detail::function_access;

  [[noreturn]] void fail_count(std::size_t n) const {
    detail::fail(name_, ": saved_tensors<", n, ">() but save_for_backward saved ",
                 node_ ? node_->saved().size() : to_save_.size(),
                 " tensor(s); ask for as many as were saved");
  }

  detail::graph_node* node_ = nullptr;
  const char* name_ = "Function";
  std::vector<bool> needs_;
  tensor_list to_save_;
  std::vector<detail::impl_ptr> non_differentiable_;
};

namespace detail {
struct function_node_base : graph_node {
  context ctx;
  std::vector<saved_variable> saved_values;
  std::span<saved_variable> saved() override { return saved_values; }
};

template <class F, std::size_t N>
struct function_node : function_node_base {
  std::array<edge, N> next;
  tensor_meta meta;
  const char* name() const override { return op_name<F>(); }
  std::span<edge> next_edges() override { return next; }
  std::span<tensor_meta> outputs() override { return {&meta, 1}; }

  void apply(std::span<impl_ptr> grads, std::span<impl_ptr> out) override {
    if (!grads[0]) return;
    const tensor_list gs = F::backward(ctx, tensor_list{tensor(std::move(grads[0]))});
    if (gs.size() != N)
      fail(name(), ": backward returned ", gs.size(), " gradient(s) but forward took ", N,
           " input(s); return one gradient per input (an undefined mg::tensor{} for an input "
           "without one)");
    for (std::size_t i = 0; i < N; ++i)
      if (next[i]) out[i] = gs[i].impl();
  }
};

// Runs an mg::Function's forward and records its node (the part of apply that needs context's
// internals).
struct function_access {
  template <class F, class... A>
  static tensor run(const A&... x) {
    constexpr std::size_t N = sizeof...(A);
    const bool record = grad_mode() && (x.requires_grad() || ...);
    auto n = make_node<function_node<F, N>>();
    context& ctx = n->ctx;
    ctx.name_ = op_name<F>();
    if (record)
      for (const tensor* t : {&x...}) ctx.needs_.push_back(t->requires_grad());
    tensor out;
    {
      grad_mode_guard off(false);
      out = F::forward(ctx, x...);
    }
    if (!out.defined()) fail(ctx.name_, ": forward returned an undefined tensor");
    if (!record) return out;
    // A fresh handle on the output's elements, so that an input returned as is keeps its own
    // history; saved tensors that are the output are saved without a strong reference to this
    // node (Note [Graph ownership]).
    tensor y(alias_of(*out.impl()));
    for (const auto& t : ctx.non_differentiable_)
      if (t == out.impl()) return y;
    record_node(n, std::array<tensor, N>{x...}, std::array<tensor, 1>{y});
    n->saved_values.resize(ctx.to_save_.size());
    for (std::size_t i = 0; i < ctx.to_save_.size(); ++i) {
      const auto& t = ctx.to_save_[i].impl();
      n->saved_values[i].save(t == out.impl() ? y.impl() : t, t == out.impl(), true, ctx.name_);
    }
    ctx.to_save_.clear();
    ctx.non_differentiable_.clear();
    ctx.node_ = n.get();
    return y;
  }
};

// Entry points call this so a malformed Function is reported in one sentence.
template <class F>
constexpr void diagnose_function() {
  if constexpr (function_arity<F>() == 0) {
    static_assert(function_arity<F>() > 0,
                  "metagrad: an mg::Function needs static mg::tensor forward(mg::context&, const "
                  "mg::tensor&...) taking 1 to 6 tensors");
  } else {
    static_assert(
        function_backward_ok<F>,
        "metagrad: an mg::Function needs static mg::tensor_list "
        "backward(mg::context&, const mg::tensor_list&) returning one gradient per input");
  }
}
}  // namespace detail

template <std::size_t N>
std::array<tensor, N> context::saved_tensors() const {
  if (!node_) {
    if (to_save_.size() != N) fail_count(N);
    std::array<tensor, N> r;
    for (std::size_t i = 0; i < N; ++i) r[i] = to_save_[i];
    return r;
  }
  const auto saved = node_->saved();
  if (saved.size() != N) fail_count(N);
  std::array<tensor, N> r;
  for (std::size_t i = 0; i < N; ++i) r[i] = tensor(saved[i].unpack(node_, name_));
  return r;
}

/// Applies a custom op to tensors, recording one node:
/// ```cpp
/// auto y = mg::apply<my_exp>(x);     // an mg::Function
/// auto z = mg::apply<softplus>(x);   // a ctx-free op (mg::StaticOp): also in the static engine
/// ```
template <class F, class... A>
requires(std::same_as<A, tensor>&&...) tensor apply(detail::tracked x0, const A&... xs) {
  const detail::site_scope here(x0.site);  // Note [Call sites]: its nodes name this call
  constexpr std::size_t N = 1 + sizeof...(A);
  if constexpr (detail::function_like<F>) {
    detail::diagnose_function<F>();
    if constexpr (Function<F>) {
      static_assert(detail::function_arity<F>() == N,
                    "metagrad: apply<F> got a different number of tensors than F::forward takes");
      return detail::function_access::run<F>(x0.value, xs...);
    } else {
      return tensor{};
    }
  } else {
    detail::diagnose_static_op<F>();
    if constexpr (StaticOp<F>) {
      static_assert(detail::op_arity<F>() == N,
                    "metagrad: apply<F> got a different number of tensors than F::forward takes");
      return detail::call(F{}, x0.value, xs...);
    } else {
      return tensor{};
    }
  }
}

}  // namespace mg
