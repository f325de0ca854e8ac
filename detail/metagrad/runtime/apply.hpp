// The tensor family of detail::call: how the runtime engine applies any op struct to mg::tensor.
//   - An elementwise op: operands are checked (defined, one device), converted to the dtype the
//     op computes in (recorded; Note [Elementwise dtypes]), broadcast; ONE kernel from the op
//     struct computes the value on their device (tensor_kernels.hpp), and a node is recorded.
//   - Any other op: its forward runs on tensors against algebra<tensor> (kernels and views; it
//     records nothing), and a node is recorded whose backward is the struct's (nodes.hpp).
// A C++ number among the operands becomes a 0-d tensor of the first floating tensor's dtype (so
// numbers do not promote, as in torch) on their device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/backend/blas.hpp>
#include <metagrad/backend/element_kernels.hpp>
#include <metagrad/backend/tensor_kernels.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/core/algebra.hpp>
#include <metagrad/core/broadcast.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/shape_rules.hpp>
#include <metagrad/core/type_name.hpp>
#include <metagrad/error.hpp>
#include <metagrad/runtime/graph.hpp>
#include <metagrad/runtime/nodes.hpp>
#include <metagrad/runtime/profiler.hpp>
#include <metagrad/tensor_class.hpp>

namespace mg::detail {

inline const tensor_impl& operand(const tensor& t, const char* op) {
  if (!t.defined())
    fail(op, ": an operand is an undefined tensor (default-constructed, or an unused gradient)");
  return *t.impl();
}

// A number among an op's operands: a 0-d tensor of the first floating operand's dtype (f64 when
// none is floating, so that bool and i64 tensors meet 0.5 as 0.5) on their device.
template <class X>
tensor as_tensor(const X& x, const tensor& like, dtype number_dtype) {
  if constexpr (std::is_same_v<X, tensor>) {
    return x;
  } else {
    return tensor(number_tensor(static_cast<double>(x), number_dtype, like.device()));
  }
}

template <class... X>
dtype number_dtype(const X&... x) {
  dtype d = dtype::f64;
  bool found = false;
  const auto visit = [&](const auto& a) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(a)>, tensor>) {
      if (!found && a.defined() && is_floating(a.dtype())) {
        d = a.dtype();
        found = true;
      }
    }
  };
  (visit(x), ...);
  return d;
}

template <class X, class... R>
const tensor& first_tensor(const X& x, const R&... r) {
  if constexpr (std::is_same_v<X, tensor>) {
    return x;
  } else {
    return first_tensor(r...);
  }
}

// Note [Elementwise dtypes]: the dtype of an elementwise op's result follows torch's type
// promotion. Operands rank by category (bool < integer < floating) and, within one, by width
// (bool < i64, f32 < f64); tensors with dimensions decide first, then 0-d tensors, then C++
// numbers, and a later group counts only when its category is higher (a number then brings the
// default dtype of its category: f32 or i64). So f32[3] + f64 0-d is f32, f32 + 1.0 is f32,
// i64 + 2 is i64, i64 + 2.5 is f32. The op computes in that dtype when it is floating. When it
// is i64 or bool, ops that keep integers (`keeps_integers`: add, mul, maximum, where...) compute
// in f64 (exact below 2^53) and convert the result back; comparisons compute in f64 and give
// bool; every other op (div, exp...) computes in f32, as torch's integer-to-float ops do.
struct promotion {
  int cat[3] = {-1, -1, -1};  // per group: tensors with dimensions, 0-d tensors, numbers
  dtype dt[3] = {dtype::b8, dtype::b8, dtype::b8};

