// Shape ops: expand (broadcast_to), sum_to (its adjoint), unsqueeze, transpose, reshape (view,
// flatten, squeeze) and permute (transpose(d0, d1)). On tensors each is a view sharing storage
// and version counter where torch's is (reshape of a tensor whose layout allows it, view,
// flatten, squeeze, unsqueeze, expand, transpose, permute); reshape copies otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <metagrad/concepts.hpp>
#include <metagrad/core/algebra.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/shape_rules.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/types.hpp>

namespace mg {

// Note [Views and in-place writes]: a view op's backward reads only its input's shape
// (saved::input_shapes or nothing), so writing the input in place afterwards is no error. A view
// remembers its base and the version its grad_fn reflects; used after the base (or another view
// of it) was written in place, it first gets a fresh grad_fn, as_strided of the base's current
// history (refresh_view in tensor_members.hpp), whatever op made it, as torch regenerates views.
// An expanded view (stride 0: several elements on one location) gets expand of as_strided, the
// as_strided viewing each location once. A view whose base no longer requires grad after the
// write (detach_() then a write) loses its old history.

// The public functions, declared first: each op's backward names the others.
template <class X>
requires detail::Operands<X>
auto expand(const X& x, const shape_t& shape, call_site site = {});
template <class X>
requires detail::Operands<X>
auto sum_to(const X& x, const shape_t& shape, call_site site = {});
template <class X>
requires detail::Operands<X>
auto transpose(const X& x, call_site site = {});
template <class X>
requires detail::Operands<X>
auto sum(const X& x, std::int64_t dim, bool keepdim = false, call_site site = {});
template <class X>
requires detail::Operands<X>
auto reshape(const X& x, const shape_t& shape, call_site site = {});

/// x broadcast (numpy rules) to `shape`.
struct expand_op {
  static constexpr const char* name = "expand";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::input_shapes;
  shape_t shape;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::broadcast(x, shape); }
  // d/dx expand(x) = g summed back over the broadcast dimensions
  auto backward(const auto& x, const auto&, const auto& g) const {
    return mg::sum_to(g, detail::shape_of(x));
  }
};
template <class X>
requires detail::Operands<X>
auto expand(const X& x, const shape_t& shape, call_site site) {
  return detail::call_at(site, expand_op{shape}, x);
}

/// x summed over the dimensions along which `shape` broadcasts to x's shape.
struct sum_to_op {
  static constexpr const char* name = "sum_to";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::input_shapes;
  shape_t shape;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::sum_to(x, shape); }
  // d/dx sum_to(x) = g broadcast back to x's shape
  auto backward(const auto& x, const auto&, const auto& g) const {
    return mg::expand(g, detail::shape_of(x));
  }
};
template <class X>
requires detail::Operands<X>
auto sum_to(const X& x, const shape_t& shape, call_site site) {
  return detail::call_at(site, sum_to_op{shape}, x);
}

/// x with a dimension of extent 1 inserted at `axis` (a view on tensors).
struct unsqueeze_op {
  static constexpr const char* name = "unsqueeze";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::nothing;
  std::ptrdiff_t axis;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::unsqueeze(x, axis); }
  // d/dx unsqueeze(x) = g without the inserted axis (a sum over one element)
  auto backward(const auto&, const auto&, const auto& g) const { return mg::sum(g, axis); }
};
template <class X>
requires detail::Operands<X>
auto unsqueeze(const X& x, std::int64_t axis, call_site site = {}) {
  return detail::call_at(site, unsqueeze_op{static_cast<std::ptrdiff_t>(axis)}, x);
}

/// x with its last two dimensions swapped (a view on tensors; the identity below 2-D).
struct transpose_op {
  static constexpr const char* name = "transpose";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::nothing;
  static auto forward(const auto& x) { return detail::algebra<decltype(x)>::transpose(x); }
  // d/dx x^T = g^T
  static auto backward(const auto&, const auto&, const auto& g) { return mg::transpose(g); }
};
template <class X>
requires detail::Operands<X>
auto transpose(const X& x, call_site site) { return detail::call_at(site, transpose_op{}, x); }

/// x with another shape and the same elements in row-major order: reshape (-1 infers one extent;
/// a view when x's layout allows, else a copy), view (a view or an error), flatten, squeeze.
struct reshape_op {
  static constexpr const char* name = "reshape";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::input_shapes;
  detail::shape_rule rule;
  auto forward(const auto& x) const {
    return detail::algebra<decltype(x)>::reshape(x, rule.apply(detail::shape_of(x)), rule);
  }
  // d/dx reshape(x) = g in x's shape
  auto backward(const auto& x, const auto&, const auto& g) const {
    return mg::reshape(g, detail::shape_of(x));
  }
};
template <class X>
requires detail::Operands<X>
auto reshape(const X& x, const shape_t& shape, call_site site) {
  return detail::call_at(site, reshape_op{{.shape = shape}}, x);
}
/// reshape that never copies: an error when x's layout does not allow the shape.
template <class X>
requires detail::Operands<X>
auto view(const X& x, const shape_t& shape, call_site site = {}) {
  return detail::call_at(site, reshape_op{{.shape = shape, .view = true}}, x);
}
/// Dimensions start_dim..end_dim merged into one (a 0-d x becomes 1-D).
template <class X>
requires detail::Operands<X>
auto flatten(const X& x, std::int64_t start_dim = 0, std::int64_t end_dim = -1,
             call_site site = {}) {
  using detail::shape_rule;
  return detail::call_at(
      site, reshape_op{{.kind = shape_rule::flatten, .a = start_dim, .b = end_dim}}, x);
}
/// Every dimension of extent 1 removed.
template <class X>
requires detail::Operands<X>
auto squeeze(const X& x, call_site site = {}) {
  return detail::call_at(site, reshape_op{{.kind = detail::shape_rule::squeeze_all}}, x);
}
/// Dimension `dim` removed if its extent is 1 (else x unchanged, as in torch).
template <class X>
requires detail::Operands<X>
auto squeeze(const X& x, std::int64_t dim, call_site site = {}) {
  return detail::call_at(site, reshape_op{{.kind = detail::shape_rule::squeeze_dim, .a = dim}}, x);
}

/// x with its dimensions reordered: permute(x, {2, 0, 1}); transpose(x, d0, d1) swaps two.
struct permute_op {
  static constexpr const char* name = "permute";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::nothing;
  detail::permutation p;
  auto forward(const auto& x) const {
    return detail::algebra<decltype(x)>::permute(x, p.apply(detail::shape_of(x)));
  }
  // d/dx permute(x) = g permuted back
  auto backward(const auto&, const auto&, const auto& g) const {
    return detail::call(permute_op{p.inverse(detail::shape_of(g).size())}, g);
  }
};
template <class X>
requires detail::Operands<X>
auto permute(const X& x, const std::vector<std::int64_t>& dims, call_site site = {}) {
  return detail::call_at(site, permute_op{{.dims = dims}}, x);
}
template <class X>
requires detail::Operands<X>
auto transpose(const X& x, std::int64_t d0, std::int64_t d1, call_site site = {}) {
  return detail::call_at(site, permute_op{{.d0 = d0, .d1 = d1, .swap = true}}, x);
}

using shape_ops = op_list<expand_op, sum_to_op, unsqueeze_op, transpose_op, reshape_op, permute_op>;

}  // namespace mg
