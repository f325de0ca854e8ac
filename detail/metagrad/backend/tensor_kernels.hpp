// The runtime engine's kernels on tensor_impl objects, for any device: each describes its work
// (nd_space, nd_operand) and hands it to the backend of the operands' device (Note [Device
// backends] in backend.hpp). Every kernel reads its inputs through their strides (views need not
// be contiguous) and writes a fresh contiguous output on the inputs' device. Nothing here
// records: the graph is built by the callers (runtime/apply.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include <metagrad/backend/backend.hpp>
#include <metagrad/backend/element_kernels.hpp>
#include <metagrad/backend/registry.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/core/broadcast.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/core/storage.hpp>
#include <metagrad/core/tensor_impl.hpp>
#include <metagrad/error.hpp>

namespace mg::detail {

// Note [Elements in the storage]: a CPU tensor of up to 256 bytes keeps its elements in its
// storage object's own block, as a 0-d one keeps its element in `small`: one pooled allocation
// instead of two, and no trip through the host cache (Note [Host caching allocator]) and its
// lock. A row of 14 doubles is 112 bytes; the LSTM of benchmarks/lstm.cpp makes 100,000 such
// tensors per gradient. The blocks are of three sizes, so that a tensor takes at most twice its
// elements' bytes; their elements are aligned to 16 bytes (the host cache's to 64), which no
// kernel relies on. They are not counted by mg::cpu::memory_allocated().
template <std::size_t Bytes>
struct storage_with_elements : storage {
  storage_with_elements() {}  // user-provided: the elements are left uninitialised
  alignas(16) std::byte elements[Bytes];
};
// A storage holding nbytes (at most 256) of elements of dtype d on the CPU.
template <int = 0>
[[gnu::noinline]] std::shared_ptr<storage> storage_holding_elements(std::size_t nbytes, dtype d) {
  const auto made = [&]<std::size_t Bytes>(std::integral_constant<std::size_t, Bytes>) {
    auto s = make_pooled<storage_with_elements<Bytes>>();
    s->data = s->elements;
    return std::shared_ptr<storage>(std::move(s));
  };
  auto s = nbytes <= 64    ? made(std::integral_constant<std::size_t, 64>{})
           : nbytes <= 128 ? made(std::integral_constant<std::size_t, 128>{})
                           : made(std::integral_constant<std::size_t, 256>{});
  s->nbytes = nbytes;
  s->dtype = d;
  return s;
}

// Uninitialised storage for n elements. See Note [Storage interface].
MG_INLINE std::shared_ptr<storage> allocate(std::int64_t n, dtype d, device dev) {
  const std::size_t nbytes = static_cast<std::size_t>(n) * element_size(d);
  if (dev == device::cpu && nbytes > sizeof(storage::small) && nbytes <= 256)
    return storage_holding_elements(nbytes, d);
  auto s = make_pooled<storage>();
  s->nbytes = nbytes;
  s->dtype = d;
  s->device = dev;
  if (dev == device::cpu && s->nbytes <= sizeof(s->small)) {
    s->data = s->small;
  } else if (s->nbytes) {
    const backend& b = backend_of(dev, "allocate");
    s->data = b.allocate(s->nbytes);
    s->release = b.release;
  }
  return s;
}

inline impl_ptr make_impl(const shape_t& shape, dtype d, device dev = device::cpu) {
  for (auto e : shape)
    if (e < 0) fail("tensor: negative extent in shape ", shape_string(shape));
  auto t = make_pooled<tensor_impl>();
  t->store = allocate(numel_of(shape), d, dev);
  t->shape = shape;
  t->strides = contiguous_strides(shape);
  return t;
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

template <int = 0>
nd_space as_space(const shape_t& shape, const char* op) {
  check_rank(shape, op);
  nd_space s;
  s.rank = static_cast<int>(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) s.extents[d] = shape[d];
  s.numel = numel_of(shape);
  return s;
}

// The address of t's element (0, ..., 0).
inline void* element_address(const tensor_impl& t) {
  return static_cast<char*>(t.store->data) +
         t.offset * static_cast<std::int64_t>(element_size(t.dtype()));
}

// The kernel description of a tensor read with `strides` (in the index space of the kernel).
inline nd_operand as_operand(const tensor_impl& t, const shape_t& strides) {
  nd_operand o;
  o.data = element_address(t);
  for (std::size_t d = 0; d < strides.size(); ++d) o.strides[d] = strides[d];
  return o;
}

// t read broadcast to `shape`.
inline nd_operand broadcast_operand(const tensor_impl& t, const shape_t& shape) {
  return as_operand(t, broadcast_strides(t, shape));
}

// Note [Flat operands]: an elementwise kernel whose operands are all contiguous in the result's
// shape, or 0-d, runs over one dimension of numel elements: the operands' strides are 1, or 0 for
// a 0-d one. Building the general description (a shape's broadcast strides per operand, then
// merging dimensions) cost several times the arithmetic of a 14-element row.
inline bool flat_operand(const tensor_impl& t, const shape_t& shape, nd_operand& o) {
  if (!t.shape.empty() && (t.shape != shape || !t.is_contiguous())) return false;
  o.data = element_address(t);
  o.strides[0] = t.shape.empty() ? 0 : 1;
  return true;
}
inline nd_space flat_space(std::int64_t numel) {
  nd_space s;
  s.rank = 1;
  s.extents[0] = numel;
  s.numel = numel;
  return s;
}

template <int = 0>
void check_same_device(const tensor_impl& a, const tensor_impl& b, const char* op) {
  if (a.device() != b.device())
    fail(op, ": operands are on different devices (a tensor of shape ", shape_string(a.shape),
         " on ", device_name(a.device()), ", one of shape ", shape_string(b.shape), " on ",
         device_name(b.device()), "); move one with .to(", device_spelling(a.device()), ") or .to(",
         device_spelling(b.device()), ")");
}

// dst[i] = src[i] broadcast to dst's shape, converting the element type; dst may be a view.
template <int = 0>
void copy_into(tensor_impl& dst, const tensor_impl& src) {
  check_same_device(dst, src, "copy");
  if (dst.numel() == 0) return;
  nd_space s = as_space(dst.shape, "copy");
  nd_operand o = as_operand(dst, dst.strides), i = broadcast_operand(src, dst.shape);
  nd_operand* ops[] = {&o, &i};
  coalesce(s, ops, 2);
  backend_of(dst.device(), "copy").copy(s, dst.dtype(), o, src.dtype(), i);
}

// A contiguous copy of x with element type d, broadcast to `shape`.
inline impl_ptr copy_kernel(const tensor_impl& x, dtype d, const shape_t& shape) {
  auto out = make_impl(shape, d, x.device());
  copy_into(*out, x);
  return out;
}

// x's elements, contiguous, on device `dev`: x itself (an alias) when it already is that, else a
// copy; only a contiguous source is copied between devices, and it is not copied first. Between
// two devices that are not the CPU, the elements pass through host memory.
inline impl_ptr transfer_kernel(const tensor_impl& x, device dev) {
  const auto c = x.is_contiguous() ? alias_of(x) : copy_kernel(x, x.dtype(), x.shape);
  if (dev == x.device()) return c;
  const std::size_t n = static_cast<std::size_t>(c->numel()) * element_size(x.dtype());
  const void* src = static_cast<const char*>(c->store->data) +
                    c->offset * static_cast<std::int64_t>(element_size(x.dtype()));
  impl_ptr staged;
  if (x.device().type() != device_type::cpu && dev.type() != device_type::cpu && n > 0) {
    staged = make_impl(x.shape, x.dtype(), device::cpu);
    backend_of(x.device(), "to").to_host(staged->store->data, src, n);
    src = staged->store->data;
  }
  auto out = make_impl(x.shape, x.dtype(), dev);
  if (n == 0) return out;
  if (dev.type() == device_type::cpu)
    backend_of(x.device(), "to").to_host(out->store->data, src, n);
  else
    backend_of(dev, "to").from_host(out->store->data, src, n);
  return out;
}

inline impl_ptr fill_kernel(const shape_t& shape, double value, dtype d, device dev) {
  auto out = make_impl(shape, d, dev);
  if (out->numel() > 0) backend_of(dev, "fill").fill(out->store->data, d, out->numel(), value);
  return out;
}

// Every element of t (a view too) set to value, in one pass.
inline void fill_into(tensor_impl& t, double value) {
  if (t.numel() == 0) return;
  if (t.is_contiguous()) {
    const std::size_t at = static_cast<std::size_t>(t.offset) * element_size(t.dtype());
    backend_of(t.device(), "fill")
        .fill(static_cast<char*>(t.store->data) + at, t.dtype(), t.numel(), value);
  } else {
    copy_into(t, *fill_kernel({}, value, t.dtype(), t.device()));  // read at every element
  }
}

// Reduces x over the dimensions in `reduced` (a bit per dimension) into a contiguous tensor of
// shape `shape` (x's shape without, or with extent 1 at, the reduced dimensions), with one of
// the backend's reductions (sum, prod, max, min); `empty` fills the result of an empty input.
inline impl_ptr reduce_kernel(const tensor_impl& x, std::uint32_t reduced, const shape_t& shape,
                              backend::reduction backend::*kind, const char* op, double empty) {
  if (x.numel() == 0) return fill_kernel(shape, empty, x.dtype(), x.device());
  auto out = make_impl(shape, x.dtype(), x.device());
  const nd_space s = as_space(x.shape, op);
  (backend_of(x.device(), op).*kind)(x.dtype(), s, as_operand(x, x.strides), reduced,
                                     out->store->data);
  return out;
}

inline impl_ptr sum_kernel(const tensor_impl& x, std::uint32_t reduced, const shape_t& shape) {
  return reduce_kernel(x, reduced, shape, &backend::sum, "sum", 0.0);
}

// Sum of x over the dimensions along which `shape` was broadcast to x's shape.
inline impl_ptr sum_to_kernel(const tensor_impl& x, const shape_t& shape) {
  // one value broadcast (every stride 0, as the gradient of sum) on the CPU: the value times its
  // number of copies, filled; on f32 the same bits as the sum (whose partial sums are exact in
  // double), on f64 the exact sum rounded once
  if (x.device() == device::cpu && is_floating(x.dtype()) && x.numel() > 0 &&
      std::all_of(x.strides.begin(), x.strides.end(), [](std::int64_t s) { return s == 0; })) {
    const std::int64_t copies = x.numel() / numel_of(shape);
    if (copies < (std::int64_t{1} << 29)) {
      const void* at = element_address(x);
      const double v = x.dtype() == dtype::f64 ? *static_cast<const double*>(at)
                                               : double{*static_cast<const float*>(at)};
      return fill_kernel(shape, v * static_cast<double>(copies), x.dtype(), x.device());
    }
  }
  const std::size_t lead = x.shape.size() - shape.size();
  std::uint32_t reduced = 0;
  for (std::size_t i = 0; i < x.shape.size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && x.shape[i] != 1)) reduced |= 1u << i;
  return sum_kernel(x, reduced, shape);
}

// One element of dtype d holding v, in place: a 0-d kernel operand that is a number (or a
// placeholder for a value a backward does not read).
class element_value {
 public:
  const void* set(double v, dtype d) {
    switch (d) {
      case dtype::f64:
        return &(u_.f64 = v);
      case dtype::i64:
        return &(u_.i64 = static_cast<std::int64_t>(v));
      case dtype::b8:
        return &(u_.b8 = v != 0);
      default:
        return &(u_.f32 = static_cast<float>(v));
    }
  }

