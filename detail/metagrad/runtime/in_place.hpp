// In-place ops and views of written tensors (Note [In-place ops], Note [View refresh]): the ops
// that record a write (fill, copy, and as_strided for a view of a written base), the history of
// a base written through a view (copy_slices), and mg::tensor's in-place members.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include <metagrad/error.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/math.hpp>
#include <metagrad/ops/split.hpp>
#include <metagrad/runtime/apply.hpp>
#include <metagrad/runtime/engine.hpp>
#include <metagrad/runtime/forward_ad.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/hooks.hpp>
#include <metagrad/runtime/saved.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg {

namespace detail {

// Where a view's elements lie in its base (a contiguous tensor of shape base_shape).
struct strided_geometry {
  shape_t shape, strides;
  std::int64_t offset = 0;
  shape_t base_shape;
};

// A contiguous tensor of shape geo.base_shape read at geo (a view; the ops below are recorded,
// so the gradients of writes through views are differentiable again).
struct as_strided_op {
  static constexpr const char* name = "as_strided";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::nothing;
  strided_geometry geo;
  // (forward and the backwards are templates: Note [View refresh])
  tensor forward(const auto& x) const {
    const tensor c = x.contiguous();
    auto v = alias_of(*c.impl());
    v->shape = geo.shape;
    v->strides = geo.strides;
    v->offset += geo.offset;
    v->is_view = true;
    v->base = c.impl()->base ? c.impl()->base : c.impl();
    return tensor(std::move(v));
  }
  // d/dx: g at the viewed elements of zeros of x's shape
  tensor backward(const auto&, const auto&, const auto& g) const;
};

// Zeros of shape geo.base_shape with g written at geo: the adjoint of as_strided_op.
struct as_strided_backward_op {
  static constexpr const char* name = "as_strided_backward";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::nothing;
  strided_geometry geo;
  tensor forward(const tensor& g) const {
    const auto& gi = *g.impl();
    auto out = fill_kernel(geo.base_shape, 0.0, gi.dtype(), gi.device());
    auto v = alias_of(*out);
    v->shape = geo.shape;
    v->strides = geo.strides;
    v->offset += geo.offset;
    copy_into(*v, gi);
    return tensor(std::move(out));
  }
  // d/dg: gg at the viewed elements
  tensor backward(const auto&, const auto&, const auto& gg) const {
    return call(as_strided_op{geo}, gg);
  }
};

inline tensor as_strided_op::backward(const auto&, const auto&, const auto& g) const {
  return call(as_strided_backward_op{geo}, g);
}

// The results of fill_ and copy_ (Note [In-place ops]), recorded as torch records them
// (FillBackward, CopyBackwards): the tensor's old value, input 0, is overwritten, so its gradient
// is zero, but it keeps its edge, and a tensor that required grad still does after the write.
struct fill_op {
  static constexpr const char* name = "fill";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::nothing;
  double value;
  tensor forward(const auto& x) const {
    return mg::full(x.shape(), value, {.dtype = x.dtype(), .device = x.device()});
  }
  // d/dx: 0 (x is overwritten)
  tensor backward(const auto&, const auto&, const auto& g) const { return mg::zeros_like(g); }
};
// src (already in the tensor's dtype and on its device) broadcast to the tensor's shape. Only
// the shapes are saved: the source may be a view of the tensor it is written into.
struct copy_op {
  static constexpr const char* name = "copy";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::input_shapes;
  tensor forward(const auto& dst, const auto& src) const {
    const tensor_impl& s = *src.impl();
    if (s.shape == dst.shape()) return tensor(alias_of(s));  // a fresh impl: record gives it a node
    return algebra_impl<tensor>::broadcast(src, dst.shape());
  }
  // d/ddst: 0 (overwritten); d/dsrc: g summed over the broadcast dimensions
  auto backward(const auto&, const auto& src, const auto&, const auto& g) const {
    return grads{mg::zeros_like(g), mg::sum_to(g, shape_of(src))};
  }
};

// The history of a base written in place through a view (torch's CopySlices): input 0 is the
// base before the write (it gets g outside the view), input 1 the value written (g inside). A
// template in name only (Note [View refresh]).
template <int I>
struct copy_slices_node : graph_node {
  strided_geometry geo;
  std::array<edge, 2> next;
  tensor_meta meta;
  const char* name() const override { return "copy_slices"; }
  std::span<edge> next_edges() override { return next; }
  std::span<tensor_meta> outputs() override { return {&meta, 1}; }
  void backward(std::span<impl_ptr> grads, std::span<impl_ptr> out) {
    if (!grads[0]) return;
    const tensor g(std::move(grads[0]));
    const tensor region = call(as_strided_op{geo}, lazy<I>(g));
    if (next[0]) out[0] = (lazy<I>(g) - call(as_strided_backward_op{geo}, lazy<I>(region))).impl();
    if (next[1]) out[1] = region.impl();
  }
};

// Note [View refresh]: a view whose base was written in place after the view was made (the
// storage's version moved) reads the base's new history: refresh_view records the view as
// as_strided of the base. refresh_view is not a template (gradient_edge, which every file
// compiles, calls it), and recording the op from it would instantiate the as_strided ops, their
// nodes and what their backwards reach in every file that includes the header; so it records
// through view_refresher(), which every code path that moves a version sets first
// (bump_version: in-place ops, autograd::increment_version, a Function's mark_dirty; all
// templates). A version cannot move without one of them, so the pointer is set when needed.
using view_recorder = void (*)(tensor_impl&);
inline std::atomic<view_recorder>& view_refresher() {
  static std::atomic<view_recorder> f{nullptr};
  return f;
}

// An expanded view (several elements on one location, which as_strided_backward cannot sum)
// reads the base as expand of as_strided: its geometry with each stride-0 dimension of extent 1,
// which views each location once, expanded back to the view's shape (torch's ExpandBackward
// sums the gradient over those dimensions).
template <int I>
void record_view_history(tensor_impl& t) {
  const tensor_impl& b = *t.base;
  grad_mode_guard on(true);
  suspend_tangents off;  // only the history is wanted (tangent_of reads the view's tangent)
  strided_geometry geo{t.shape, t.strides, t.offset - b.offset, b.shape};
  const tensor view(alias_of(t));
  tensor v;
  if (t.is_expanded()) {
    for (std::size_t i = 0; i < geo.shape.size(); ++i)
      if (geo.strides[i] == 0) geo.shape[i] = 1;
    const tensor once(alias_of(t));
    once.impl()->shape = geo.shape;
    const tensor u = mg::detail::record(as_strided_op{geo}, lazy<I>(once), tensor(t.base));
    v = mg::detail::record(expand_op{t.shape}, lazy<I>(view), u);
  } else {
    v = mg::detail::record(as_strided_op{geo}, lazy<I>(view), tensor(t.base));
  }
  t.grad_fn = v.impl()->grad_fn;
  t.output_nr = v.impl()->output_nr;
}

// Bumps the version counter of t's storage (Note [Version counter]).
template <int I>
void bump_version(tensor_impl& t) {
  view_refresher().store(&record_view_history<I>, std::memory_order_relaxed);
  ++t.store->version;
}

template <int>
void refresh_view(tensor_impl& t) {
  if (!t.is_view || !t.base || t.store->version == t.view_version) return;
  const tensor_impl& b = *t.base;
  if (t.origin.op && requires_grad(b)) {  // Note [Multi-output views]: until used in grad mode
    if (grad_mode()) check_multi_output_view(t, nullptr);
    return;
  }
  t.view_version = t.store->version;
  if (!requires_grad(b)) {  // the base's value no longer depends on the view's old history
    t.grad_fn.reset();
    t.output_nr = 0;
    return;
  }
  if (!b.is_contiguous()) return;
  const view_recorder record_view = view_refresher().load(std::memory_order_relaxed);
  if (!record_view)
    fail("a view of shape ", shape_string(t.shape),
         ": internal error: its version moved without bump_version (Note [View refresh])");
  record_view(t);
}

// Note [In-place ops]: an in-place op computes its out-of-place result r from the tensor's
// current value (an alias carrying its grad_fn; a copy when the op saves its inputs and the
// result is recorded, torch's original_self), writes r into the tensor's storage (so views see
// it), bumps the version counter, and, when recorded, makes r's node the tensor's grad_fn. A
// node that saved the old value then fails at backward, naming itself and both versions. A leaf
// that requires grad cannot be written in grad mode. A write through a view gives its base a
// copy_slices node (the old base outside the view, the result inside), and the view becomes
// as_strided of the base (torch's CopySlices). fill_ and copy_ compute fill_op and copy_op of the
// current value, so a tensor that requires grad keeps a node whose edge to its old history
// carries zeros (torch's FillBackward, CopyBackwards).
//
// Note [Direct in-place writes]: an in-place op that records nothing (grad mode off, or nothing
// requires grad) and carries no tangent skips all that: `direct` writes the tensor's elements (a
// view's too) in one kernel, with no temporary, and the version moves. It declines (returns
// false, having written nothing) where the general path is needed: an op computing in another
// dtype than the tensor's floating one, an operand on another device, not broadcasting to the
// tensor's shape, or overlapping its memory other than element for element; the general path
// then computes, or reports the error.
template <class F, class D>
tensor& in_place(tensor& self, const char* name, bool other_requires_grad, bool saves_self,
                 const call_site& site, F&& compute, D&& direct) {
  const site_scope here(site);                // Note [Call sites]: the nodes below name the caller
  const prof::op_range profiled(name, self);  // <metagrad/profiler.hpp>
  auto& si = const_cast<tensor_impl&>(operand(self, name));
  refresh_view(si);
  if (si.is_inference && !inference_mode())
    fail(name, ": an inference tensor (shape ", shape_string(si.shape),
         ") cannot be modified in place outside inference mode; clone() it first");
  const bool retained = self.retains_grad();
  const auto old_fn = si.grad_fn;
  if (grad_mode() && si.requires_grad && !si.grad_fn)
    fail(name, ": a leaf tensor that requires grad (shape ", shape_string(si.shape),
         ") is used in an in-place operation while grad mode is on; do it under "
         "mg::no_grad_guard (an optimiser step), or modify a clone()");
  const bool record = grad_mode() && (requires_grad(si) || other_requires_grad);
  if (record) check_multi_output_view(si, name);  // Note [Multi-output views]
  const bool through_view = record && si.is_view && si.base;
  strided_geometry geo;
  if (grad_mode() && si.is_view && si.base && si.base->requires_grad && !si.base->grad_fn)
    fail(name, ": a view (shape ", shape_string(si.shape),
         ") of a leaf tensor that requires "
         "grad (shape ",
         shape_string(si.base->shape),
         ") is used in an in-place operation while "
         "grad mode is on; do it under mg::no_grad_guard, or modify a clone()");
  if (through_view) {
    const tensor_impl& b = *si.base;
    if (!b.is_contiguous())
      fail(name, ": in-place write through a view (shape ", shape_string(si.shape),
           ") of a non-contiguous tensor (shape ", shape_string(b.shape), ", strides ",
           shape_string(b.strides), "); make the base contiguous() first");
    geo = {si.shape, si.strides, si.offset - b.offset, b.shape};
  }
  if (si.is_expanded())
    fail(name, ": the tensor (shape ", shape_string(si.shape), ", strides ",
         shape_string(si.strides),
         ") is an expanded view: several of its elements share one memory location, so it "
         "cannot be written in place; clone() it first");
  constexpr int L = lazy_v<F>;  // the ops below are instantiated with the in-place op
  if (!record && direct(si)) {
    bump_version<L>(si);
    return self;
  }
  tensor cur(alias_of(si));
  cur.impl()->grad_fn = si.grad_fn;
  cur.impl()->output_nr = si.output_nr;
  cur.impl()->requires_grad = si.requires_grad;
  cur.impl()->tangent = tangent_for_write(si);  // forward-mode AD: r gets the result's tangent
  if (record && saves_self) cur = lazy<L>(cur).clone();
  tensor r = compute(cur);
  if (r.shape() != si.shape)
    fail(name, ": the result of shape ", shape_string(r.shape()),
         " does not fit in place into a tensor of shape ", shape_string(si.shape),
         " (the other operand must broadcast to it)");
  if (promotion::category(r.dtype()) > promotion::category(si.dtype()))
    fail(name, ": the result is ", dtype_name(r.dtype()), " but the tensor (shape ",
         shape_string(si.shape), ") is ", dtype_name(si.dtype()),
         "; an in-place op cannot change the dtype: convert with .to(mg::", dtype_name(r.dtype()),
         ") first, or use the out-of-place op");
  if (r.dtype() != si.dtype()) r = lazy<L>(r).to(si.dtype());  // recorded: gradients keep dtypes
  // the result must not alias the memory it is written to (a.copy_(a.t())), and a leaf or an
  // alias (copy_ of a leaf) gets a node of its own so that the tensor's history points to it
  if (r.impl()->store == si.store || (record && r.requires_grad() && !r.grad_fn()))
    r = lazy<L>(r).clone();
  before_in_place_write(si);  // allow_mutation_on_saved_tensors_guard
  copy_into(si, *r.impl());
  bump_version<L>(si);
  // forward-mode AD: the tensor's tangent is the result's (Note [Tangents of in-place writes])
  in_place_tangent<L>(self.impl(), r.impl()->tangent, name);
  if (through_view) {
    // the base's new history joins its old one (outside the view) and r (inside), and the view
    // reads the base's new history
    const impl_ptr& b = si.base;
    const tensor old(alias_of(*b));
    old.impl()->grad_fn = b->grad_fn;
    old.impl()->output_nr = b->output_nr;
    old.impl()->requires_grad = b->requires_grad;
    auto n = new_graph_node<copy_slices_node<L>>();
    n->geo = geo;
    record_node(n, std::array<tensor, 2>{old, r}, std::array<tensor, 1>{tensor(b)});
    const tensor view(alias_of(si));
    const tensor v = mg::detail::record(as_strided_op{geo}, lazy<L>(view), tensor(b));
    si.grad_fn = v.impl()->grad_fn;
    si.view_version = si.store->version;
  } else if (record) {
    si.grad_fn = r.impl()->grad_fn;
    si.output_nr = r.impl()->output_nr;
  }
  if (retained && si.grad_fn && !self.retains_grad()) {  // retain_grad moves with the history
    auto& old = old_fn->hooks->retains;
    std::erase_if(old, [&](const auto& r) { return r.tensor.lock() == self.impl(); });
    self.retain_grad();
  }
  return self;
}

// Note [Direct in-place writes] for an elementwise op: op(t, other...) written into t.
template <class Op, class... O>
bool direct_elementwise(tensor_impl& t, const Op& op, const O*... other) {
  const dtype d = t.dtype();
  if (!is_floating(d)) return false;
  if (forward_ad_active() && (has_tangent(t) || (has_tangent(*other) || ...))) return false;
  const bool same_result = dispatch_floating(
      d, [&]<class V>(std::type_identity<V>) { return dtype_of<forward_result_t<Op, V>>() == d; });
  if (!same_result) return false;
  std::array<impl_ptr, sizeof...(O)> converted;
  std::array<const tensor_impl*, sizeof...(O) + 1> in{&t, other...};
  for (std::size_t k = 1; k < in.size(); ++k) {
    const tensor_impl& o = *in[k];
    if (o.device() != t.device() || !broadcastable_to(o.shape, t.shape)) return false;
    // a floating operand with dimensions wider than t would make the result wider than t
    if (o.dtype() != d && !o.shape.empty() && is_floating(o.dtype()) &&
        element_size(o.dtype()) > element_size(d))
      return false;
    if (o.store == t.store &&
        (o.offset != t.offset || o.shape != t.shape || o.strides != t.strides))
      return false;
    if (o.dtype() != d) {
      converted[k - 1] = copy_kernel(o, d, o.shape);
      in[k] = converted[k - 1].get();
    }
  }
  before_in_place_write(t);  // allow_mutation_on_saved_tensors_guard
  elementwise_kernel_into(op, in, t, d);
  return true;
}

template <class F>
tensor& in_place(tensor& self, const char* name, bool other_requires_grad, bool saves_self,
                 const call_site& site, F&& compute) {
  return in_place(self, name, other_requires_grad, saves_self, site, std::forward<F>(compute),
                  [](tensor_impl&) { return false; });
}

template <class Op>
tensor& binary_in_place(tensor& self, const tensor& other, const Op& op, const char* name,
                        const call_site& site) {
  check_same_device(operand(self, name), operand(other, name), name);
  return in_place(
      self, name, other.requires_grad(), saves_inputs_v<Op>, site,
      [&](const tensor& x) { return call(op, x, other); },
      [&](tensor_impl& t) { return direct_elementwise(t, op, other.impl().get()); });
}
// A number: on an integer tensor an integral value counts as an integer (`i.add_(2)`), so the
// result stays an integer where the op keeps integers.
template <class Op>
tensor& binary_in_place(tensor& self, double other, const Op& op, const char* name,
                        const call_site& site) {
  const bool integral = !is_floating(operand(self, name).dtype()) && std::isfinite(other) &&
                        std::trunc(other) == other && std::fabs(other) < 9.0e15;
  return in_place(
      self, name, false, saves_inputs_v<Op>, site,
      [&](const tensor& x) {
        return integral ? call(op, x, static_cast<std::int64_t>(other)) : call(op, x, other);
      },
      [&](tensor_impl& t) {
        if (!is_floating(t.dtype())) return false;
        const impl_ptr number = number_tensor(other, t.dtype(), t.device());
        return direct_elementwise(t, op, number.get());
      });
}
template <class Op>
tensor& unary_in_place(tensor& self, const Op& op, const char* name, const call_site& site) {
  return in_place(
      self, name, false, saves_inputs_v<Op>, site, [&](const tensor& x) { return call(op, x); },
      [&](tensor_impl& t) { return direct_elementwise(t, op); });
}
}  // namespace detail