  static int category(dtype d) { return is_floating(d) ? 2 : d == dtype::i64 ? 1 : 0; }
  static int width(dtype d) { return d == dtype::f64 || d == dtype::i64 ? 1 : 0; }
  void add(int group, int c, dtype d) {
    if (c > cat[group] || (c == cat[group] && width(d) > width(dt[group]))) {
      cat[group] = c;
      dt[group] = d;
    }
  }
  template <class X>
  void visit(const X& x) {
    if constexpr (std::is_same_v<X, tensor>) {
      if (x.defined()) add(x.dim() > 0 ? 0 : 1, category(x.dtype()), x.dtype());
    } else if constexpr (std::is_same_v<X, bool>) {
      add(2, 0, dtype::b8);
    } else if constexpr (std::is_integral_v<X>) {
      add(2, 1, dtype::i64);
    } else {
      add(2, 2, dtype::f32);
    }
  }
  dtype result() const {
    int c = cat[0];
    dtype d = dt[0];
    if (cat[1] > c) {
      c = cat[1];
      d = dt[1];
    }
    if (cat[2] > c) d = dt[2];
    return d;
  }
};

// keeps_integers, or for an op whose attributes decide (pow with an integer exponent):
// op.integral_result()
template <class Op>
bool keeps_integers_of(const Op& op) {
  if constexpr (requires { op.integral_result(); }) {
    return op.integral_result();
  } else {
    return keeps_integers<Op>();
  }
}

template <class X>
inline constexpr bool is_tensor_v = std::is_same_v<X, tensor>;

// A bit per operand that is a C++ number (Note [Number operands] in nodes.hpp).
template <class... X>
constexpr std::uint32_t number_mask() {
  std::uint32_t m = 0, bit = 1;
  ((m |= is_tensor_v<X> ? 0u : bit, bit <<= 1), ...);
  return m;
}

// The number operands' values, in dtype d.
template <class... X>
auto numbers_of(dtype d, const X&... x) {
  bound_numbers<bit_count(number_mask<X...>())> r;
  r.dtype = d;
  std::size_t k = 0;
  const auto visit = [&](const auto& a) {
    if constexpr (!is_tensor_v<std::remove_cvref_t<decltype(a)>>)
      r.values[k++] = static_cast<double>(a);
  };
  (visit(x), ...);
  return r;
}

template <class Op, class... X>
tensor elementwise_apply(const Op& op, dtype promoted, const X&... x) {
  constexpr std::size_t N = sizeof...(X);
  constexpr std::uint32_t numbers = number_mask<X...>();
  const char* name = op_name<Op>();
  const tensor_impl& first = operand(first_tensor(x...), name);
  const auto check = [&](const auto& a) {
    if constexpr (is_tensor_v<std::remove_cvref_t<decltype(a)>>)
      check_same_device(first, operand(a, name), name);
  };
  (check(x), ...);
  // See Note [Elementwise dtypes]
  const bool integral = !is_floating(promoted);
  const bool comparison = integral && !is_differentiable<Op>();
  const bool keeps = keeps_integers_of(op);
  const dtype d = !integral ? promoted : keeps || comparison ? dtype::f64 : dtype::f32;
  // the tensor operands in d (recorded: gradients come back in each dtype); the numbers are
  // operands of d that no kernel keeps (Note [Number operands] in nodes.hpp)
  const auto nums = numbers_of(d, x...);
  std::array<tensor, N> c;
  std::array<const tensor_impl*, N> in{};
  bool zero_d = first.device() == device::cpu;
  shape_t shape;
  [&]<std::size_t... k>(std::index_sequence<k...>) {
    const auto setup = [&]<std::size_t i>(std::integral_constant<std::size_t, i>, const auto& a) {
      if constexpr (is_tensor_v<std::remove_cvref_t<decltype(a)>>) {
        c[i] = a.to(d);
        in[i] = c[i].impl().get();
        zero_d = zero_d && in[i]->shape.empty();
        if (!in[i]->shape.empty()) shape = broadcast_extents(shape, in[i]->shape, name);
      }
    };
    (setup(std::integral_constant<std::size_t, k>{}, x), ...);
  }
  (std::make_index_sequence<N>{});
  const auto number_at = [&](std::size_t i) {
    return nums.values[bit_count(numbers & ((1u << i) - 1))];
  };
  const dtype result = dispatch_floating(
      d, [&]<class V>(std::type_identity<V>) { return dtype_of<forward_result_t<Op, V>>(); });
  tensor out;
  if (zero_d) {  // Note [Zero-d kernels]
    out = tensor(make_impl({}, result, device::cpu));
    std::array<element_value, N> e;
    std::array<const void*, N> p;
    for (std::size_t i = 0; i < N; ++i)
      p[i] = numbers >> i & 1 ? e[i].set(number_at(i), d) : element_address(*in[i]);
    zero_d_forward_kernel(op, d, element_address(*out.impl()), p);
  } else {
    std::array<std::optional<scalar_operand>, N> scalars;
    for (std::size_t i = 0; i < N; ++i)
      if (numbers >> i & 1) in[i] = scalars[i].emplace(number_at(i), d, first.device()).get();
    out = tensor(elementwise_kernel(op, in, shape, d, result));
  }
  if (integral && keeps)  // no operand requires grad: nothing to record
    return tensor(copy_kernel(*out.impl(), promoted, shape));
  return [&]<std::size_t... k>(std::index_sequence<k...>) {
    return record<numbers>(op, std::move(out), nums, c[k]...);
  }
  (std::make_index_sequence<N>{});
}

