// Custom operations on mg::tensor, one verb for both kinds:
//
// - `mg::apply<F>(x...)` with a ctx-free op F (mg::StaticOp, like the built-ins in
//   <metagrad/ops/>): exactly what a built-in op does (detail::call): an elementwise F runs as one
//   kernel from its struct on the tensors' device, and its node's backward is one fused kernel
//   (Note [One formula]). The same struct also works in the static engine.
// - `mg::apply<F>(args...)` with an `mg::Function` F: torch.autograd.Function as a struct of
//   static functions (forward, backward or vjp, optionally setup_context and jvp) sharing an
//   mg::context (<metagrad/context.hpp>).
//
// A struct that is neither is rejected at compile time with one sentence naming what is missing.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/autograd.hpp>
#include <metagrad/call_site.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/context.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/runtime/forward_ad.hpp>
#include <metagrad/runtime/profiler.hpp>
#include <metagrad/tensor.hpp>

namespace mg {

namespace detail {
// The context type of Function F: mg::context_with<F::state> if F declares a state type.
template <class F>
struct context_type {
  using type = context;
};
template <class F>
requires requires { typename F::state; }
struct context_type<F> {
  using type = context_with<typename F::state>;
};
template <class F>
using context_for = typename context_type<F>::type;

template <std::size_t>
using tensor_arg = const tensor&;

template <class F, std::size_t... I>
concept function_forward_takes = requires(context_for<F>& ctx, tensor_arg<I>... x) {
  F::forward(ctx, x...);
};

// The number of tensors the forward of Function F takes when probed with tensors only (1..6;
// 0 if none): how apply tells a Function from a ctx-free op before it sees the arguments.
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
concept function_has_backward = requires(context_for<F>& ctx, const tensor_list& g) {
  F::backward(ctx, g);
};
template <class F>
concept has_vjp = requires(context_for<F>& ctx, const tensor_list& g) {
  F::vjp(ctx, g);
};
template <class F>
concept has_jvp = requires(context_for<F>& ctx, const tensor_list& t) {
  F::jvp(ctx, t);
};
template <class F>
concept has_setup_context = requires {
  &F::setup_context;
};
template <class F>
concept function_backward_ok = function_has_backward<F> || has_vjp<F>;

template <class F, class... A>
concept function_forward_ok = requires(context_for<F>& ctx, const A&... a) {
  F::forward(ctx, a...);
}
|| (has_setup_context<F> && requires(const A&... a) { F::forward(a...); });

// Does F look like an mg::Function rather than a ctx-free op? A forward callable on numbers
// makes it a ctx-free op; that is checked first, since probing a generic forward with a context
// would instantiate its body.
template <class F>
concept function_like = (op_arity<F>() == 0) && ((function_arity<F>() > 0) ||
                                                 function_backward_ok<F> || has_setup_context<F>);

template <class F>
constexpr bool once_differentiable_v = requires {
  requires static_cast<bool>(F::once_differentiable);
};

// Entry points call this so a malformed Function is reported in one sentence.
template <class F>
constexpr void diagnose_function() {
  static_assert(function_backward_ok<F>,
                "metagrad: an mg::Function needs static mg::tensor_list "
                "backward(mg::context&, const mg::tensor_list&) (or vjp) returning one gradient "
                "per differentiable input");
}

template <class T>
inline constexpr bool is_tensor_tuple_v = false;
template <class... T>
inline constexpr bool is_tensor_tuple_v<std::tuple<T...>> = (std::same_as<T, tensor> && ...);

// What forward or backward returned, as a list.
template <class R>
tensor_list as_tensor_list(R&& r) {
  using T = std::remove_cvref_t<R>;
  if constexpr (std::is_convertible_v<T, tensor> && !std::same_as<T, tensor_list>) {
    return tensor_list{tensor(std::forward<R>(r))};
  } else if constexpr (std::same_as<T, tensor_list>) {
    return std::forward<R>(r);
  } else {
    static_assert(is_tensor_tuple_v<T>,
                  "metagrad: an mg::Function's forward, backward and jvp return an mg::tensor, "
                  "an mg::tensor_list or a std::tuple of mg::tensor");
    return std::apply([](const auto&... t) { return tensor_list{t...}; }, r);
  }
}
// ... and back in forward's type.
template <class R>
R from_tensor_list(const tensor_list& outs) {
  if constexpr (std::same_as<R, tensor>) {
    return outs[0];
  } else if constexpr (std::same_as<R, tensor_list>) {
    return outs;
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) { return R{outs[I]...}; }
    (std::make_index_sequence<std::tuple_size_v<R>>{});
  }
}

template <class A>
void append_differentiable(tensor_list& out, const A& a) {
  if constexpr (std::same_as<A, tensor> || std::same_as<A, tensor_list>) append_tensors(out, a);
}

inline bool contains_impl(const tensor_list& l, const impl_ptr& p) {
  for (const auto& t : l)
    if (t.impl() == p) return true;
  return false;
}

// The node recorded over the result of a once_differentiable backward that was asked to be
// differentiable (torch's DelayedError): differentiating through it throws.
struct delayed_error_node : graph_node {
  std::string function;
  std::vector<edge> next;
  std::vector<tensor_meta> meta;
  const char* name() const override { return "once_differentiable"; }
  std::span<edge> next_edges() override { return next; }
  std::span<tensor_meta> outputs() override { return meta; }
  void backward(std::span<impl_ptr>, std::span<impl_ptr>) {
    fail(function,
         ": its backward is once_differentiable, so it cannot be differentiated again (double "
         "backward reached it); remove `once_differentiable` and write backward with mg ops to "
         "differentiate it twice");
  }
};

struct function_node_base : graph_node {
  std::vector<edge> next;
  std::vector<tensor_meta> meta;
  std::vector<saved_variable> saved_values;
  std::span<edge> next_edges() override { return next; }
  std::span<tensor_meta> outputs() override { return meta; }
  std::span<saved_variable> saved() override { return saved_values; }
  bool wants_undefined() const override { return true; }
};

template <class F>
struct function_node : function_node_base {
  context_for<F> ctx;
  const char* name() const override { return op_name<F>(); }
  void backward(std::span<impl_ptr> grads, std::span<impl_ptr> out);
};

// Runs an mg::Function: forward, its node, its outputs, backward (the parts of apply that need
// the context's internals).
struct function_access {
  template <class F>
  static tensor_list call_backward(context_for<F>& ctx, const tensor_list& g) {
    if constexpr (function_has_backward<F>) {
      return as_tensor_list(F::backward(ctx, g));
    } else {
      return as_tensor_list(F::vjp(ctx, g));
    }
  }

