// Definitions of the runtime engine's operations (declared in tensor_core.hpp, documented in
// <metagrad/tensor.hpp>): a kernel computes the value, `record` adds the node.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include <metagrad/detail/blas.hpp>
#include <metagrad/detail/kernels.hpp>
#include <metagrad/detail/nodes.hpp>
#include <metagrad/detail/tensor_core.hpp>
#include <metagrad/ops/elementwise.hpp>
#include <metagrad/ops/shaped.hpp>

namespace mg {

namespace detail {
inline const tensor_impl& operand(const tensor& t, const char* op) {
  if (!t.defined())
    fail(op, ": an operand is an undefined tensor (default-constructed, or an unused gradient)");
  return *t.impl();
}

inline mg::dtype promote(mg::dtype a, mg::dtype b) {
  return (a == mg::dtype::f64 || b == mg::dtype::f64) ? mg::dtype::f64 : mg::dtype::f32;
}

template <class Op>
tensor unary(const Op& op, const tensor& x) {
  tensor out(unary_kernel(op, operand(x, op_name<Op>())));
  return record(op, std::move(out), x);
}

template <class Op>
tensor binary(const Op& op, const tensor& a0, const tensor& b0) {
  check_same_device(operand(a0, Op::name), operand(b0, Op::name), Op::name);
  const mg::dtype d = promote(a0.dtype(), b0.dtype());
  const tensor a = a0.to(d), b = b0.to(d);
  const shape_t shape = broadcast_extents(a.shape(), b.shape(), Op::name);
  tensor out(binary_kernel(op, *a.impl(), *b.impl(), shape));
  return record(op, std::move(out), a, b);
}

inline std::size_t normalize_axis(std::int64_t axis, std::size_t rank, const char* op,
                                  const shape_t& shape) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r)
    fail(op, ": axis ", axis, " is out of range for a tensor of shape ", shape_string(shape),
         " (valid: ", -r, " to ", r - 1, ")");
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

// A view of x with other shape/strides, sharing its storage (and version counter).
inline tensor view_of(const tensor_impl& x, shape_t shape, shape_t strides) {
  auto v = alias_of(x);
  v->shape = std::move(shape);
  v->strides = std::move(strides);
  return tensor(std::move(v));
}
}  // namespace detail

inline tensor operator+(const tensor& a, const tensor& b) { return detail::binary(add_op{}, a, b); }
inline tensor operator-(const tensor& a, const tensor& b) { return detail::binary(sub_op{}, a, b); }
inline tensor operator*(const tensor& a, const tensor& b) { return detail::binary(mul_op{}, a, b); }
inline tensor operator/(const tensor& a, const tensor& b) { return detail::binary(div_op{}, a, b); }
inline tensor operator-(const tensor& x) { return detail::unary(neg_op{}, x); }
inline tensor exp(const tensor& x) { return detail::unary(exp_op{}, x); }
inline tensor log(const tensor& x) { return detail::unary(log_op{}, x); }
inline tensor sin(const tensor& x) { return detail::unary(sin_op{}, x); }
inline tensor cos(const tensor& x) { return detail::unary(cos_op{}, x); }
inline tensor tanh(const tensor& x) { return detail::unary(tanh_op{}, x); }
inline tensor pow(const tensor& x, double p) { return detail::unary(pow_op{p}, x); }

inline tensor sum(const tensor& x) {
  const auto& xi = detail::operand(x, "sum");
  return detail::record(sum_op{},
                        tensor(detail::reduce_kernel(xi, {}, shape_t(xi.shape.size(), 0))), x);
}

inline tensor sum(const tensor& x, std::int64_t axis) {
  const auto& xi = detail::operand(x, "sum_axis");
  const std::size_t a = detail::normalize_axis(axis, xi.shape.size(), "sum_axis", xi.shape);
  return detail::record(sum_axis_op{static_cast<std::ptrdiff_t>(axis)},
                        tensor(detail::sum_axis_kernel(xi, a)), x);
}

inline tensor sum_to(const tensor& x, const shape_t& shape) {
  const auto& xi = detail::operand(x, "sum_to");
  if (xi.shape == shape) return x;
  if (!detail::broadcastable_to(shape, xi.shape))
    detail::fail("sum_to: a tensor of shape ", detail::shape_string(xi.shape),
                 " cannot be summed to shape ", detail::shape_string(shape),
                 " (the target must broadcast to the source)");
  return detail::record(detail::sum_to_op{xi.shape}, tensor(detail::sum_to_kernel(xi, shape)), x);
}

inline tensor expand(const tensor& x, const shape_t& shape) {
  const auto& xi = detail::operand(x, "expand");
  if (xi.shape == shape) return x;
  if (!detail::broadcastable_to(xi.shape, shape))
    detail::fail("expand: a tensor of shape ", detail::shape_string(xi.shape),
                 " cannot be expanded to shape ", detail::shape_string(shape),
                 " (numpy rules: trailing dimensions must be equal or 1)");
  return detail::record(detail::expand_op{xi.shape},
                        tensor(detail::copy_kernel(xi, xi.dtype(), shape)), x);
}

