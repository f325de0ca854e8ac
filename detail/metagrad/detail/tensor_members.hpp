// The definitions of mg::tensor's members (declared in <metagrad/tensor_class.hpp>) and of the
// factories: the one file that defines them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <type_traits>
#include <vector>

#include <xtensor/xarray.hpp>

#include <metagrad/detail/autograd_engine.hpp>
#include <metagrad/detail/graph.hpp>
#include <metagrad/detail/runtime_ops.hpp>
#include <metagrad/detail/tensor_kernels.hpp>
#include <metagrad/error.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/conversion.hpp>
#include <metagrad/ops/reductions.hpp>
#include <metagrad/ops/shape.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg {

namespace detail {
// Shape and elements of a nested initializer list, checking that it is not ragged.
template <class T>
inline constexpr std::size_t list_depth = 0;
template <class E>
inline constexpr std::size_t list_depth<std::initializer_list<E>> = 1 + list_depth<E>;

template <class T, std::size_t D>
void flatten_nested(const T& v, std::size_t, std::array<std::int64_t, D>&, std::vector<T>& out) {
  out.push_back(v);
}
template <class T, class E, std::size_t D>
void flatten_nested(std::initializer_list<E> l, std::size_t depth,
                    std::array<std::int64_t, D>& shape, std::vector<T>& out) {
  const auto n = static_cast<std::int64_t>(l.size());
  if (shape[depth] < 0)
    shape[depth] = n;
  else if (shape[depth] != n)
    fail("tensor: ragged nested list (dimension ", depth, " has lengths ", shape[depth], " and ", n,
         "); every row must have the same length");
  for (const auto& e : l) flatten_nested<T>(e, depth + 1, shape, out);
}

template <class T, class L>
impl_ptr from_nested(const L& list) {
  std::array<std::int64_t, list_depth<L>> dims;
  dims.fill(-1);
  std::vector<T> values;
  flatten_nested<T>(list, 0, dims, values);
  shape_t shape(dims.begin(), dims.end());
  for (auto& e : shape) e = e < 0 ? 0 : e;
  auto t = make_impl(shape, dtype_of<T>());
  std::copy(values.begin(), values.end(), t->template data<T>());
  return t;
}

// The one random generator of the runtime engine (seeded with mg::manual_seed).
inline std::mt19937_64& generator() {
  static std::mt19937_64 gen{0x6d657461677261dULL};
  return gen;
}

template <class Op>
tensor& in_place(tensor& self, const tensor& other, const Op& op, const char* name,
                 const char* out_of_place) {
  auto& si = const_cast<tensor_impl&>(operand(self, name));
  check_same_device(si, operand(other, name), name);
  if (grad_mode() && (self.requires_grad() || other.requires_grad()))
    fail(name, ": in-place operation on a tensor of shape ", shape_string(si.shape),
         " while grad mode is on and a tensor involved requires grad; the runtime engine does "
         "not record in-place operations yet: write a = a ",
         out_of_place, " b, or run it under mg::no_grad_guard");
  const shape_t result = broadcast_extents(si.shape, other.shape(), name);
  if (result != si.shape)
    fail(name, ": the result of shape ", shape_string(result),
         " does not fit in place into a tensor of shape ", shape_string(si.shape));
  const tensor b = other.to(si.dtype());
  copy_into(si, *elementwise_kernel(op, std::array<const tensor_impl*, 2>{&si, b.impl().get()},
                                    si.shape, si.dtype(), si.dtype()));
  ++si.store->version;  // See Note [Version counter]
  return self;
}
}  // namespace detail

// ---- construction -----------------------------------------------------------------------------

template <std::floating_point T>
tensor::tensor(T value)
    : impl_(detail::fill_kernel({}, value, detail::dtype_of<T>(), device::cpu)) {}
template <std::floating_point T>
tensor::tensor(std::initializer_list<T> values) : impl_(detail::from_nested<T>(values)) {}
template <std::floating_point T>
tensor::tensor(std::initializer_list<std::initializer_list<T>> values)
    : impl_(detail::from_nested<T>(values)) {}
template <std::floating_point T>
tensor::tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values)
    : impl_(detail::from_nested<T>(values)) {}

template <class E>
tensor::tensor(const xt::xexpression<E>& e) {
  using V = typename E::value_type;
  static_assert(std::is_floating_point_v<V>,
                "metagrad: mg::tensor holds float or double elements; convert integer xtensor data "
                "with xt::cast<double>(e) first");
  const xt::xarray<V> a = e.derived_cast();
  impl_ = detail::make_impl(shape_t(a.shape().begin(), a.shape().end()), detail::dtype_of<V>());
  std::copy(a.begin(), a.end(), impl_->data<V>());
}

