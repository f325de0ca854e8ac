// The mg::tensor handle and the declarations of the runtime engine's operations; included through
// <metagrad/tensor.hpp>, which documents and defines them. Kept apart so that the detail headers
// defining operations can see the complete class without an include cycle.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xexpression.hpp>

#include <metagrad/detail/graph.hpp>
#include <metagrad/detail/kernels.hpp>
#include <metagrad/detail/storage.hpp>
#include <metagrad/error.hpp>
#include <metagrad/ops/shaped.hpp>

namespace mg {

class tensor;
using tensor_list = std::vector<tensor>;

namespace autograd {
/// A recorded operation of the runtime graph (`tensor::grad_fn()`): `name()`, `next_functions()`.
using node = detail::graph_node;
}  // namespace autograd

/// Options of the tensor factories; an aggregate, used with designated initialisers:
/// `mg::randn({3, 3}, {.dtype = mg::f64, .requires_grad = true})`. The default dtype is f32, as
/// in torch.
struct tensor_options {
  mg::dtype dtype = mg::dtype::f32;
  mg::device device = mg::device::cpu;
  bool requires_grad = false;
};

/// Options of `tensor::backward`. `retain_graph` defaults to `create_graph`; `inputs`, when not
/// empty, restricts accumulation into `.grad()` to those tensors.
struct backward_options {
  std::optional<bool> retain_graph{};
  bool create_graph = false;
  tensor_list inputs{};
};

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
}  // namespace detail

class tensor {
 public:
  tensor() = default;
  explicit tensor(detail::impl_ptr impl) : impl_(std::move(impl)) {}

  template <std::floating_point T>
  explicit tensor(T value)
      : impl_(detail::fill_kernel({}, value, detail::dtype_of<T>(), device::cpu)) {}
  template <std::floating_point T>
  tensor(std::initializer_list<T> values) : impl_(detail::from_nested<T>(values)) {}
  template <std::floating_point T>
  tensor(std::initializer_list<std::initializer_list<T>> values)
      : impl_(detail::from_nested<T>(values)) {}
  template <std::floating_point T>
  tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values)
      : impl_(detail::from_nested<T>(values)) {}
  template <class E>
  explicit tensor(const xt::xexpression<E>& e);

  bool defined() const { return impl_ != nullptr; }
  const shape_t& shape() const { return checked("shape").shape; }
  const shape_t& strides() const { return checked("strides").strides; }
  std::int64_t numel() const { return checked("numel").numel(); }
  std::int64_t dim() const { return static_cast<std::int64_t>(checked("dim").shape.size()); }
  mg::dtype dtype() const { return checked("dtype").dtype(); }
  mg::device device() const { return checked("device").device(); }
  bool is_contiguous() const { return checked("is_contiguous").is_contiguous(); }
  std::uint64_t version() const { return checked("version").store->version; }

  bool requires_grad() const { return impl_ && detail::requires_grad(*impl_); }
  tensor& requires_grad_(bool on = true);
  tensor grad() const { return tensor(checked("grad").grad); }
  void set_grad(const tensor& g);
  std::shared_ptr<autograd::node> grad_fn() const { return checked("grad_fn").grad_fn; }
  bool is_leaf() const { return checked("is_leaf").grad_fn == nullptr; }
  bool retains_grad() const;
  void retain_grad() const;
  tensor detach() const { return tensor(detail::alias_of(checked("detach"))); }

  template <class T>
  T item() const;
  template <class T>
  xt::xarray<T> to_xtensor() const;
  template <class T>
  explicit operator xt::xarray<T>() const {
    return to_xtensor<T>();
  }

  tensor to(mg::dtype d) const;
  tensor to(mg::device d) const;
  tensor contiguous() const;
  tensor sum() const;
  tensor sum(std::int64_t axis) const;
  tensor t() const;

  tensor& add_(const tensor& other);
  tensor& mul_(const tensor& other);

  void backward(const tensor& grad = {}, const backward_options& options = {}) const;
  void backward(const backward_options& options) const { backward(tensor{}, options); }

  const detail::impl_ptr& impl() const { return impl_; }

 private:
  const detail::tensor_impl& checked(const char* what) const {
    if (!impl_)
      detail::fail(what,
                   ": the tensor is undefined (default-constructed, or an unused gradient); "
                   "check defined() first");
    return *impl_;
  }
  detail::impl_ptr impl_;
};

tensor operator+(const tensor& a, const tensor& b);
tensor operator-(const tensor& a, const tensor& b);
tensor operator*(const tensor& a, const tensor& b);
tensor operator/(const tensor& a, const tensor& b);
tensor operator-(const tensor& x);
tensor exp(const tensor& x);
tensor log(const tensor& x);
tensor sin(const tensor& x);
tensor cos(const tensor& x);
tensor tanh(const tensor& x);
tensor pow(const tensor& x, double p);
tensor sum(const tensor& x);
tensor sum(const tensor& x, std::int64_t axis);
tensor matmul(const tensor& a, const tensor& b);
tensor transpose(const tensor& x);
tensor unsqueeze(const tensor& x, std::int64_t axis);
tensor expand(const tensor& x, const shape_t& shape);
tensor sum_to(const tensor& x, const shape_t& shape);

namespace detail {
// A 0-d tensor holding s, with the dtype and device of `like` (scalars do not promote, as in
// torch).
inline tensor scalar_like(const tensor& like, double s) {
  return tensor(fill_kernel({}, s, like.dtype(), like.device()));
}
template <class S>
concept Scalar = std::is_arithmetic_v<S>;
}  // namespace detail

template <detail::Scalar S>
tensor operator+(const tensor& a, S s) {
  return a + detail::scalar_like(a, double(s));
}
template <detail::Scalar S>
tensor operator+(S s, const tensor& b) {
  return detail::scalar_like(b, double(s)) + b;
}
template <detail::Scalar S>
tensor operator-(const tensor& a, S s) {
  return a - detail::scalar_like(a, double(s));
}
template <detail::Scalar S>
tensor operator-(S s, const tensor& b) {
  return detail::scalar_like(b, double(s)) - b;
}
template <detail::Scalar S>
tensor operator*(const tensor& a, S s) {
  return a * detail::scalar_like(a, double(s));
}
template <detail::Scalar S>
tensor operator*(S s, const tensor& b) {
  return detail::scalar_like(b, double(s)) * b;
}
template <detail::Scalar S>
tensor operator/(const tensor& a, S s) {
  return a / detail::scalar_like(a, double(s));
}
template <detail::Scalar S>
tensor operator/(S s, const tensor& b) {
  return detail::scalar_like(b, double(s)) / b;
}

namespace detail {
// The array functions the shaped ops (<metagrad/ops/shaped.hpp>) are written against, on
// tensors: each is itself a recorded, differentiable operation.
template <>
struct algebra_impl<tensor> {
  static tensor sum(const tensor& x) { return mg::sum(x); }
  static tensor sum(const tensor& x, std::ptrdiff_t axis) { return mg::sum(x, axis); }
  static tensor unsqueeze(const tensor& g, std::ptrdiff_t axis) { return mg::unsqueeze(g, axis); }
  static tensor expand_as(const tensor& g, const tensor& x) { return mg::expand(g, x.shape()); }
  static tensor matmul(const tensor& a, const tensor& b) { return mg::matmul(a, b); }
  static tensor transpose(const tensor& x) { return mg::transpose(x); }
};
}  // namespace detail

}  // namespace mg
