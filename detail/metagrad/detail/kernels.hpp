// Kernels of the runtime engine, on tensor_impl objects. Every kernel reads its inputs through
// their strides (views need not be contiguous) and writes a fresh contiguous output on the
// inputs' device. Elementwise kernels evaluate the op structs of <metagrad/ops/elementwise.hpp>
// on each element: one formula for every engine. On the CPU they run here; on device cuda they
// describe the work (nd_space, nd_operand) and hand it to the registered backend (Note [Device
// backends] in device.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <metagrad/detail/broadcast.hpp>
#include <metagrad/detail/device.hpp>
#include <metagrad/detail/graph.hpp>
#include <metagrad/detail/storage.hpp>
#include <metagrad/error.hpp>

namespace mg::detail {

// Can a tensor of shape `from` be broadcast to `to`?
inline bool broadcastable_to(const shape_t& from, const shape_t& to) {
  if (from.size() > to.size()) return false;
  const std::size_t lead = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

// The strides with which x is read when broadcast to `out` (0 along broadcast dimensions).
inline shape_t broadcast_strides(const tensor_impl& x, const shape_t& out) {
  shape_t st(out.size(), 0);
  const std::size_t lead = out.size() - x.shape.size();
  for (std::size_t i = 0; i < x.shape.size(); ++i)
    st[lead + i] = x.shape[i] == out[lead + i] ? x.strides[i] : 0;
  return st;
}

// Calls body(off) for every index of `shape` in row-major order; off[k] is the element offset of
// operand k, which advances by strides[k][d] along dimension d.
template <std::size_t K, class Body>
void nd_for_each(const shape_t& shape, const std::array<const shape_t*, K>& strides,
                 std::array<std::int64_t, K> off, Body&& body) {
  const std::size_t nd = shape.size();
  if (numel_of(shape) == 0) return;
  if (nd == 0) {
    body(off);
    return;
  }
  std::array<std::int64_t, K> inner{};
  for (std::size_t k = 0; k < K; ++k) inner[k] = (*strides[k])[nd - 1];
  shape_t idx(nd, 0);
  for (;;) {
    auto o = off;
    for (std::int64_t i = 0; i < shape[nd - 1]; ++i) {
      body(o);
      for (std::size_t k = 0; k < K; ++k) o[k] += inner[k];
    }
    std::size_t d = nd - 1;
    for (; d-- > 0;) {
      for (std::size_t k = 0; k < K; ++k) off[k] += (*strides[k])[d];
      if (++idx[d] < shape[d]) break;
      for (std::size_t k = 0; k < K; ++k) off[k] -= (*strides[k])[d] * shape[d];
      idx[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

inline void check_cpu(const tensor_impl& t, const char* op) {
  if (t.device() != device::cpu)
    fail(op, ": a tensor of shape ", shape_string(t.shape), " is on device ",
         device_name(t.device()), "; ", op,
         " is implemented on device cpu only so far: move the operands with .to(mg::device::cpu)");
}

// The kernel description of a tensor read with `strides` (in the index space of the kernel).
inline nd_operand as_operand(const tensor_impl& t, const shape_t& strides) {
  check_device_rank(strides, "kernel");
  nd_operand o;
  o.data = static_cast<char*>(t.store->data) +
           t.offset * static_cast<std::int64_t>(element_size(t.dtype()));
  for (std::size_t d = 0; d < strides.size(); ++d) o.strides[d] = strides[d];
  return o;
}

inline nd_space as_space(const shape_t& shape, const char* op) {
  check_device_rank(shape, op);
  nd_space s;
  s.rank = static_cast<int>(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) s.extents[d] = shape[d];
  s.numel = numel_of(shape);
  return s;
}

// Merges neighbouring dimensions that every operand walks as one (a contiguous tensor becomes
// rank 1) and drops extent-1 dimensions, so that the device computes fewer index divisions.
template <std::size_t K>
void coalesce(nd_space& s, std::array<nd_operand*, K> ops) {
  int r = 0;
  for (int d = 0; d < s.rank; ++d) {
    if (s.extents[d] == 1) continue;
    bool merge = r > 0;
    for (std::size_t k = 0; k < K && merge; ++k)
      merge = ops[k]->strides[r - 1] == ops[k]->strides[d] * s.extents[d];
    if (merge) {
      s.extents[r - 1] *= s.extents[d];
      for (std::size_t k = 0; k < K; ++k) ops[k]->strides[r - 1] = ops[k]->strides[d];
    } else {
      s.extents[r] = s.extents[d];
      for (std::size_t k = 0; k < K; ++k) ops[k]->strides[r] = ops[k]->strides[d];
      ++r;
    }
  }
  s.rank = r;
}

inline void check_same_device(const tensor_impl& a, const tensor_impl& b, const char* op) {
  if (a.device() != b.device())
    fail(op, ": operands are on different devices (a tensor of shape ", shape_string(a.shape),
         " on ", device_name(a.device()), ", one of shape ", shape_string(b.shape), " on ",
         device_name(b.device()), "); move one with .to(mg::device::", device_name(a.device()),
         ") or .to(mg::device::", device_name(b.device()), ")");
}

// dst[i] = src[i] broadcast to dst's shape, converting the element type; dst may be a view.
inline void copy_into(tensor_impl& dst, const tensor_impl& src) {
  check_same_device(dst, src, "copy");
  const shape_t sst = broadcast_strides(src, dst.shape);
  if (dst.device() != device::cpu) {
    nd_space s = as_space(dst.shape, "copy");
    nd_operand o = as_operand(dst, dst.strides), i = as_operand(src, sst);
    coalesce<2>(s, {&o, &i});
    cuda_backend("copy").copy(s, dst.dtype(), o, src.dtype(), i);
    return;
  }
  dispatch(dst.dtype(), [&]<class D>(std::type_identity<D>) {
    dispatch(src.dtype(), [&]<class S>(std::type_identity<S>) {
      D* d = static_cast<D*>(dst.store->data);
      const S* s = static_cast<const S*>(src.store->data);
      nd_for_each<2>(dst.shape, {&dst.strides, &sst}, {dst.offset, src.offset},
                     [&](const auto& o) { d[o[0]] = static_cast<D>(s[o[1]]); });
    });
  });
}

// A contiguous copy of x with element type d, broadcast to `shape`.
inline impl_ptr copy_kernel(const tensor_impl& x, dtype d, const shape_t& shape) {
  auto out = make_impl(shape, d, x.device());
  copy_into(*out, x);
  return out;
}

// x's elements, contiguous, on device `dev`: x itself (an alias) when it already is that, else a
// copy; only a contiguous source is copied between devices, and it is not copied first.
inline impl_ptr transfer_kernel(const tensor_impl& x, device dev) {
  const auto c = x.is_contiguous() ? alias_of(x) : copy_kernel(x, x.dtype(), x.shape);
  if (dev == x.device()) return c;
  auto out = make_impl(x.shape, x.dtype(), dev);
  const std::size_t n = static_cast<std::size_t>(c->numel()) * element_size(x.dtype());
  if (n == 0) return out;
  const void* src = static_cast<const char*>(c->store->data) +
                    c->offset * static_cast<std::int64_t>(element_size(x.dtype()));
  if (dev == device::cpu)
    cuda_backend("to").to_host(out->store->data, src, n);
  else
    cuda_backend("to").from_host(out->store->data, src, n);
  return out;
}

inline impl_ptr fill_kernel(const shape_t& shape, double value, dtype d, device dev) {
  auto out = make_impl(shape, d, dev);
  if (dev != device::cpu) {
    if (out->numel() > 0) cuda_backend("fill").fill(out->store->data, d, out->numel(), value);
    return out;
  }
  dispatch(d, [&]<class T>(std::type_identity<T>) {
    std::fill_n(out->data<T>(), out->numel(), static_cast<T>(value));
  });
  return out;
}

// An elementwise op over `shape` on the backend device; b is null for unary ops.
template <class Op>
impl_ptr device_elementwise(const Op& op, const shape_t& shape, const tensor_impl& a,
                            const tensor_impl* b) {
  static_assert(has_op_code<Op>, "metagrad: internal: a kernel op without an op_code");
  auto out = make_impl(shape, a.dtype(), a.device());
  if (out->numel() == 0) return out;
  nd_space s = as_space(shape, op_name<Op>());
  nd_operand o = as_operand(*out, out->strides);
  nd_operand x = as_operand(a, broadcast_strides(a, shape));
  nd_operand y = b ? as_operand(*b, broadcast_strides(*b, shape)) : x;
  coalesce<3>(s, {&o, &x, &y});
  cuda_backend(op_name<Op>()).elementwise(op_code_of<Op>, op_param(op), a.dtype(), s, o, x, y);
  return out;
}

template <class Op>
impl_ptr unary_kernel(const Op& op, const tensor_impl& x) {
  if (x.device() != device::cpu) return device_elementwise(op, x.shape, x, nullptr);
  auto out = make_impl(x.shape, x.dtype());
  dispatch(x.dtype(), [&]<class T>(std::type_identity<T>) {
    T* o = out->data<T>();
    if (x.is_contiguous()) {
      const T* p = x.data<T>();
      for (std::int64_t i = 0, n = x.numel(); i < n; ++i) o[i] = static_cast<T>(op.forward(p[i]));
    } else {
      const T* p = static_cast<const T*>(x.store->data);
      nd_for_each<2>(x.shape, {&out->strides, &x.strides}, {0, x.offset},
                     [&](const auto& k) { o[k[0]] = static_cast<T>(op.forward(p[k[1]])); });
    }
  });
  return out;
}

// a and b have the same dtype; the output has the broadcast shape.
template <class Op>
impl_ptr binary_kernel(const Op& op, const tensor_impl& a, const tensor_impl& b,
                       const shape_t& shape) {
  check_same_device(a, b, op_name<Op>());
  if (a.device() != device::cpu) return device_elementwise(op, shape, a, &b);
  auto out = make_impl(shape, a.dtype());
  dispatch(a.dtype(), [&]<class T>(std::type_identity<T>) {
    T* o = out->data<T>();
    const std::int64_t n = out->numel();
    if (a.shape == shape && b.shape == shape && a.is_contiguous() && b.is_contiguous()) {
      const T* p = a.data<T>();
      const T* q = b.data<T>();
      for (std::int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(op.forward(p[i], q[i]));
    } else if (b.numel() == 1 && a.shape == shape && a.is_contiguous()) {
      const T* p = a.data<T>();
      const T q = *b.data<T>();
      for (std::int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(op.forward(p[i], q));
    } else {
      const shape_t as = broadcast_strides(a, shape), bs = broadcast_strides(b, shape);
      const T* p = static_cast<const T*>(a.store->data);
      const T* q = static_cast<const T*>(b.store->data);
      nd_for_each<3>(shape, {&out->strides, &as, &bs}, {0, a.offset, b.offset}, [&](const auto& k) {
        o[k[0]] = static_cast<T>(op.forward(p[k[1]], q[k[2]]));
      });
    }
  });
  return out;
}

// Sums x into a zero-initialised contiguous tensor of shape `shape`; out_strides are the strides
// of that output as indexed by x's dimensions (0 along summed dimensions).
inline impl_ptr reduce_kernel(const tensor_impl& x, const shape_t& shape,
                              const shape_t& out_strides) {
  if (x.device() != device::cpu) {
    if (x.numel() == 0) return fill_kernel(shape, 0.0, x.dtype(), x.device());
    auto out = make_impl(shape, x.dtype(), x.device());
    std::uint32_t mask = 0;
    for (std::size_t d = 0; d < out_strides.size(); ++d)
      if (out_strides[d] == 0) mask |= 1u << d;
    const nd_space space = as_space(x.shape, "sum");  // checks the rank first
    cuda_backend("sum").sum(x.dtype(), space, as_operand(x, x.strides), mask, out->store->data);
    return out;
  }
  auto out = fill_kernel(shape, 0.0, x.dtype(), device::cpu);
  dispatch(x.dtype(), [&]<class T>(std::type_identity<T>) {
    T* o = out->data<T>();
    const T* p = static_cast<const T*>(x.store->data);
    nd_for_each<2>(x.shape, {&out_strides, &x.strides}, {0, x.offset},
                   [&](const auto& k) { o[k[0]] += p[k[1]]; });
  });
  return out;
}

// Sum of x over the dimensions along which `shape` was broadcast to x's shape.
inline impl_ptr sum_to_kernel(const tensor_impl& x, const shape_t& shape) {
  const shape_t cs = contiguous_strides(shape);
  shape_t os(x.shape.size(), 0);
  const std::size_t lead = x.shape.size() - shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i)
    os[lead + i] = shape[i] == x.shape[lead + i] ? cs[i] : 0;
  return reduce_kernel(x, shape, os);
}

inline impl_ptr sum_axis_kernel(const tensor_impl& x, std::size_t axis) {
  shape_t shape = x.shape;
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(axis));
  shape_t os = contiguous_strides(shape);
  os.insert(os.begin() + static_cast<std::ptrdiff_t>(axis), 0);
  return reduce_kernel(x, shape, os);
}

}  // namespace mg::detail