template <class Op, class... X>
tensor shaped_apply(const Op& op, const tensor& like, const X&... x) {
  const dtype nd = number_dtype(x...);
  return [&](const auto&... t) {
    (operand(t, op_name<Op>()), ...);
    tensor out;
    {
      grad_mode_guard off(false);
      out = tensor(op.forward(t...));
    }
    if constexpr (sizeof...(X) == 1) {
      if (out.impl() == like.impl()) return like;  // the identity (expand to its own shape...)
    }
    return record<number_mask<X...>()>(op, std::move(out), numbers_of(nd, x...), t...);
  }(as_tensor(x, like, nd)...);
}

// The tensor family of detail::call (see the comment at the top).
template <class Op, class... X>
tensor apply_in(tensor_family, const Op& op, const X&... x) {
  MG_DETAIL_LAZY_GUARD(Op);
  const prof::op_range profiled(&op_name<Op>, x...);  // <metagrad/profiler.hpp>
  const tensor& like = first_tensor(x...);
  operand(like, op_name<Op>());
  if constexpr (is_elementwise<Op>()) {
    promotion p;
    (p.visit(x), ...);
    return elementwise_apply(op, p.result(), x...);
  } else {
    return shaped_apply(op, like, x...);
  }
}

// A view of x with other shape/strides, sharing its storage (and version counter).
inline tensor view_of(const tensor& t, shape_t shape, shape_t strides) {
  const tensor_impl& x = *t.impl();
  auto v = alias_of(x);
  v->is_view = true;
  v->base = x.base ? x.base : t.impl();
  v->origin = x.origin;  // a view of an output of unbind, split or chunk inherits its rule
  v->own_tangent_only = x.own_tangent_only;  // a view of unpack_dual's primal has no tangent
  v->view_version = x.store->version;
  v->shape = std::move(shape);
  v->strides = std::move(strides);
  return tensor(std::move(v));
}

// The elements of a contiguous shape around dimension d: outer blocks of n slices of inner
// elements each.
struct slices_along {
  std::int64_t outer = 1, n = 1, inner = 1;
  slices_along(const shape_t& shape, std::size_t d) : n(shape[d]) {
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (i < d) outer *= shape[i];
      if (i > d) inner *= shape[i];
    }
  }
};