inline tensor full(const shape_t& shape, double value, const tensor_options& options) {
  tensor t(detail::fill_kernel(shape, value, options.dtype, options.device));
  t.requires_grad_(options.requires_grad);
  return t;
}
inline tensor zeros(const shape_t& shape, const tensor_options& options) {
  return full(shape, 0.0, options);
}
inline tensor ones(const shape_t& shape, const tensor_options& options) {
  return full(shape, 1.0, options);
}
inline void manual_seed(std::uint64_t seed) { detail::generator().seed(seed); }
inline tensor randn(const shape_t& shape, const tensor_options& options) {
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

template <class T>
T tensor::item() const {
  const auto& t = checked("item");
  if (t.numel() != 1)
    detail::fail("item: a tensor of shape ", detail::shape_string(t.shape), " has ", t.numel(),
                 " elements; item() needs exactly one (reduce it with sum() first)");
  const auto h = detail::transfer_kernel(t, device::cpu);
  return detail::dispatch(
      t.dtype(), [&]<class S>(std::type_identity<S>) { return static_cast<T>(*h->data<S>()); });
}

template <class T>
xt::xarray<T> tensor::to_xtensor() const {
  const auto& t = checked("to_xtensor");
  const auto c = detail::transfer_kernel(t, device::cpu);
  xt::xarray<T> r =
      xt::xarray<T>::from_shape(std::vector<std::size_t>(t.shape.begin(), t.shape.end()));
  detail::dispatch(t.dtype(), [&]<class S>(std::type_identity<S>) {
    const S* p = c->data<S>();
    for (std::int64_t i = 0, n = c->numel(); i < n; ++i) r.data()[i] = static_cast<T>(p[i]);
  });
  return r;
}

// ---- conversions and shorthands ---------------------------------------------------------------

inline tensor tensor::to(mg::dtype d) const {
  const auto& xi = detail::operand(*this, "to");
  if (xi.dtype() == d) return *this;
  return detail::call(to_dtype_op{d, xi.dtype()}, *this);
}

inline tensor tensor::to(mg::device dev) const {
  const auto& xi = detail::operand(*this, "to");
  if (xi.device() == dev) return *this;
  return detail::call(to_device_op{dev, xi.device()}, *this);
}

inline tensor tensor::contiguous() const {
  const auto& xi = detail::operand(*this, "contiguous");
  if (xi.is_contiguous()) return *this;
  return detail::call(contiguous_op{}, *this);
}

inline tensor tensor::clone() const {
  detail::operand(*this, "clone");
  return detail::call(clone_op{}, *this);
}
inline tensor clone(const tensor& t) { return t.clone(); }

inline tensor zeros_like(const tensor& t) {
  return zeros(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
inline tensor ones_like(const tensor& t) {
  return ones(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}
inline tensor full_like(const tensor& t, double value) {
  return full(t.shape(), value, {.dtype = t.dtype(), .device = t.device()});
}
inline tensor randn_like(const tensor& t) {
  return randn(t.shape(), {.dtype = t.dtype(), .device = t.device()});
}

inline std::ostream& operator<<(std::ostream& os, const tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  const auto v = t.to_xtensor<double>();
  const std::size_t n = v.size(), shown = n <= 12 ? n : 6;
  os << "tensor([";
  for (std::size_t i = 0; i < n; ++i) {
    if (n > 12 && i == shown) {
      os << ", ...";
      i = n - shown;
    }
    os << (i ? ", " : "") << v.flat(i);
  }
  os << "], shape=" << detail::shape_string(t.shape())
     << ", dtype=" << detail::dtype_name(t.dtype())
     << ", device=" << detail::device_name(t.device());
  if (t.requires_grad()) os << ", requires_grad=true";
  if (t.grad_fn()) os << ", grad_fn=" << t.grad_fn()->name();
  return os << ")";
}

inline tensor tensor::sum() const { return mg::sum(*this); }
inline tensor tensor::sum(std::int64_t axis) const { return mg::sum(*this, axis); }
inline tensor tensor::t() const { return mg::transpose(*this); }

inline tensor& tensor::add_(const tensor& other) {
  return detail::in_place(*this, other, add_op{}, "add_", "+");
}
inline tensor& tensor::mul_(const tensor& other) {
  return detail::in_place(*this, other, mul_op{}, "mul_", "*");
}

// ---- autograd ---------------------------------------------------------------------------------

inline void tensor::backward(const tensor& grad, const backward_options& options) const {
  detail::backward_call c{"backward"};
  c.create_graph = options.create_graph;
  c.keep_graph = options.retain_graph.value_or(options.create_graph);
  detail::run_backward({*this}, {grad}, options.inputs, c);
}

inline tensor& tensor::requires_grad_(bool on) {
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

inline void tensor::set_grad(const tensor& g) {
  auto& t = const_cast<detail::tensor_impl&>(checked("set_grad"));
  if (g.defined() && g.shape() != t.shape)
    detail::fail("set_grad: a gradient of shape ", detail::shape_string(g.shape()),
                 " for a tensor of shape ", detail::shape_string(t.shape), "; shapes must match");
  t.grad = g.impl();
}

inline bool tensor::retains_grad() const {
  const auto& t = checked("retains_grad");
  if (!t.grad_fn) return false;
  for (const auto& w : t.grad_fn->retained)
    if (w.lock().get() == &t) return true;
  return false;
}

inline void tensor::retain_grad() const {
  const auto& t = checked("retain_grad");
  if (!detail::requires_grad(t))
    detail::fail("retain_grad: the tensor (shape ", detail::shape_string(t.shape),
                 ") does not require grad, so it has no gradient to retain");
  if (t.grad_fn && !retains_grad()) t.grad_fn->retained.push_back(impl_);
}

}  // namespace mg