 private:
  union {
    double f64;
    float f32;
    std::int64_t i64;
    bool b8;
  } u_{};
};

// Note [Zero-d kernels]: on the CPU, an elementwise op whose operands are all 0-d runs on their
// elements' addresses: no index space, broadcast strides or coalescing to set up, which are most
// of a one-element op's cost. It evaluates the op struct's forward and backward on numbers, as
// the general kernels do for every element outside SIMD packs.
template <class Op, std::size_t N>
void zero_d_forward_kernel(const Op& op, dtype value, void* out,
                           const std::array<const void*, N>& in) {
  dispatch_floating(value, [&]<class T>(std::type_identity<T>) {
    using R = forward_result_t<Op, T>;
    [&]<std::size_t... k>(std::index_sequence<k...>) {
      *static_cast<R*>(out) = static_cast<R>(op.forward(*static_cast<const T*>(in[k])...));
    }
    (std::make_index_sequence<N>{});
  });
}

template <bool Saved, class T>
auto zero_d_saved(const void* p) {
  if constexpr (Saved) {
    return *static_cast<const T*>(p);
  } else {
    return not_saved{};
  }
}

// grads[k] (where not null) = component k of op's backward at 0-d operands (in[k] and y may be
// null when op does not save them).
template <class Op, std::size_t N>
void zero_d_backward_kernel(const Op& op, dtype value, const std::array<const void*, N>& in,
                            const void* y, const void* g, const std::array<void*, N>& grads) {
  if constexpr (is_differentiable<Op>()) {
    dispatch_floating(value, [&]<class T>(std::type_identity<T>) {
      using R = forward_result_t<Op, T>;
      [&]<std::size_t... k>(std::index_sequence<k...>) {
        const auto b =
            op.backward(zero_d_saved<saves_inputs_v<Op>, T>(in[k])...,
                        zero_d_saved<saves_output_v<Op>, R>(y), *static_cast<const T*>(g));
        (
            [&] {
              if constexpr (!std::is_same_v<component_t<k, decltype(b)>, no_grad>)
                if (grads[k]) *static_cast<T*>(grads[k]) = static_cast<T>(component<k>(b));
            }(),
            ...);
      }
      (std::make_index_sequence<N>{});
    });
  }
}

// Op over its inputs (all of dtype `value`, broadcast to out's shape) into `out`, on their
// device. out may be strided (a view), and may be an input itself when that input is read at
// out's own elements (an in-place op: each element is read before it is written).
template <class Op, std::size_t N>
void elementwise_kernel_into(const Op& op, const std::array<const tensor_impl*, N>& in,
                             tensor_impl& out, dtype value) {
  if (out.numel() == 0) return;
  if (std::array<nd_operand, N + 1> f; flat_operand(out, out.shape, f[0])) {
    bool flat = true;
    for (std::size_t k = 0; k < N && flat; ++k) flat = flat_operand(*in[k], out.shape, f[k + 1]);
    if (flat) {
      kernels_of<Op>(out.device()).forward(&op, value, flat_space(out.numel()), f[0], f.data() + 1);
      return;
    }
  }
  nd_space s = as_space(out.shape, op_name<Op>());
  std::array<nd_operand, N + 1> o;
  o[0] = as_operand(out, out.strides);
  for (std::size_t k = 0; k < N; ++k) o[k + 1] = broadcast_operand(*in[k], out.shape);
  std::array<nd_operand*, N + 1> p;
  for (std::size_t k = 0; k <= N; ++k) p[k] = &o[k];
  coalesce(s, p.data(), N + 1);
  kernels_of<Op>(out.device()).forward(&op, value, s, o[0], o.data() + 1);
}

// Op over its inputs (all of dtype `value`, broadcast to `shape`) on their device.
template <class Op, std::size_t N>
impl_ptr elementwise_kernel(const Op& op, const std::array<const tensor_impl*, N>& in,
                            const shape_t& shape, dtype value, dtype result) {
  auto out = make_impl(shape, result, in[0]->device());
  elementwise_kernel_into(op, in, *out, value);
  return out;
}

// The gradients of op's inputs in the output's shape (that of g), from one kernel that
// evaluates op's backward per element; in[k] and y may be null when op does not save them, and
// only the gradients marked in `wanted` are computed.
template <class Op, std::size_t N>
std::array<impl_ptr, N> elementwise_backward_kernel(const Op& op,
                                                    const std::array<const tensor_impl*, N>& in,
                                                    const tensor_impl* y, const tensor_impl& g,
                                                    const std::array<bool, N>& wanted) {
  const shape_t& shape = g.shape;
  std::array<impl_ptr, N> out;
  for (std::size_t k = 0; k < N; ++k)
    if (wanted[k]) out[k] = make_impl(shape, g.dtype(), g.device());
  if (g.numel() == 0) {
    for (auto& o : out)
      if (o) backend_of(g.device(), "backward").fill(o->store->data, g.dtype(), 0, 0.0);
    return out;
  }
  std::array<nd_operand, 2 * N + 2> o{};
  // Note [Flat operands]
  bool flat = flat_operand(g, shape, o[N + 1]) && (!y || flat_operand(*y, shape, o[N]));
  for (std::size_t k = 0; k < N && flat; ++k)
    flat = (!in[k] || flat_operand(*in[k], shape, o[k])) &&
           (!out[k] || flat_operand(*out[k], shape, o[N + 2 + k]));
  if (flat) {
    kernels_of<Op>(g.device())
        .backward(&op, g.dtype(), flat_space(g.numel()), o.data(), o[N], o[N + 1],
                  o.data() + N + 2);
    return out;
  }
  // (the general form writes every operand the flat one may have written)
  nd_space s = as_space(shape, op_name<Op>());
  for (std::size_t k = 0; k < N; ++k) {
    if (in[k]) o[k] = broadcast_operand(*in[k], shape);
    if (out[k]) o[N + 2 + k] = as_operand(*out[k], out[k]->strides);
  }
  if (y) o[N] = as_operand(*y, y->strides);
  o[N + 1] = as_operand(g, g.strides);
  std::array<nd_operand*, 2 * N + 2> p;
  for (std::size_t k = 0; k < 2 * N + 2; ++k) p[k] = &o[k];
  coalesce(s, p.data(), 2 * N + 2);
  kernels_of<Op>(g.device())
      .backward(&op, g.dtype(), s, o.data(), o[N], o[N + 1], o.data() + N + 2);
  return out;
}

}  // namespace mg::detail