  template <class F>
  static void backward(function_node<F>& n, std::span<impl_ptr> grads, std::span<impl_ptr> out) {
    auto& ctx = n.ctx;
    tensor_list g(grads.size());
    for (std::size_t k = 0; k < grads.size(); ++k) {
      if (grads[k]) {
        g[k] = tensor(std::move(grads[k]));
      } else if (ctx.materialize_) {
        const tensor_meta& m = n.meta[k];
        g[k] = zeros(m.shape(), {.dtype = m.dtype, .device = m.device});
      }
    }
    tensor_list gs;
    if constexpr (once_differentiable_v<F>) {
      const bool differentiable = grad_mode();
      {
        grad_mode_guard off(false);
        gs = call_backward<F>(ctx, g);
      }
      bool any = false;
      for (const auto& t : g) any = any || (t.defined() && t.requires_grad());
      if (differentiable && any) wrap_delayed_error(gs, g, n.name());
    } else {
      gs = call_backward<F>(ctx, g);
    }
    const std::size_t D = n.next.size();
    bool extra = false;
    for (std::size_t i = D; i < gs.size(); ++i) extra = extra || gs[i].defined();
    if (gs.size() < D || extra)
      fail(n.name(), ": backward returned ", gs.size(), " gradient(s) but forward took ", D,
           " differentiable input(s) (tensors, and the elements of tensor lists); return one "
           "gradient per differentiable input (an undefined mg::tensor{} for an input without "
           "one)");
    for (std::size_t i = 0; i < D; ++i)
      if (n.next[i] && gs[i].defined()) out[i] = gs[i].impl();
  }

  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  static void wrap_delayed_error(tensor_list& gs, const tensor_list& g, const char* function) {
    tensor_list in, outs;
    for (const auto& t : g)
      if (t.defined() && t.requires_grad()) in.push_back(t);
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < gs.size(); ++i)
      if (gs[i].defined() && is_floating(gs[i].dtype())) {
        gs[i] = tensor(alias_of(*gs[i].impl()));
        outs.push_back(gs[i]);
      }
    if (outs.empty()) return;
    auto e = new_graph_node<delayed_error_node>();
    e->function = function;
    e->next.resize(in.size());
    e->meta.resize(outs.size());
    record_node(e, in, outs);
  }