inline tensor unsqueeze(const tensor& x, std::int64_t axis) {
  const auto& xi = detail::operand(x, "unsqueeze");
  const std::size_t a = detail::normalize_axis(axis, xi.shape.size() + 1, "unsqueeze", xi.shape);
  shape_t shape = xi.shape, strides = xi.strides;
  const std::int64_t st = a < xi.shape.size() ? xi.strides[a] * xi.shape[a] : 1;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(a), 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(a), st);
  return detail::record(detail::unsqueeze_op{static_cast<std::int64_t>(a)},
                        detail::view_of(xi, std::move(shape), std::move(strides)), x);
}

inline tensor transpose(const tensor& x) {
  const auto& xi = detail::operand(x, "transpose");
  if (xi.shape.size() < 2) return x;
  shape_t shape = xi.shape, strides = xi.strides;
  const std::size_t n = shape.size();
  std::swap(shape[n - 1], shape[n - 2]);
  std::swap(strides[n - 1], strides[n - 2]);
  return detail::record(detail::transpose_op{},
                        detail::view_of(xi, std::move(shape), std::move(strides)), x);
}

inline tensor matmul(const tensor& a0, const tensor& b0) {
  const auto& ai = detail::operand(a0, "matmul");
  const auto& bi = detail::operand(b0, "matmul");
  detail::check_cpu(ai, "matmul");
  detail::check_cpu(bi, "matmul");
  if (ai.shape.size() != 2 || bi.shape.size() != 2)
    detail::fail("matmul: expected two 2-D tensors, got shapes ", detail::shape_string(ai.shape),
                 " and ", detail::shape_string(bi.shape),
                 "; matmul supports 2-D x 2-D only (use unsqueeze to turn a vector into a matrix)");
  if (ai.shape[1] != bi.shape[0])
    detail::fail("matmul: shapes ", detail::shape_string(ai.shape), " and ",
                 detail::shape_string(bi.shape), " cannot be multiplied (inner dimensions ",
                 ai.shape[1], " and ", bi.shape[0],
                 " differ); transpose an operand or fix the shapes so that (m,k) x (k,n)");
  const mg::dtype d = detail::promote(ai.dtype(), bi.dtype());
  const tensor a = a0.to(d), b = b0.to(d);
  return detail::record(matmul_op{}, tensor(detail::matmul_kernel(*a.impl(), *b.impl())), a, b);
}

inline tensor tensor::to(mg::dtype d) const {
  const auto& xi = detail::operand(*this, "to");
  if (xi.dtype() == d) return *this;
  detail::check_dtype_implemented(d, "to");
  return detail::record(detail::to_op{xi.dtype()}, tensor(detail::copy_kernel(xi, d, xi.shape)),
                        *this);
}

inline tensor tensor::to(mg::device dev) const {
  const auto& xi = detail::operand(*this, "to");
  if (xi.device() == dev) return *this;
  return detail::record(detail::to_device_op{xi.device()}, tensor(detail::transfer_kernel(xi, dev)),
                        *this);
}

inline tensor tensor::contiguous() const {
  const auto& xi = detail::operand(*this, "contiguous");
  if (xi.is_contiguous()) return *this;
  return detail::record(detail::copy_op{}, tensor(detail::copy_kernel(xi, xi.dtype(), xi.shape)),
                        *this);
}

inline tensor tensor::sum() const { return mg::sum(*this); }
inline tensor tensor::sum(std::int64_t axis) const { return mg::sum(*this, axis); }
inline tensor tensor::t() const { return mg::transpose(*this); }

namespace detail {
template <class Op>
tensor& in_place(tensor& self, const tensor& other, const Op& op) {
  const char* name = std::is_same_v<Op, add_op> ? "add_" : "mul_";
  auto& si = const_cast<tensor_impl&>(operand(self, name));
  check_same_device(si, operand(other, name), name);
  if (grad_mode() && (self.requires_grad() || other.requires_grad()))
    fail(name, ": in-place operation on a tensor of shape ", shape_string(si.shape),
         " while grad mode is on and a tensor involved requires grad; the runtime engine does "
         "not record in-place operations yet: write a = a ",
         std::is_same_v<Op, add_op> ? "+" : "*", " b, or run it under mg::no_grad_guard");
  const shape_t result = broadcast_extents(si.shape, other.shape(), name);
  if (result != si.shape)
    fail(name, ": the result of shape ", shape_string(result),
         " does not fit in place into a tensor of shape ", shape_string(si.shape));
  const tensor b = other.to(si.dtype());
  copy_into(si, *binary_kernel(op, si, *b.impl(), si.shape));
  ++si.store->version;  // See Note [Version counter]
  return self;
}
}  // namespace detail

inline tensor& tensor::add_(const tensor& other) {
  return detail::in_place(*this, other, add_op{});
}
inline tensor& tensor::mul_(const tensor& other) {
  return detail::in_place(*this, other, mul_op{});
}

}  // namespace mg
