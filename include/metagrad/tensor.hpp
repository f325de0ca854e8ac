// mg::tensor: the runtime engine's n-dimensional array, which records the operations applied to
// it (torch.autograd semantics). The same generic callable runs on numbers, on static-engine
// leaves and on mg::tensor:
// ```cpp
// auto f = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
// mg::tensor x = mg::tensor(2.0).requires_grad_(), y = mg::tensor(3.0).requires_grad_();
// f(x, y).backward();   // x.grad(), y.grad()
// ```
//
// Reference, in the order of <metagrad/detail/tensor_core.hpp>, which declares them:
//
// - **Construction.** `mg::tensor{{1., 2.}, {3., 4.}}` (f64 2x2; float elements give f32),
//   `mg::tensor{1., 2.}` (1-D), `mg::tensor(3.0)` (0-d; note `mg::tensor{3.0}` is 1-D with one
//   element), `mg::tensor(xt::xarray<double>{...})` (any xtensor expression of float or double),
//   and the factories below.
// - **Reading.** `shape()`, `strides()`, `numel()`, `dim()`, `dtype()`, `device()`,
//   `item<T>()` (one element), `to_xtensor<T>()` / `xt::xarray<T>(t)` (a copy).
// - **Autograd.** `requires_grad()`, `requires_grad_()`, `grad()` (undefined until a backward
//   reaches it; `defined()`), `set_grad()`, `grad_fn()` (null for leaves; `->name()` is the op,
//   e.g. "mul"), `is_leaf()`, `detach()` (shares storage), `retain_grad()`,
//   `backward(grad = {}, {.retain_graph, .create_graph, .inputs})`.
// - **Operations** (free functions in namespace mg; binary ones broadcast with numpy rules and
//   promote f32 with f64 to f64; a C++ number on either side keeps the tensor's dtype):
//   `+ - * /`, unary `-`, `exp log sin cos tanh`, `pow(x, double)`, `sum(x)`, `sum(x, axis)`
//   (negative axes count from the end), `matmul(a, b)` (2-D), `transpose(x)` (a view),
//   `unsqueeze(x, axis)` (a view), `expand(x, shape)`, `sum_to(x, shape)`, `x.to(dtype)`,
//   `x.to(device)` (recorded: gradients flow back to the source device), `x.contiguous()`; in
//   place, outside the graph: `add_`, `mul_`.
// - **Devices.** `mg::device::cuda` runs on the Thrust backend once a translation unit of the
//   program includes <metagrad/cuda.hpp> (docs/runtime.md, Devices); `matmul` and `mg::fuse` are
//   CPU-only so far.
//
// Misuse throws mg::error naming the operation, the shapes and the fix.
#pragma once

#include <cstdint>
#include <random>
#include <type_traits>

#include <xtensor/xarray.hpp>

#include <metagrad/detail/engine.hpp>
#include <metagrad/detail/kernels.hpp>
#include <metagrad/detail/nodes.hpp>
#include <metagrad/detail/tensor_core.hpp>
#include <metagrad/detail/tensor_ops.hpp>
#include <metagrad/error.hpp>
#include <metagrad/ops/shaped.hpp>

namespace mg {

/// A tensor of `shape` filled with `value`:
/// ```cpp
/// auto t = mg::full({2, 3}, 0.5, {.dtype = mg::f64});
/// ```
inline tensor full(const shape_t& shape, double value, const tensor_options& options = {}) {
  tensor t(detail::fill_kernel(shape, value, options.dtype, options.device));
  t.requires_grad_(options.requires_grad);
  return t;
}

/// Zeros: `mg::zeros({2, 3})` is f32; `mg::zeros({2, 3}, {.dtype = mg::f64})`.
inline tensor zeros(const shape_t& shape, const tensor_options& options = {}) {
  return full(shape, 0.0, options);
}

/// Ones: `mg::ones({3}, {.requires_grad = true})`.
inline tensor ones(const shape_t& shape, const tensor_options& options = {}) {
  return full(shape, 1.0, options);
}

namespace detail {
// The one random generator of the runtime engine (seeded with mg::manual_seed).
inline std::mt19937_64& generator() {
  static std::mt19937_64 gen{0x6d657461677261dULL};
  return gen;
}
}  // namespace detail

/// Seeds the generator of `mg::randn`: the same seed gives the same tensors.
inline void manual_seed(std::uint64_t seed) { detail::generator().seed(seed); }

/// Standard normal samples: `mg::randn({3, 3}, {.requires_grad = true})`.
inline tensor randn(const shape_t& shape, const tensor_options& options = {}) {
  auto t = detail::make_impl(shape, options.dtype);
  std::normal_distribution<double> normal;
  detail::dispatch(options.dtype, [&]<class T>(std::type_identity<T>) {
    T* p = t->data<T>();
    for (std::int64_t i = 0, n = t->numel(); i < n; ++i)
      p[i] = static_cast<T>(normal(detail::generator()));
  });
  tensor r(options.device == device::cpu ? std::move(t)
                                         : detail::transfer_kernel(*t, options.device));
  r.requires_grad_(options.requires_grad);
  return r;
}

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

}  // namespace mg