  template <class F, class... A>
  static auto run(const A&... args) {
    const prof::op_range profiled(&op_name<F>, args...);  // <metagrad/profiler.hpp>
    using Ctx = context_for<F>;
    tensor_list inputs;
    (append_differentiable(inputs, args), ...);
    bool any = false;
    for (const auto& t : inputs) any = any || (t.defined() && t.requires_grad());
    const bool record = grad_mode() && any;
    auto n = new_graph_node<function_node<F>>();
    Ctx& ctx = n->ctx;
    ctx.name_ = op_name<F>();
    ctx.needs_.resize(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i)
      ctx.needs_[i] = record && inputs[i].defined() && inputs[i].requires_grad();
    constexpr bool split = !requires(Ctx & c) { F::forward(c, args...); };
    auto result = [&] {
      grad_mode_guard off(false);
      if constexpr (split) {
        return F::forward(args...);
      } else {
        return F::forward(ctx, args...);
      }
    }();
    using R = std::remove_cvref_t<decltype(result)>;
    tensor_list outs = as_tensor_list(std::move(result));
    for (std::size_t k = 0; k < outs.size(); ++k)
      if (!outs[k].defined())
        fail(ctx.name_, ": forward returned an undefined tensor as output ", k,
             "; return defined tensors only");
    if constexpr (split) {
      grad_mode_guard off(false);
      if constexpr (requires { F::setup_context(ctx, inputs, outs); }) {
        F::setup_context(ctx, inputs, outs);
      } else {
        static_assert(
            requires { F::setup_context(ctx, std::forward_as_tuple(args...), outs); },
            "metagrad: setup_context takes (ctx, const mg::tensor_list& inputs, const "
            "mg::tensor_list& outputs) or (ctx, const std::tuple<const A&...>& args, outputs)");
        F::setup_context(ctx, std::forward_as_tuple(args...), outs);
      }
    }
    tensor_list tangents;
    if (forward_ad_active()) tangents = output_tangents<F>(ctx, inputs, outs);
    finish(*n, n, inputs, outs, record);
    for (std::size_t k = 0; k < tangents.size(); ++k)
      if (tangents[k].defined()) set_tangent<lazy_v<F>>(outs[k].impl(), tangents[k], ctx.name_, k);
    return from_tensor_list<R>(outs);
  }