// ---- in place: Note [In-place ops] -------------------------------------------------------------

template <int I>
tensor& tensor::add_(const tensor& o, call_site site) {
  return detail::binary_in_place(detail::lazy<I>(*this), o, add_op{}, "add_", site);
}
template <int I>
tensor& tensor::add_(double o, call_site site) {
  return detail::binary_in_place(detail::lazy<I>(*this), o, add_op{}, "add_", site);
}
template <int I>
tensor& tensor::sub_(const tensor& o, call_site site) {
  return detail::binary_in_place(detail::lazy<I>(*this), o, sub_op{}, "sub_", site);
}
template <int I>
tensor& tensor::sub_(double o, call_site site) {
  return detail::binary_in_place(detail::lazy<I>(*this), o, sub_op{}, "sub_", site);
}
template <int I>
tensor& tensor::mul_(const tensor& o, call_site site) {
  return detail::binary_in_place(detail::lazy<I>(*this), o, mul_op{}, "mul_", site);
}
template <int I>
tensor& tensor::mul_(double o, call_site site) {
  return detail::binary_in_place(detail::lazy<I>(*this), o, mul_op{}, "mul_", site);
}
template <int I>
tensor& tensor::div_(const tensor& o, call_site site) {
  return detail::binary_in_place(detail::lazy<I>(*this), o, div_op{}, "div_", site);
}
template <int I>
tensor& tensor::div_(double o, call_site site) {
  return detail::binary_in_place(detail::lazy<I>(*this), o, div_op{}, "div_", site);
}
template <int I>
tensor& tensor::pow_(double e, call_site site) {
  const bool integral =
      !detail::is_floating(detail::operand(*this, "pow_").dtype()) && e >= 0 && std::trunc(e) == e;
  return detail::unary_in_place(detail::lazy<I>(*this), pow_op{e, integral}, "pow_", site);
}
template <int I>
tensor& tensor::clamp_(double lo, double hi, call_site site) {
  return detail::unary_in_place(detail::lazy<I>(*this), clamp_op{lo, hi}, "clamp_", site);
}
template <int I>
tensor& tensor::neg_(call_site site) {
  return detail::in_place(
      detail::lazy<I>(*this), "neg_", false, false, site,
      [](const auto& x) { return detail::call(neg_op{}, x); },
      [](detail::tensor_impl& t) { return detail::direct_elementwise(t, neg_op{}); });
}
template <int I>
tensor& tensor::abs_(call_site site) {
  return detail::in_place(
      detail::lazy<I>(*this), "abs_", false, true, site,
      [](const auto& x) { return detail::call(abs_op{}, x); },
      [](detail::tensor_impl& t) { return detail::direct_elementwise(t, abs_op{}); });
}
template <int I>
tensor& tensor::exp_(call_site site) {
  return detail::unary_in_place(detail::lazy<I>(*this), exp_op{}, "exp_", site);
}
template <int I>
tensor& tensor::log_(call_site site) {
  return detail::unary_in_place(detail::lazy<I>(*this), log_op{}, "log_", site);
}
template <int I>
tensor& tensor::sqrt_(call_site site) {
  return detail::unary_in_place(detail::lazy<I>(*this), sqrt_op{}, "sqrt_", site);
}
template <int I>
tensor& tensor::sin_(call_site site) {
  return detail::unary_in_place(detail::lazy<I>(*this), sin_op{}, "sin_", site);
}
template <int I>
tensor& tensor::cos_(call_site site) {
  return detail::unary_in_place(detail::lazy<I>(*this), cos_op{}, "cos_", site);
}
template <int I>
tensor& tensor::tanh_(call_site site) {
  return detail::unary_in_place(detail::lazy<I>(*this), tanh_op{}, "tanh_", site);
}
template <int I>
tensor& tensor::sigmoid_(call_site site) {
  return detail::unary_in_place(detail::lazy<I>(*this), sigmoid_op{}, "sigmoid_", site);
}
template <int I>
tensor& tensor::relu_(call_site site) {
  return detail::unary_in_place(detail::lazy<I>(*this), relu_op{}, "relu_", site);
}
template <int I>
tensor& tensor::copy_(const tensor& src, call_site site) {
  const auto& si = detail::operand(*this, "copy_");
  detail::operand(src, "copy_");
  if (!detail::broadcastable_to(src.shape(), si.shape))
    detail::fail("copy_: a source of shape ", detail::shape_string(src.shape()),
                 " does not broadcast to the destination's shape ", detail::shape_string(si.shape));
  const mg::dtype d = si.dtype();
  const mg::device dev = si.device();
  return detail::in_place(
      detail::lazy<I>(*this), "copy_", src.requires_grad(), false, site,
      [&](const tensor& x) {
        return detail::call(detail::copy_op{}, x, detail::lazy<I>(src).to(d).to(dev));
      },
      [&](detail::tensor_impl& t) {  // Note [Direct in-place writes]
        const detail::tensor_impl& s = *src.impl();
        if (detail::forward_ad_active() && (detail::has_tangent(t) || detail::has_tangent(s)))
          return false;
        if (s.store == t.store) return false;  // overlapping: the general path copies it first
        const detail::impl_ptr moved =
            s.device() == dev ? nullptr : detail::transfer_kernel(s, dev);
        detail::before_in_place_write(t);
        detail::copy_into(t, moved ? *moved : s);
        return true;
      });
}
template <int I>
tensor& tensor::fill_(double value, call_site site) {
  detail::operand(*this, "fill_");
  return detail::in_place(
      detail::lazy<I>(*this), "fill_", false, false, site,
      [&](const tensor& x) { return detail::call(detail::fill_op{value}, detail::lazy<I>(x)); },
      [&](detail::tensor_impl& t) {  // Note [Direct in-place writes]
        if (detail::forward_ad_active() && detail::has_tangent(t)) return false;
        detail::before_in_place_write(t);
        detail::fill_into(t, value);
        return true;
      });
}
template <int I>
tensor& tensor::zero_(call_site site) {
  return fill_<I>(0.0, site);
}

}  // namespace mg
