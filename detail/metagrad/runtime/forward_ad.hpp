// Forward-mode AD on mg::tensor (torch's forward_ad): a tensor may carry a tangent while a dual
// level is open; every recorded op gives its output the tangent J·t of its inputs' tangents.
//
// Note [Tangents from the backward]: an op struct has no jvp; its backward is linear in g, and
// that is enough. For an elementwise op, backward(x..., y, g) returns g·∂y/∂x_i elementwise, so
// with g = t_i (broadcast to the output) component i is the contribution of input i, and the
// output's tangent is their sum. For any other op, backward(x..., y, g) = Jᵀg; with g a dummy
// that requires grad, the gradient of ⟨Jᵀg, t⟩ with respect to g is J·t (the double-vjp trick),
// which needs only the backward to be differentiable — as every built-in backward is. Tangent
// formulas run with forward AD off (a tangent has no tangent), recorded as usual when grad mode
// is on, so a tangent is differentiable with respect to the primals (forward-over-reverse).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <metagrad/error.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/runtime/engine.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/nodes.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg::detail {

// Gives t the tangent r (op and output k name it in errors): same shape and device, t's
// floating dtype. (A template in name only: Note [Lazy members].)
template <int I>
void set_tangent(const impl_ptr& p, tensor r, const char* op, std::size_t k) {
  tensor_impl& t = *p;
  if (!dual_level_open().load()) fail(op, ": a tangent needs an open mg::forward_ad::dual_level");
  if (!is_floating(t.dtype()))
    fail(op, ": output ", k, " is ", dtype_name(t.dtype()),
         "; only floating-point tensors carry tangents");
  if (r.shape() != t.shape)
    fail(op, ": the tangent of output ", k, " has shape ", shape_string(r.shape()),
         " but the output has shape ", shape_string(t.shape), "; a tangent has its primal's shape");
  if (r.device() != t.device())
    fail(op, ": the tangent of output ", k, " is on device ", device_name(r.device()),
         " but the output on device ", device_name(t.device()), "; put it on the same device");
  if (r.dtype() != t.dtype()) {
    suspend_tangents off;
    r = lazy<I>(r).to(t.dtype());
  }
  auto& d = duals();
  std::lock_guard lock(d.m);
  if (d.duals.size() >= 2 * d.pruned) {
    std::erase_if(d.duals, [](const auto& w) { return w.expired(); });
    d.pruned = std::max<std::size_t>(64, d.duals.size());
  }
  d.duals.emplace_back(p);
  // a tangent of its own for a tensor that is no view (Note [Tangents of in-place writes])
  if (!t.is_view && (r.impl().use_count() > 1 || r.impl()->store.use_count() > 1)) {
    suspend_tangents off;  // a recorded copy where the tangent has a graph (forward-over-reverse)
    r = r.requires_grad() ? lazy<I>(r).clone() : tensor(copy_of(*r.impl()));
  }
  t.tangent = r.impl();
}

// Note [Tangents of in-place writes]: as torch's forward grads, the tangent of a view is a view
// of its base's tangent (a view op's tangent is the same view of its input's tangent), and an
// in-place write updates a tangent in place, so the base and its other views see the change:
//   - a tensor whose tangent can take the new one (same shape and dtype, not expanded) gets it
//     copied in;
//   - a view without one gets its region of the base's tangent (zeros, made for the base if it
//     had none), and the new tangent is copied there;
//   - a tensor written without a tangent while its tangent (or its base's) is there gets zeros
//     in its place;
//   - a view without a tangent of its own is read (tangent_of) as its region of its base's
//     tangent, so a view made before its base got a tangent sees the base's.
// So the tangents a tensor is given are its own (set_tangent copies a tangent another tensor
// shares), and a write through one never reaches an unrelated tensor. detach_() drops a tangent.
inline bool takes_tangent(const tensor_impl& tangent, const tensor_impl& t) {
  return tangent.shape == t.shape && tangent.dtype() == t.dtype() && !tangent.is_inference &&
         !tangent.is_expanded();
}