  // The outputs' tangents from F::jvp, when an input has one (forward-mode AD).
  template <class F>
  static tensor_list output_tangents(context_for<F>& ctx, const tensor_list& inputs,
                                     const tensor_list& outs) {
    tensor_list t(inputs.size());
    bool any = false;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined()) {
        t[i] = tangent_of(*inputs[i].impl());
        any = any || t[i].defined();
      }
    if (!any) return {};
    if constexpr (has_jvp<F>) {
      for (std::size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i].defined() && !t[i].defined() && is_floating(inputs[i].dtype()))
          t[i] =
              zeros(inputs[i].shape(), {.dtype = inputs[i].dtype(), .device = inputs[i].device()});
      tensor_list r = as_tensor_list(F::jvp(ctx, t));
      if (r.size() != outs.size())
        fail(ctx.name_, ": jvp returned ", r.size(), " tangent(s) for ", outs.size(),
             " output(s); return one tangent per output");
      ctx.for_forward_.clear();
      return r;
    } else {
      fail(ctx.name_,
           ": an input has a forward-mode tangent (mg::forward_ad::make_dual) but the Function "
           "has no static jvp(mg::context&, const mg::tensor_list& tangents); define it");
    }
  }

  // Connects the node (when recording), gives outputs their handles, saves what was asked.
  template <class F>
  static void finish(function_node<F>& n, const std::shared_ptr<graph_node>& self,
                     const tensor_list& inputs, tensor_list& outs, bool record) {
    auto& ctx = n.ctx;
    const char* name = ctx.name_;
    for (const auto& d : ctx.dirty_) {
      if (!contains_impl(inputs, d.impl()))
        fail(name, ": mark_dirty was given a tensor (shape ", shape_string(d.shape()),
             ") that is not an input of forward; mark only inputs modified in place");
      if (!contains_impl(outs, d.impl()))
        fail(name, ": mark_dirty was given an input (shape ", shape_string(d.shape()),
             ") that forward did not return; return every input it modifies in place");
    }
    for (const auto& t : ctx.non_differentiable_)
      if (!contains_impl(outs, t.impl()))
        fail(name, ": mark_non_differentiable was given a tensor (shape ", shape_string(t.shape()),
             ") that forward did not return; mark only outputs");
    std::vector<bool> diff(outs.size());
    const tensor_list returned = outs;
    for (std::size_t k = 0; k < outs.size(); ++k) {
      const impl_ptr o = outs[k].impl();
      diff[k] = is_floating(o->dtype()) && !contains_impl(ctx.non_differentiable_, o);
      if (contains_impl(ctx.dirty_, o)) {
        if (record && o->requires_grad && !o->grad_fn)
          fail(name,
               ": forward modified in place (mark_dirty) a leaf tensor that requires grad "
               "(shape ",
               shape_string(o->shape),
               "); pass a clone() of it, or apply the function under mg::no_grad_guard");
        if (record && o->is_view)
          fail(name, ": mark_dirty of a view (shape ", shape_string(o->shape),
               ") is not supported; modify the tensor it views, or a clone()");
        bump_version<lazy_v<F>>(*o);
      } else {
        // a fresh handle: an input returned as is keeps its own history; a tensor returned twice
        // is one output tensor, as in torch (its history names the last position)
        std::size_t j = 0;
        while (j < k && returned[j].impl() != o) ++j;
        outs[k] = j < k ? outs[j] : tensor(alias_of(*o));
      }
    }
    if (record) {
      n.next.resize(inputs.size());
      n.meta.resize(outs.size());
      record_node(self, inputs, outs);
      for (std::size_t k = 0; k < outs.size(); ++k)
        if (!diff[k]) outs[k].impl()->grad_fn = nullptr;
      n.saved_values.resize(ctx.to_save_.size());
      for (std::size_t i = 0; i < ctx.to_save_.size(); ++i) {
        const impl_ptr& t = ctx.to_save_[i].impl();
        if (!t) continue;
        std::size_t k = 0;
        while (k < returned.size() && returned[k].impl() != t) ++k;
        if (k < returned.size())
          n.saved_values[i].save(outs[k].impl(), diff[k], true, name);
        else
          n.saved_values[i].save(t, false, true, name);
      }
      ctx.node_ = &n;
      ctx.saved_ = &n.saved_values;
      ctx.to_save_.clear();
    }
    ctx.for_forward_.clear();
    ctx.dirty_.clear();
    ctx.non_differentiable_.clear();
  }
};

template <class F>
void function_node<F>::backward(std::span<impl_ptr> grads, std::span<impl_ptr> out) {
  function_access::backward(*this, grads, out);
}
}  // namespace detail

