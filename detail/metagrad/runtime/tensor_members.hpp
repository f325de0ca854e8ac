// The definitions of mg::tensor's members (declared in <metagrad/tensor_class.hpp>) and of the
// factories: the one file that defines them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <type_traits>
#include <vector>

#include <metagrad/runtime/engine.hpp>
#include <metagrad/runtime/forward_ad.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/hooks.hpp>
#include <metagrad/runtime/profiler.hpp>
#include <metagrad/runtime/apply.hpp>
#include <metagrad/backend/tensor_kernels.hpp>
#include <metagrad/error.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/conversion.hpp>
#include <metagrad/ops/indexing.hpp>
#include <metagrad/ops/math.hpp>
#include <metagrad/ops/nn.hpp>
#include <metagrad/ops/reductions.hpp>
#include <metagrad/ops/shape.hpp>
#include <metagrad/ops/split.hpp>
#include <metagrad/tensor_class.hpp>
#include <metagrad/runtime/tensor_inline.hpp>
#include <metagrad/runtime/tensor_print.hpp>

namespace mg {

namespace detail {
// The one random generator of the runtime engine (seeded with mg::manual_seed).
inline std::mt19937_64& generator() {
  static std::mt19937_64 gen{0x6d657461677261dULL};
  return gen;
}

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
template <class F>
tensor& in_place(tensor& self, const char* name, bool other_requires_grad, bool saves_self,
                 const call_site& site, F&& compute) {
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

template <class Op>
tensor& binary_in_place(tensor& self, const tensor& other, const Op& op, const char* name,
                        const call_site& site) {
  check_same_device(operand(self, name), operand(other, name), name);
  return in_place(self, name, other.requires_grad(), saves_inputs_v<Op>, site,
                  [&](const tensor& x) { return call(op, x, other); });
}
// A number: on an integer tensor an integral value counts as an integer (`i.add_(2)`), so the
// result stays an integer where the op keeps integers.
template <class Op>
tensor& binary_in_place(tensor& self, double other, const Op& op, const char* name,
                        const call_site& site) {
  const bool integral = !is_floating(operand(self, name).dtype()) && std::isfinite(other) &&
                        std::trunc(other) == other && std::fabs(other) < 9.0e15;
  return in_place(self, name, false, saves_inputs_v<Op>, site, [&](const tensor& x) {
    return integral ? call(op, x, static_cast<std::int64_t>(other)) : call(op, x, other);
  });
}
template <class Op>
tensor& unary_in_place(tensor& self, const Op& op, const char* name, const call_site& site) {
  return in_place(self, name, false, saves_inputs_v<Op>, site,
                  [&](const tensor& x) { return call(op, x); });
}
}  // namespace detail

// ---- construction -----------------------------------------------------------------------------

#if MG_EMIT_API  // Note [Compiled core] in config.hpp

MG_API tensor full(const shape_t& shape, double value, const tensor_options& options) {
  tensor t(detail::fill_kernel(shape, value, options.dtype, options.device));
  t.requires_grad_(options.requires_grad);
  return t;
}
MG_API tensor zeros(const shape_t& shape, const tensor_options& options) {
  return full(shape, 0.0, options);
}
MG_API tensor ones(const shape_t& shape, const tensor_options& options) {
  return full(shape, 1.0, options);
}
MG_API void manual_seed(std::uint64_t seed) { detail::generator().seed(seed); }
MG_API tensor randn(const shape_t& shape, const tensor_options& options) {
  auto t = detail::make_impl(shape, options.dtype);
  std::normal_distribution<double> normal;
  detail::dispatch_floating(options.dtype, [&]<class T>(std::type_identity<T>) {
    T* p = t->data<T>();
    for (std::int64_t i = 0, n = t->numel(); i < n; ++i)
      p[i] = static_cast<T>(normal(detail::generator()));
  });
  tensor r(options.device == device::cpu ? std::move(t)
                                         : detail::transfer_kernel(*t, options.device));
  r.requires_grad_(options.requires_grad);
  return r;
}

// ---- reading ----------------------------------------------------------------------------------

MG_API detail::item_value detail::item_of(const tensor_impl& t) {
  const auto h = transfer_kernel(t, device::cpu);
  return dispatch(t.dtype(), [&]<class S>(std::type_identity<S>) {
    if constexpr (std::is_floating_point_v<S>)
      return item_value{static_cast<double>(*h->data<S>()), 0, false};
    else
      return item_value{0.0, static_cast<std::int64_t>(*h->data<S>()), true};
  });
}

MG_API detail::impl_ptr detail::from_values(const shape_t& shape, dtype stored, const void* values,
                                            dtype wanted) {
  auto t = make_impl(shape, stored);
  if (t->numel())
    std::memcpy(t->store->data, values, static_cast<std::size_t>(t->numel()) * element_size(stored));
  return stored == wanted ? t : copy_kernel(*t, wanted, shape);
}

MG_API void detail::read_elements(const tensor_impl& t, dtype d, void* out) {
  const auto c = transfer_kernel(*copy_kernel(t, d, t.shape), device::cpu);
  if (c->numel())
    std::memcpy(out, c->store->data, static_cast<std::size_t>(c->numel()) * element_size(d));
}

#endif  // MG_EMIT_API

// ---- conversions and shorthands ---------------------------------------------------------------

template <int I>
tensor tensor::to(mg::dtype d, call_site site) const {
  const auto& xi = detail::operand(*this, "to");
  if (xi.dtype() == d) return *this;
  return detail::call_at(site, to_dtype_op{d, xi.dtype()}, detail::lazy<I>(*this));
}

template <int I>
tensor tensor::to(mg::device dev, call_site site) const {
  const auto& xi = detail::operand(*this, "to");
  if (xi.device() == dev) return *this;
  return detail::call_at(site, to_device_op{dev, xi.device()}, detail::lazy<I>(*this));
}

template <int I>
tensor tensor::contiguous(call_site site) const {
  const auto& xi = detail::operand(*this, "contiguous");
  if (xi.is_contiguous()) return *this;
  return detail::call_at(site, contiguous_op{}, detail::lazy<I>(*this));
}

template <int I>
tensor tensor::clone(call_site site) const {
  detail::operand(*this, "clone");
  return detail::call_at(site, clone_op{}, detail::lazy<I>(*this));
}
template <int I>
tensor clone(const tensor& t, call_site site) {
  return detail::lazy<I>(t).clone(site);
}

#if MG_EMIT_API
MG_API tensor zeros_like(const tensor& t) {
  return zeros(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
MG_API tensor ones_like(const tensor& t) {
  return ones(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
MG_API tensor full_like(const tensor& t, double value) {
  return full(t.shape(), value, {.dtype = t.dtype(), .device = t.device()});
}
MG_API tensor randn_like(const tensor& t) {
  return randn(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
#endif  // MG_EMIT_API

template <int>
std::ostream& operator<<(std::ostream& os, const tensor& t) {
  return detail::print_tensor(os, t);
}

template <int I>
tensor tensor::sum(call_site site) const {
  return mg::sum(detail::lazy<I>(*this), site);
}
template <int I>
tensor tensor::sum(std::int64_t axis, call_site site) const {
  return mg::sum(detail::lazy<I>(*this), axis, false, site);
}
template <int I>
tensor tensor::t(call_site site) const {
  return mg::transpose(detail::lazy<I>(*this), site);
}

template <int I>
tensor tensor::mean(call_site site) const {
  return mg::mean(detail::lazy<I>(*this), site);
}
template <int I>
tensor tensor::reshape(const shape_t& shape, call_site site) const {
  return mg::reshape(detail::lazy<I>(*this), shape, site);
}
template <int I>
tensor tensor::view(const shape_t& shape, call_site site) const {
  return mg::view(detail::lazy<I>(*this), shape, site);
}
template <int I>
tensor tensor::flatten(std::int64_t s, std::int64_t e, call_site site) const {
  return mg::flatten(detail::lazy<I>(*this), s, e, site);
}
template <int I>
tensor tensor::squeeze(call_site site) const {
  return mg::squeeze(detail::lazy<I>(*this), site);
}
template <int I>
tensor tensor::squeeze(std::int64_t dim, call_site site) const {
  return mg::squeeze(detail::lazy<I>(*this), dim, site);
}
template <int I>
tensor tensor::unsqueeze(std::int64_t dim, call_site site) const {
  return mg::unsqueeze(detail::lazy<I>(*this), dim, site);
}
template <int I>
tensor tensor::permute(const std::vector<std::int64_t>& dims, call_site site) const {
  return mg::permute(detail::lazy<I>(*this), dims, site);
}
template <int I>
tensor tensor::transpose(std::int64_t d0, std::int64_t d1, call_site site) const {
  return mg::transpose(detail::lazy<I>(*this), d0, d1, site);
}
template <int I>
tensor tensor::expand(const shape_t& shape, call_site site) const {
  return mg::expand(detail::lazy<I>(*this), shape, site);
}
template <int I>
tensor tensor::select(std::int64_t dim, std::int64_t index, call_site site) const {
  return mg::select(detail::lazy<I>(*this), dim, index, site);
}
template <int I>
tensor tensor::slice(std::int64_t dim, std::optional<std::int64_t> start,
                     std::optional<std::int64_t> end, std::int64_t step, call_site site) const {
  return mg::slice(detail::lazy<I>(*this), dim, start, end, step, site);
}
template <int I>
tensor tensor::index_select(std::int64_t dim, const tensor& index, call_site site) const {
  return mg::index_select(detail::lazy<I>(*this), dim, index, site);
}
template <int I>
tensor_list tensor::unbind(std::int64_t dim, call_site site) const {
  return mg::unbind<I>(*this, dim, site);
}
template <int I>
tensor_list tensor::chunk(std::int64_t chunks, std::int64_t dim, call_site site) const {
  return mg::chunk<I>(*this, chunks, dim, site);
}
template <int I>
tensor_list tensor::split(std::int64_t split_size, std::int64_t dim, call_site site) const {
  return mg::split<I>(*this, split_size, dim, site);
}
template <int I>
tensor_list tensor::split(const std::vector<std::int64_t>& sizes, std::int64_t dim,
                          call_site site) const {
  return mg::split<I>(*this, sizes, dim, site);
}
template <int I>
tensor tensor::operator[](detail::tracked_index i) const {
  return mg::select(detail::lazy<I>(*this), 0, i.value, i.site);
}

namespace detail {
// The elements of an i64 index tensor of rank <= 1, on the host.
template <int = 0>
std::vector<std::int64_t> index_values(const tensor& index, const char* op) {
  operand(index, op);
  if (index.dtype() != dtype::i64 || index.dim() > 1)
    fail(op, ": expected a 1-D i64 index tensor, got one of shape ", shape_string(index.shape()),
         " and dtype ", dtype_name(index.dtype()), "; convert with .to(mg::i64)");
  const auto h = transfer_kernel(*index.impl(), device::cpu);
  return std::vector<std::int64_t>(h->data<std::int64_t>(), h->data<std::int64_t>() + h->numel());
}

// A node of cat over a runtime list of tensors: input k's gradient is its slice of g. (A template
// in name only: Note [Lazy members].)
template <int I>
struct cat_list_node : graph_node {
  std::int64_t dim = 0;
  std::vector<edge> next;
  std::vector<std::int64_t> offsets;
  tensor_meta meta;
  const char* name() const override { return "cat"; }
  std::span<edge> next_edges() override { return next; }
  std::span<tensor_meta> outputs() override { return {&meta, 1}; }
  void backward(std::span<impl_ptr> grads, std::span<impl_ptr> out) {
    if (!grads[0]) return;
    const tensor g(std::move(grads[0]));
    for (std::size_t k = 0; k < next.size(); ++k)
      if (next[k]) out[k] = mg::slice(lazy<I>(g), dim, offsets[k], offsets[k + 1]).impl();
  }
};
}  // namespace detail

template <int I>
tensor index_select(const tensor& x, std::int64_t dim, const tensor& index, call_site site) {
  return mg::index_select(detail::lazy<I>(x), dim, detail::index_values(index, "index_select"),
                          site);
}

template <int I>
tensor cat(const tensor_list& xs, std::int64_t dim, call_site site) {
  const detail::site_scope here(site);
  const detail::prof::op_range profiled("cat", xs);  // <metagrad/profiler.hpp>
  std::vector<shape_t> shapes;
  for (const auto& x : xs) shapes.push_back(detail::operand(x, "cat").shape);
  std::size_t d = 0;
  const shape_t shape = detail::cat_shape(shapes, dim, "cat", d);
  tensor out = detail::algebra<tensor>::cat_list(d, shape, xs);
  if (detail::forward_ad_active()) detail::cat_tangent<I>(xs, dim, out);
  bool any = false;
  for (const auto& x : xs) any = any || x.requires_grad();
  if (!detail::grad_mode() || !any) return out;
  auto n = detail::new_graph_node<detail::cat_list_node<I>>();
  n->dim = static_cast<std::int64_t>(d);
  n->next.resize(xs.size());
  n->offsets.push_back(0);
  for (const auto& x : xs) n->offsets.push_back(n->offsets.back() + x.shape()[d]);
  detail::record_node(n, xs, std::array<tensor, 1>{out});
  return out;
}

template <int I>
tensor stack(const tensor_list& xs, std::int64_t dim, call_site site) {
  const detail::site_scope here(site);
  std::vector<shape_t> shapes;
  for (const auto& x : xs) shapes.push_back(detail::operand(x, "stack").shape);
  detail::check_stack(shapes);
  const std::size_t d = detail::wrap_dim(dim, shapes[0].size() + 1, "stack", shapes[0]);
  tensor_list u;
  for (const auto& x : xs)
    u.push_back(mg::unsqueeze(detail::lazy<I>(x), static_cast<std::int64_t>(d)));
  return mg::cat<I>(u, static_cast<std::int64_t>(d));
}

template <int I>
tensor cross_entropy(const tensor& logits, const tensor& targets, call_site site) {
  detail::operand(logits, "cross_entropy");
  detail::operand(targets, "cross_entropy");
  if (targets.dtype() != dtype::i64)
    detail::fail("cross_entropy: targets must be i64 class indices, got dtype ",
                 detail::dtype_name(targets.dtype()), " (shape ",
                 detail::shape_string(targets.shape()), "); convert with .to(mg::i64)");
  if (targets.dim() != (logits.dim() == 2 ? 1 : 0))
    detail::fail("cross_entropy: targets of shape ", detail::shape_string(targets.shape()),
                 " for logits of shape ", detail::shape_string(logits.shape()),
                 "; expected targets [N] for logits [N, C] (or 0-d for logits [C])");
  return mg::cross_entropy(detail::lazy<I>(logits), detail::index_values(targets, "cross_entropy"),
                           site);
}

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
  return detail::in_place(detail::lazy<I>(*this), "neg_", false, false, site,
                          [](const auto& x) { return detail::call(neg_op{}, x); });
}
template <int I>
tensor& tensor::abs_(call_site site) {
  return detail::in_place(detail::lazy<I>(*this), "abs_", false, true, site,
                          [](const auto& x) { return detail::call(abs_op{}, x); });
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
      detail::lazy<I>(*this), "copy_", src.requires_grad(), false, site, [&](const tensor& x) {
        return detail::call(detail::copy_op{}, x, detail::lazy<I>(src).to(d).to(dev));
      });
}
template <int I>
tensor& tensor::fill_(double value, call_site site) {
  detail::operand(*this, "fill_");
  return detail::in_place(
      detail::lazy<I>(*this), "fill_", false, false, site,
      [&](const tensor& x) { return detail::call(detail::fill_op{value}, detail::lazy<I>(x)); });
}
template <int I>
tensor& tensor::zero_(call_site site) {
  return fill_<I>(0.0, site);
}

// ---- autograd ---------------------------------------------------------------------------------

template <int I>
void tensor::backward(const tensor& grad) const {
  backward<I>(grad, backward_options{});
}
template <int I>
void tensor::backward(const backward_options& options) const {
  backward<I>(tensor{}, options);
}
template <int I>
void tensor::backward(const tensor& grad, const backward_options& options) const {
  detail::backward_call c{"backward"};
  c.ops = detail::engine_ops_of<I>();
  c.create_graph = options.create_graph;
  c.keep_graph = options.retain_graph.value_or(options.create_graph);
  detail::run_backward({*this}, {grad}, options.inputs, c);
}

template <int>
tensor& tensor::requires_grad_(bool on) {
  auto& t = const_cast<detail::tensor_impl&>(checked("requires_grad_"));
  if (t.grad_fn && !on)
    detail::fail("requires_grad_: a non-leaf tensor (computed by ", t.grad_fn->name(),
                 ") cannot stop requiring grad; use detach() instead");
  if (on && !detail::is_floating(t.dtype()))
    detail::fail("requires_grad_: a tensor of dtype ", detail::dtype_name(t.dtype()), " (shape ",
                 detail::shape_string(t.shape),
                 ") cannot require grad: only floating-point tensors can; convert it first with "
                 ".to(mg::f32)");
  if (!t.grad_fn) t.requires_grad = on;
  return *this;
}

template <int>
void tensor::set_grad(const tensor& g) {
  auto& t = const_cast<detail::tensor_impl&>(checked("set_grad"));
  if (g.defined() && g.shape() != t.shape)
    detail::fail("set_grad: a gradient of shape ", detail::shape_string(g.shape()),
                 " for a tensor of shape ", detail::shape_string(t.shape), "; shapes must match");
  t.grad = g.impl();
}

#if MG_EMIT_API
MG_API std::shared_ptr<autograd::node> tensor::grad_fn() const {
  auto& t = const_cast<detail::tensor_impl&>(checked("grad_fn"));
  detail::refresh_view(t);
  return t.grad_fn;
}

MG_API bool tensor::retains_grad() const {
  const auto& t = checked("retains_grad");
  if (!t.grad_fn || !t.grad_fn->hooks) return false;
  for (const auto& r : t.grad_fn->hooks->retains)
    if (r.tensor.lock() == impl_) return true;
  return false;
}
#endif  // MG_EMIT_API

// torch's retains_grad hook: run after the tensor hooks of the output it retains (hooks.hpp).
template <int>
void tensor::retain_grad() const {
  const auto& t = checked("retain_grad");
  if (!detail::requires_grad(t))
    detail::fail("retain_grad: the tensor (shape ", detail::shape_string(t.shape),
                 ") does not require grad, so it has no gradient to retain");
  if (t.grad_fn && !retains_grad())
    detail::hooks_of(t.grad_fn->hooks).retains.push_back({t.output_nr, impl_});
}

template <int>
tensor& tensor::detach_() {
  auto& t = const_cast<detail::tensor_impl&>(checked("detach_"));
  if (t.is_view && t.base && detail::requires_grad(*t.base))
    detail::fail("detach_: the tensor (shape ", detail::shape_string(t.shape),
                 ") is a view of a tensor that requires grad; views cannot be detached in "
                 "place: use detach() instead");
  if (t.grad_fn) ++t.store->detaches;  // Note [Detached saved inputs] (saved.hpp)
  t.grad_fn.reset();
  t.output_nr = 0;
  t.requires_grad = false;
  t.tangent.reset();  // as torch's detach_: the tensor leaves forward-mode AD too
  if (t.is_view) t.own_tangent_only = true;  // nor through its base's
  return *this;
}

}  // namespace mg