// The region of t's base's tangent that t views (null where there is none, or the base's layout
// does not map t's strides onto its tangent).
inline impl_ptr base_tangent_region(const tensor_impl& t) {
  if (!t.is_view || !t.base || !t.base->tangent) return nullptr;
  const tensor_impl& b = *t.base;
  const tensor_impl& bt = *b.tangent;
  if (!b.is_contiguous() || !bt.is_contiguous() || !takes_tangent(bt, b)) return nullptr;
  auto r = alias_of(bt);
  r->shape = t.shape;
  r->strides = t.strides;
  r->offset = bt.offset + (t.offset - b.offset);
  return r;
}

// The tangent an in-place op reads from t: its own, or its region of its base's.
inline impl_ptr tangent_for_write(const tensor_impl& t) {
  return t.tangent ? t.tangent : base_tangent_region(t);
}

// The tangent ops read from t: its own; for a view without one (made before its base had a
// tangent), its region of its base's, as torch derives a view's forward grad from its base's.
// unpack_dual's primal, make_dual's result, a view detach_()ed and views of them
// (own_tangent_only) read only their own.
inline tensor tangent_of(const tensor_impl& t) {
  return tensor(t.tangent || t.own_tangent_only ? t.tangent : base_tangent_region(t));
}
inline bool has_tangent(const tensor_impl& t) {
  return t.tangent || (t.is_view && t.base && t.base->tangent && !t.own_tangent_only);
}

// Gives p the tangent tr (null: none) of an in-place write's result (Note [Tangents of in-place
// writes]). A template in name only (Note [Lazy members]).
template <int I>
void in_place_tangent(const impl_ptr& p, const impl_ptr& tr, const char* op) {
  tensor_impl& t = *p;
  const bool base_has = t.is_view && t.base && t.base->tangent;
  if (!tr && !t.tangent && !base_has) return;
  if (!dual_level_open().load() || !is_floating(t.dtype())) {
    t.tangent.reset();
    return;
  }
  suspend_tangents off;
  tensor value = tr ? tensor(tr) : zeros(t.shape, {.dtype = t.dtype(), .device = t.device()});
  if (value.dtype() != t.dtype()) value = lazy<I>(value).to(t.dtype());
  // A tangent with a graph (forward over reverse) is written by a recorded copy_, so that it
  // keeps its history; either way views of the tangent (the tangents of t's views) see it.
  const bool graph = value.requires_grad();
  const auto write = [&](tensor dst) {
    if (graph)
      lazy<I>(dst).copy_(value);
    else if (dst.impl()->store != value.impl()->store || dst.impl()->offset != value.impl()->offset)
      copy_into(*dst.impl(), *value.impl());
  };
  // (a user's leaf tangent that requires grad cannot be written by a recorded copy_: replaced)
  if (t.tangent && takes_tangent(*t.tangent, t) &&
      !(graph && t.tangent->requires_grad && !t.tangent->grad_fn)) {
    write(tensor(t.tangent));
    return;
  }
  if (t.is_view && t.base && t.base->is_contiguous() && t.base->device() == t.device()) {
    tensor_impl& b = *t.base;
    if (!b.tangent || !base_tangent_region(t)) {
      tensor fresh = zeros(b.shape, {.dtype = b.dtype(), .device = b.device()});
      if (b.tangent && b.tangent->shape == b.shape) copy_into(*fresh.impl(), *b.tangent);
      set_tangent<I>(t.base, fresh, op, 0);
    }
    if (impl_ptr region = base_tangent_region(t)) {
      tensor r(std::move(region));
      write(r);
      set_tangent<I>(p, r, op, 0);
      return;
    }
  }
  set_tangent<I>(p, value, op, 0);
}

}  // namespace mg::detail