/// A torch.autograd.Function as a struct of static functions:
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
/// - `forward(ctx, args...)` takes tensors, lists of tensors (`mg::tensor_list`) and any other
///   values (numbers, options: not differentiable), and returns an `mg::tensor`, an
///   `mg::tensor_list` or a `std::tuple` of tensors (several outputs). It runs without
///   recording. The split form: `forward(args...)` without a context, plus
///   `static void setup_context(ctx, const mg::tensor_list& inputs, const mg::tensor_list&
///   outputs)` (inputs: the tensors, lists flattened) or `setup_context(ctx, const
///   std::tuple<const A&...>& args, outputs)` (every argument, typed).
/// - `backward(ctx, const mg::tensor_list& grad_outputs)` (or `vjp`) returns one gradient per
///   differentiable input: each tensor argument, each element of a list argument, in order
///   (undefined for none; extra trailing undefined gradients are ignored). It runs recorded
///   under `create_graph`, so a backward written with mg ops differentiates again.
/// - `jvp(ctx, const mg::tensor_list& tangents)` (optional): forward-mode AD, one tangent per
///   output from one per differentiable input (zeros for an input without one).
/// - `static constexpr bool once_differentiable = true;` runs backward without recording;
///   differentiating its result again throws an mg::error naming the function.
/// - Non-tensor state: declare `struct state {...};` and take `mg::context_with<state>&`.
template <class F>
concept Function = (detail::op_arity<F>() == 0) && detail::function_backward_ok<F>;

namespace detail {
template <class F, class... A>
auto apply_at(const call_site& site, const A&... args) {
  const site_scope here(site);  // Note [Call sites]: its nodes name the caller's line
  if constexpr (function_like<F>) {
    diagnose_function<F>();
    if constexpr (Function<F>) {
      static_assert(function_forward_ok<F, A...>,
                    "metagrad: apply<F>(args...) cannot call F::forward(ctx, args...) (nor "
                    "F::forward(args...) with F::setup_context): check its parameter types");
      return function_access::run<F>(args...);
    } else {
      return tensor{};
    }
  } else {
    diagnose_static_op<F>();
    static_assert((std::same_as<A, tensor> && ...),
                  "metagrad: a ctx-free op (mg::StaticOp) is applied to mg::tensor arguments");
    if constexpr (StaticOp<F>) {
      static_assert(op_arity<F>() == sizeof...(A),
                    "metagrad: apply<F> got a different number of tensors than F::forward takes");
      return call(F{}, args...);
    } else {
      return tensor{};
    }
  }
}

// A list of tensors as the first argument of apply, converted where apply is written.
struct tracked_list {
  const tensor_list& value;
  call_site site;
  tracked_list(const tensor_list& t, call_site s = {}) noexcept : value(t), site(s) {}
};
}  // namespace detail

/// Applies a custom op, recording one node:
/// ```cpp
/// auto y = mg::apply<my_exp>(x);          // an mg::Function
/// auto [s, i] = mg::apply<sort_op>(x);    // a Function with two outputs (a std::tuple)
/// auto z = mg::apply<softplus>(x);        // a ctx-free op (mg::StaticOp): also in the static
/// engine
/// ```
/// Its nodes name the file and line of the call (anomaly detection) when the first argument is
/// a tensor or a list of tensors (the usual case).
template <class F, class... A>
auto apply(detail::tracked x0, const A&... xs) {
  return detail::apply_at<F>(x0.site, x0.value, xs...);
}
template <class F, class... A>
auto apply(detail::tracked_list x0, const A&... xs) {
  return detail::apply_at<F>(x0.site, x0.value, xs...);
}
template <class F, class A0, class... A>
requires(detail::function_like<F> && !std::same_as<A0, tensor> &&
         !std::same_as<A0, tensor_list>) auto apply(const A0& a0, const A&... xs) {
  return detail::apply_at<F>(call_site{}, a0, xs...);
}

}  // namespace mg
