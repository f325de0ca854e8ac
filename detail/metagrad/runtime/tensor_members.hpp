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

#include <metagrad/backend/cpu.hpp>
#include <metagrad/backend/tensor_kernels.hpp>
#include <metagrad/error.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/conversion.hpp>
#include <metagrad/ops/indexing.hpp>
#include <metagrad/ops/math.hpp>
#include <metagrad/ops/nn.hpp>
#include <metagrad/ops/reductions.hpp>
#include <metagrad/ops/selection.hpp>
#include <metagrad/ops/shape.hpp>
#include <metagrad/ops/split.hpp>
#include <metagrad/runtime/apply.hpp>
#include <metagrad/runtime/engine.hpp>
#include <metagrad/runtime/forward_ad.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/hooks.hpp>
#include <metagrad/runtime/in_place.hpp>
#include <metagrad/runtime/profiler.hpp>
#include <metagrad/runtime/tensor_inline.hpp>
#include <metagrad/runtime/tensor_print.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg {

namespace detail {
// The one random generator of the runtime engine (seeded with mg::manual_seed).
inline std::mt19937_64& generator() {
  static std::mt19937_64 gen{0x6d657461677261dULL};
  return gen;
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
    std::memcpy(t->store->data, values,
                static_cast<std::size_t>(t->numel()) * element_size(stored));
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

// argmax, max along a dim and topk (ops/selection.hpp): positions computed on the host.
template <int>
std::vector<std::int64_t> tensor_top_positions(const tensor& x, const shape_t& as, std::size_t d,
                                               std::int64_t k, pick p) {
  const auto h = transfer_kernel(*x.impl(), device::cpu);
  return dispatch(h->dtype(), [&]<class T>(std::type_identity<T>) {
    const T* data = h->data<T>();
    // x as [outer, n, inner]; blocks of slices in parallel, each as one thread alone would
    std::int64_t outer = 1, inner = 1;
    const std::int64_t n = as.empty() ? 1 : as[d];
    for (std::size_t i = 0; i < as.size(); ++i) {
      if (i < d) outer *= as[i];
      if (i > d) inner *= as[i];
    }
    std::vector<std::int64_t> out(static_cast<std::size_t>(outer * k * inner));
    if (out.empty()) return out;
    const auto block = [&](std::int64_t o0, std::int64_t o1) {
#if !MG_NVCC  // Note [nvcc and packs]
      if constexpr (std::is_floating_point_v<T>) {
        if (k == 1 && inner == 1 && p != pick::bottom) {  // rows: by packs
          for (std::int64_t o = o0; o < o1; ++o)
            out[static_cast<std::size_t>(o)] = p == pick::largest
                                                   ? first_extreme_position<true>(data + o * n, n)
                                                   : first_extreme_position<false>(data + o * n, n);
          return;
        }
      }
#endif
      const auto part = top_positions(data + o0 * n * inner, {o1 - o0, n, inner}, 1, k, p);
      std::copy(part.begin(), part.end(), out.begin() + o0 * k * inner);
    };
    const std::int64_t chunks =
        std::min<std::int64_t>({intra_op_threads(), outer, outer * n * inner / parallel_grain});
    if (chunks <= 1) {
      block(0, outer);
    } else {
      parallel_chunks(chunks,
                      [&](std::int64_t c) { block(outer * c / chunks, outer * (c + 1) / chunks); });
    }
    return out;
  });
}
template <int>
tensor index_tensor(const std::vector<std::int64_t>& values, const shape_t& shape,
                    const tensor& like) {
  auto h = make_impl(shape, dtype::i64);
  std::copy(values.begin(), values.end(), h->data<std::int64_t>());
  return tensor(transfer_kernel(*h, like.device()));
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