namespace mg::detail {

// Component k of a backward result as a tensor (undefined for mg::no_grad).
template <std::size_t k, class B>
tensor tangent_component(const B& b) {
  if constexpr (std::is_same_v<component_t<k, B>, no_grad>) {
    return tensor{};
  } else {
    return tensor(component<k>(b));
  }
}

template <class Op, class... T>
void propagate_tangent(const Op& op, const tensor& out, const T&... in) {
  constexpr std::size_t N = sizeof...(T);
  const std::array<tensor, N> t{tangent_of(*in.impl())...};
  bool any = false;
  for (const auto& x : t) any = any || x.defined();
  if (!any || !is_floating(out.dtype())) return;
  suspend_tangents off;
  tensor r;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    if constexpr (is_elementwise<Op>()) {
      const auto one = [&]<std::size_t k>(std::integral_constant<std::size_t, k>) {
        if (!t[k].defined()) return;
        constexpr int L = lazy_v<Op>;  // Note [Lazy members]
        tensor g = t[k].to(out.dtype());
        if (g.shape() != out.shape()) g = lazy<L>(g).expand(out.shape());
        tensor c = tangent_component<k>(op.backward(in..., out, g));
        if (!c.defined()) return;
        if (c.shape() != out.shape()) c = lazy<L>(c).expand(out.shape());
        r = r.defined() ? lazy<L>(r) + c : c;
      };
      (one(std::integral_constant<std::size_t, I>{}), ...);
    } else {
      // the double-vjp trick (Note [Tangents from the backward])
      const bool outer = grad_mode();
      grad_mode_guard on(true);
      const tensor g =
          zeros(out.shape(), {.dtype = out.dtype(), .device = out.device()}).requires_grad_();
      const auto b = op.backward(in..., out, g);
      tensor_list ws, us;
      const auto one = [&]<std::size_t k>(std::integral_constant<std::size_t, k>) {
        if (!t[k].defined()) return;
        tensor w = tangent_component<k>(b);
        if (!w.defined() || !w.requires_grad()) return;  // no dependence on g: J_k = 0
        // a gradient in a broadcast shape (matmul's over batch dimensions, or with a 1-D operand
        // promoted), which the engine sums back to the input's shape: <sum_to(w), t> is
        // <w, t expanded>, so the tangent is expanded to w's shape instead
        tensor u = t[k].to(w.dtype());
        if (u.shape() != w.shape() && broadcastable_to(u.shape(), w.shape()))
          u = lazy<lazy_v<Op>>(u).expand(w.shape());
        ws.push_back(std::move(w));
        us.push_back(std::move(u));
      };
      (one(std::integral_constant<std::size_t, I>{}), ...);
      if (!ws.empty()) {
        bool deep = outer && ((in.requires_grad() || ...));
        for (const auto& u : us) deep = deep || (outer && u.requires_grad());
        backward_call c{"forward-mode AD"};
        c.ops = engine_ops_of<lazy_v<Op>>();
        c.create_graph = deep;
        c.keep_graph = deep;
        c.accumulate = false;
        c.allow_unused = true;
        r = tensor(run_backward(ws, us, {g}, c)[0]);
      }
    }
  }
  (std::make_index_sequence<N>{});
  if (!r.defined()) r = zeros(out.shape(), {.dtype = out.dtype(), .device = out.device()});
  set_tangent<lazy_v<Op>>(out.impl(), std::move(r), op_name<Op>(), 0);
}

// cat: the tangents joined (zeros for inputs without one). A template in name only, as
// mg::cat is (Note [Lazy members]).
template <int I = 0>
void cat_tangent(const tensor_list& xs, std::int64_t dim, const tensor& out) {
  bool any = false;
  for (const auto& x : xs) any = any || has_tangent(*x.impl());
  if (!any || !is_floating(out.dtype())) return;
  suspend_tangents off;
  tensor_list ts;
  for (const auto& x : xs) {
    const tensor t = tangent_of(*x.impl());
    ts.push_back(t.defined() ? lazy<I>(t).to(out.dtype())
                             : zeros(x.shape(), {.dtype = out.dtype(), .device = x.device()}));
  }
  set_tangent<I>(out.impl(), mg::cat<I>(ts, dim), "cat", 0);
}

}  // namespace mg::detail