// The array functions of the non-elementwise ops' forwards, on tensors (algebra.hpp): kernels
// and views, never recorded.
template <>
struct algebra_impl<tensor> {
  static tensor reduce(const tensor& x, const reduce_dims& r, backend::reduction backend::*kind,
                       const char* op, double empty) {
    const auto& xi = *x.impl();
    check_rank(xi.shape, op);
    shape_t shape;
    const std::uint32_t mask = reduced_mask(r, xi.shape, op, shape);
    if (empty != empty && xi.numel() == 0)
      fail(op, ": a tensor of shape ", shape_string(xi.shape), " has no elements to reduce; ", op,
           " of nothing is undefined (torch refuses it too)");
    return tensor(reduce_kernel(xi, mask, shape, kind, op, empty));
  }
  // a bool tensor sums and multiplies as i64 (torch counts)
  static tensor sum(const tensor& x, const reduce_dims& r) {
    return reduce(as_integers(x), r, &backend::sum, "sum", 0.0);
  }
  static tensor prod(const tensor& x, const reduce_dims& r) {
    return reduce(as_integers(x), r, &backend::prod, "prod", 1.0);
  }
  static tensor as_integers(const tensor& x) {
    const auto& xi = *x.impl();
    return xi.dtype() == dtype::b8 ? tensor(copy_kernel(xi, dtype::i64, xi.shape)) : x;
  }
  static tensor max(const tensor& x, const reduce_dims& r) {
    return reduce(x, r, &backend::max, "max", std::numeric_limits<double>::quiet_NaN());
  }
  static tensor min(const tensor& x, const reduce_dims& r) {
    return reduce(x, r, &backend::min, "min", std::numeric_limits<double>::quiet_NaN());
  }
  static tensor unsqueeze(const tensor& x, std::ptrdiff_t axis) {
    const auto& xi = *x.impl();
    const std::size_t a = wrap_dim(axis, xi.shape.size() + 1, "unsqueeze", xi.shape);
    shape_t shape = xi.shape, strides = xi.strides;
    const std::int64_t st = a < xi.shape.size() ? xi.strides[a] * xi.shape[a] : 1;
    shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(a), 1);
    strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(a), st);
    return view_of(x, std::move(shape), std::move(strides));
  }
  static tensor broadcast(const tensor& x, const shape_t& shape) {
    const auto& xi = *x.impl();
    if (xi.shape == shape) return x;
    if (!broadcastable_to(xi.shape, shape))
      fail("expand: a tensor of shape ", shape_string(xi.shape), " cannot be expanded to shape ",
           shape_string(shape), " (numpy rules: trailing dimensions must be equal or 1)");
    return view_of(x, shape, broadcast_strides(xi, shape));
  }
  static tensor sum_to(const tensor& x, const shape_t& shape) {
    const auto& xi = *x.impl();
    if (xi.shape == shape) return x;
    if (!broadcastable_to(shape, xi.shape))
      fail("sum_to: a tensor of shape ", shape_string(xi.shape), " cannot be summed to shape ",
           shape_string(shape), " (the target must broadcast to the source)");
    return tensor(sum_to_kernel(xi, shape));
  }
  static tensor transpose(const tensor& x) {
    const auto& xi = *x.impl();
    if (xi.shape.size() < 2) return x;
    shape_t shape = xi.shape, strides = xi.strides;
    const std::size_t n = shape.size();
    std::swap(shape[n - 1], shape[n - 2]);
    std::swap(strides[n - 1], strides[n - 2]);
    return view_of(x, std::move(shape), std::move(strides));
  }
  static tensor matmul(const tensor& a, const tensor& b, const char* op = "matmul") {
    const auto& ai = *a.impl();
    const auto& bi = *b.impl();
    check_same_device(ai, bi, op);
    if (ai.dtype() != bi.dtype() || !is_floating(ai.dtype()))
      fail(op, ": expected both operands of one floating dtype, got ", dtype_name(ai.dtype()),
           " and ", dtype_name(bi.dtype()), "; convert one with .to(mg::",
           dtype_name(ai.dtype() == dtype::f64 || bi.dtype() == dtype::f64 ? dtype::f64
                                                                           : dtype::f32),
           ")");
    const matmul_plan p = plan_matmul(ai.shape, bi.shape, op);
    const bool on_cpu = ai.device() == device::cpu;
    if (ai.shape.size() == 2 && bi.shape.size() == 2)
      return tensor(on_cpu ? matmul_kernel(ai, bi) : device_matmul_kernel(ai, bi));
    // promote 1-D operands, broadcast the batch dimensions into contiguous copies
    const auto full = [](const tensor_impl& x, const shape_t& promoted, const shape_t& to) {
      const auto v = alias_of(x);
      v->shape = promoted;
      v->strides = *view_strides(x.shape, x.strides, promoted);
      return copy_kernel(*v, x.dtype(), to);
    };
    shape_t pa = ai.shape, pb = bi.shape;
    if (pa.size() == 1) pa = {1, pa[0]};
    if (pb.size() == 1) pb = {pb[0], 1};
    const auto A = full(ai, pa, p.a_full), B = full(bi, pb, p.b_full);
    if (!on_cpu) return tensor(device_matmul_kernel(*A, *B, numel_of(p.batch), &p.out));
    auto out = make_impl(p.out, ai.dtype(), device::cpu);
    dispatch_floating(ai.dtype(), [&]<class T>(std::type_identity<T>) {
      batched_gemm(A->template data<T>(), B->template data<T>(), out->template data<T>(),
                   numel_of(p.batch), p.m, p.k, p.n);
    });
    return tensor(std::move(out));
  }
  static tensor reshape(const tensor& x, const shape_t& to, const shape_rule& rule) {
    const auto& xi = *x.impl();
    if (auto st = view_strides(xi.shape, xi.strides, to)) return view_of(x, to, std::move(*st));
    if (rule.view)
      fail("view: a tensor of shape ", shape_string(xi.shape), " and strides ",
           shape_string(xi.strides), " cannot be viewed as shape ", shape_string(to),
           " (its elements are not laid out for it); use reshape, which copies, or call "
           "contiguous() first");
    auto c = copy_kernel(xi, xi.dtype(), xi.shape);
    c->shape = to;
    c->strides = contiguous_strides(to);
    return tensor(std::move(c));
  }
  static tensor permute(const tensor& x, const std::vector<std::size_t>& p) {
    const auto& xi = *x.impl();
    shape_t shape(p.size()), strides(p.size());
    for (std::size_t i = 0; i < p.size(); ++i) {
      shape[i] = xi.shape[p[i]];
      strides[i] = xi.strides[p[i]];
    }
    return view_of(x, std::move(shape), std::move(strides));
  }
  static tensor slice(const tensor& x, const slice_range& r) {
    const auto& xi = *x.impl();
    shape_t shape = xi.shape, strides = xi.strides;
    shape[r.dim] = r.length;
    strides[r.dim] *= r.step;
    tensor v = view_of(x, std::move(shape), std::move(strides));
    if (r.length > 0) v.impl()->offset += r.start * xi.strides[r.dim];
    return v;
  }
  static tensor select(const tensor& x, std::size_t d, std::int64_t i) {
    const auto& xi = *x.impl();
    shape_t shape = xi.shape, strides = xi.strides;
    shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(d));
    strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(d));
    tensor v = view_of(x, std::move(shape), std::move(strides));
    v.impl()->offset += i * xi.strides[d];
    return v;
  }
  static tensor embed(const tensor& g, const shape_t& shape, const slice_range& r, bool drop) {
    const auto& gi = *g.impl();
    tensor out(fill_kernel(shape, 0.0, gi.dtype(), gi.device()));
    const tensor v = drop ? select(out, r.dim, r.start) : slice(out, r);
    copy_into(*v.impl(), gi);
    return out;
  }
  static tensor index_select(const tensor& x, std::size_t d, const std::vector<std::int64_t>& idx) {
    const auto& xi = *x.impl();
    if (xi.shape.empty()) return clone(x);  // a 0-d tensor and one index 0 (index_select_op)
    shape_t shape = xi.shape;
    shape[d] = static_cast<std::int64_t>(idx.size());
    tensor out(make_impl(shape, xi.dtype(), xi.device()));
    if (xi.device() == device::cpu) {                   // whole slices in one loop
      const auto c = transfer_kernel(xi, device::cpu);  // contiguous
      const slices_along at(xi.shape, d);
      dispatch(xi.dtype(), [&]<class T>(std::type_identity<T>) {
        const T* src = c->data<T>();
        T* dst = out.impl()->data<T>();
        for (std::int64_t o = 0; o < at.outer; ++o)
          for (std::size_t k = 0; k < idx.size(); ++k)
            std::copy_n(
                src + (o * at.n + idx[k]) * at.inner, at.inner,
                dst + (o * static_cast<std::int64_t>(idx.size()) + static_cast<std::int64_t>(k)) *
                          at.inner);
      });
      return out;
    }
    for (std::size_t k = 0; k < idx.size(); ++k)
      copy_into(*select(out, d, static_cast<std::int64_t>(k)).impl(), *select(x, d, idx[k]).impl());
    return out;
  }
  // a template in name only: its add kernel is instantiated with index_select's backward
  template <int I = 0>
  static tensor index_add(const tensor& g, const shape_t& shape, std::size_t d,
                          const std::vector<std::int64_t>& idx) {
    const auto& gi = *g.impl();
    tensor out(fill_kernel(shape, 0.0, gi.dtype(), gi.device()));
    if (shape.empty()) return clone(g);  // a 0-d input and one index 0 (index_select_op)
    if (gi.device() == device::cpu) {    // whole slices in one loop
      const auto c = transfer_kernel(gi, device::cpu);  // contiguous
      const slices_along at(shape, d);
      const auto m = static_cast<std::int64_t>(idx.size());
      dispatch(gi.dtype(), [&]<class T>(std::type_identity<T>) {
        const T* src = c->data<T>();
        T* dst = lazy<I>(*out.impl()).template data<T>();
        for (std::int64_t o = 0; o < at.outer; ++o)
          for (std::int64_t k = 0; k < m; ++k) {
            T* to = dst + (o * at.n + idx[static_cast<std::size_t>(k)]) * at.inner;
            const T* from = src + (o * m + k) * at.inner;
            for (std::int64_t i = 0; i < at.inner; ++i) {
              if constexpr (std::is_same_v<T, bool>)
                to[i] = to[i] || from[i];
              else
                to[i] += from[i];
            }
          }
      });
      return out;
    }
    for (std::size_t k = 0; k < idx.size(); ++k) {
      const tensor dst = select(out, d, idx[k]), src = select(g, d, static_cast<std::int64_t>(k));
      const auto& di = lazy<I>(*dst.impl());
      copy_into(*dst.impl(), *elementwise_kernel(
                                 add_op{}, std::array<const tensor_impl*, 2>{&di, src.impl().get()},
                                 di.shape, gi.dtype(), gi.dtype()));
    }
    return out;
  }
  template <class... T>
  static tensor cat(std::size_t d, const shape_t& shape, const T&... x) {
    return cat_list(d, shape, {x...});
  }
  static tensor cat_list(std::size_t d, const shape_t& shape, const tensor_list& xs) {
    promotion p;
    for (const auto& x : xs) {
      check_same_device(*xs[0].impl(), *x.impl(), "cat");
      p.add(0, promotion::category(x.dtype()), x.dtype());
    }
    const dtype dt = p.result();
    tensor out(make_impl(shape, dt, xs[0].device()));
    std::int64_t off = 0;
    for (const auto& x : xs) {
      const std::int64_t n = x.shape()[d];
      copy_into(*slice(out, {d, off, n, 1}).impl(), *x.impl());
      off += n;
    }
    return out;
  }
  // 0, 1, ..., n-1 along dimension d of a tensor of x's rank, dtype and device (extent 1
  // elsewhere).
  static tensor iota(const tensor& x, std::size_t d) {
    const auto& xi = *x.impl();
    shape_t shape(xi.shape.size(), 1);
    const std::int64_t n = xi.shape.empty() ? 1 : xi.shape[d];
    if (!shape.empty()) shape[d] = n;
    auto h = make_impl(shape, dtype::f64);
    for (std::int64_t i = 0; i < n; ++i) h->data<double>()[i] = static_cast<double>(i);
    tensor t(std::move(h));
    return tensor(transfer_kernel(*copy_kernel(*t.impl(), xi.dtype(), shape), xi.device()));
  }
  static shape_t shape(const tensor& x) { return x.shape(); }
  static tensor to_dtype(const tensor& x, dtype d) {
    const auto& xi = *x.impl();
    return xi.dtype() == d ? x : tensor(copy_kernel(xi, d, xi.shape));
  }
  static tensor to_device(const tensor& x, device d) {
    return tensor(transfer_kernel(*x.impl(), d));
  }
  static tensor clone(const tensor& x) {
    const auto& xi = *x.impl();
    return tensor(copy_kernel(xi, xi.dtype(), xi.shape));
  }
  static tensor contiguous(const tensor& x) {
    const auto& xi = *x.impl();
    return xi.is_contiguous() ? x : tensor(copy_kernel(xi, xi.dtype(), xi.shape));
  }
};

}  // namespace mg::detail
