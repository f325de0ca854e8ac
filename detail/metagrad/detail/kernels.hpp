// CPU kernels of the runtime engine, on tensor_impl objects. Every kernel reads its inputs
// through their strides (views need not be contiguous) and writes a fresh contiguous output.
// Elementwise kernels evaluate the op structs of <metagrad/ops/elementwise.hpp> on each element:
// one formula for every engine.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <metagrad/detail/graph.hpp>
#include <metagrad/detail/storage.hpp>
#include <metagrad/error.hpp>

namespace mg::detail {

// numpy rules: align on the right; extents must be equal or 1.
inline shape_t broadcast_shapes(const shape_t& a, const shape_t& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  shape_t r(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      fail(op, ": shapes ", shape_str(a), " and ", shape_str(b),
           " cannot be broadcast together (numpy rules: trailing dimensions must be equal or 1); "
           "reshape one operand or sum it to a compatible shape first");
    r[i] = x == 1 ? y : x;
  }
  return r;
}

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
    fail(op, ": tensor of shape ", shape_str(t.shape), " is on device ", device_name(t.device()),
         "; the CPU kernels need device cpu (include <metagrad/cuda.hpp> for cuda tensors)");
}

// dst[i] = src[i] broadcast to dst's shape, converting the element type; dst may be a view.
inline void copy_into(tensor_impl& dst, const tensor_impl& src) {
  const shape_t sst = broadcast_strides(src, dst.shape);
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
  auto out = make_impl(shape, d);
  copy_into(*out, x);
  return out;
}

inline impl_ptr fill_kernel(const shape_t& shape, double value, dtype d, device dev) {
  auto out = make_impl(shape, d, dev);
  dispatch(d, [&]<class T>(std::type_identity<T>) {
    std::fill_n(out->data<T>(), out->numel(), static_cast<T>(value));
  });
  return out;
}

template <class Op>
impl_ptr unary_kernel(const Op& op, const tensor_impl& x) {
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
