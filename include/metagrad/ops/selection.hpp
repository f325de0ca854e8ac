// Ops that select elements and say where they are: argmax and argmin (of all elements or along
// a dim), max and min along a dim with their indices, and topk. Indices are i64 tensors for
// tensors (on the tensor's device) and xt::xarray<std::int64_t> for arrays; which elements win
// ties is Note [Selection order] (core/selection.hpp). The static engine traces values, not
// positions: inside it, mg::amax and mg::amin (reductions.hpp) give the values along a dim.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include <metagrad/call_site.hpp>
#include <metagrad/core/algebra.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/selection.hpp>
#include <metagrad/core/shape_rules.hpp>
#include <metagrad/ops/indexing.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/ops/reductions.hpp>
#include <metagrad/ops/shape.hpp>

namespace mg {

/// What max and min along a dim, and topk, return: the values (differentiable) and their
/// positions along the dim (i64). `auto [v, i] = mg::max(x, 1);` binds both, as torch's
/// (values, indices) pair.
template <class V, class I>
struct values_and_indices {
  V values;
  I indices;
};
// (clang 16 does not deduce an aggregate's arguments by itself)
template <class V, class I>
values_and_indices(V, I) -> values_and_indices<V, I>;

namespace detail {

// The tensor family's hooks, compiled in the library (Note [Lazy members] in runtime/lazy.hpp):
// the positions `top_positions` gives for x's values read as a contiguous array of shape `as`,
// and an i64 tensor of `shape` on `like`'s device holding `values`.
template <int>
std::vector<std::int64_t> tensor_top_positions(const tensor& x, const shape_t& as, std::size_t d,
                                               std::int64_t k, pick p);
template <int>
tensor index_tensor(const std::vector<std::int64_t>& values, const shape_t& shape,
                    const tensor& like);

// 0, as a value that depends on X: the hooks are instantiated where a caller is, with <0>
template <class X>
inline constexpr int hook_v = std::is_same_v<X, tensor> ? 0 : 1;

template <class X>
std::vector<std::int64_t> positions_of(const X& x, const shape_t& as, std::size_t d, std::int64_t k,
                                       pick p) {
  if constexpr (std::is_same_v<X, tensor>)
    return tensor_top_positions<hook_v<X>>(x, as, d, k, p);
  else
    return algebra<X>::top_positions(x, as, d, k, p);
}

template <class X>
auto indices_like(const X& x, const std::vector<std::int64_t>& values, const shape_t& shape) {
  if constexpr (std::is_same_v<X, tensor>)
    return index_tensor<hook_v<X>>(values, shape, x);
  else
    return algebra<X>::index_array(values, shape);
}

// (a deduced return type, so that the assertion fires where it is called, before the caller's
// other errors)
template <class X>
constexpr auto check_selectable() {
  static_assert(!ZeroD<X>,
                "metagrad: indices have no meaning inside the static engine, which traces "
                "values: use mg::amax(x, dim) or mg::amin(x, dim) there for the values");
  return true;
}

// Where the first extreme along dim of each slice is: x's shape, the dim, the positions, and
// the shape of the result (keepdim or not).
struct extreme_at {
  shape_t shape;
  std::size_t d;
  std::vector<std::int64_t> positions;
  shape_t out;
};
template <class X>
extreme_at extreme_positions(const X& x, std::int64_t dim, bool keepdim, pick p, const char* op) {
  const shape_t s = shape_of(x);
  const std::size_t d = wrap_dim(dim, s.size(), op, s);
  if (!s.empty() && s[d] == 0)
    fail(op, ": dim ", dim, " of a tensor of shape ", shape_string(s), " is empty, so it has no ",
         p == pick::largest ? "largest" : "smallest",
         " element; reduce along a dim of nonzero extent");
  shape_t out = s;
  if (!out.empty()) {
    if (keepdim)
      out[d] = 1;
    else
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(d));
  }
  return {s, d, positions_of(x, s, d, 1, p), std::move(out)};
}

// The position of the first extreme along dim of each slice, as argmax(x, dim) returns it.
template <class X>
auto extreme_indices(const X& x, std::int64_t dim, bool keepdim, pick p, const char* op) {
  check_selectable<X>();
  const extreme_at e = extreme_positions(x, dim, keepdim, p, op);
  return indices_like(x, e.positions, e.out);
}

// The flat index of the first extreme of all elements, 0-d.
template <class X>
auto extreme_index(const X& x, pick p, const char* op) {
  check_selectable<X>();
  const shape_t s = shape_of(x);
  const std::int64_t n = numel_of(s);
  if (n == 0)
    fail(op, ": a tensor of shape ", shape_string(s), " has no elements, so no ",
         p == pick::largest ? "largest" : "smallest", " one; give a non-empty tensor");
  return indices_like(x, positions_of(x, shape_t{n}, 0, 1, p), shape_t{});
}

}  // namespace detail

/// The flat (row-major) index of the largest element, as a 0-d i64 (the first of equal ones;
/// NaN counts as the largest).
template <class X>
requires detail::Operands<X>
auto argmax(const X& x) { return detail::extreme_index(x, detail::pick::largest, "argmax"); }
/// The index along `dim` of the largest element of each slice (the first of equal ones).
template <class X>
requires detail::Operands<X>
auto argmax(const X& x, std::int64_t dim, bool keepdim = false) {
  return detail::extreme_indices(x, dim, keepdim, detail::pick::largest, "argmax");
}
/// The flat index of the smallest element, as a 0-d i64 (the first of equal ones; NaN counts
/// as the smallest, as min propagates it).
template <class X>
requires detail::Operands<X>
auto argmin(const X& x) { return detail::extreme_index(x, detail::pick::smallest, "argmin"); }
/// The index along `dim` of the smallest element of each slice (the first of equal ones).
template <class X>
requires detail::Operands<X>
auto argmin(const X& x, std::int64_t dim, bool keepdim = false) {
  return detail::extreme_indices(x, dim, keepdim, detail::pick::smallest, "argmin");
}

/// The elements at the flat indices `flat` of x, in a result of shape `shape`: topk's values.
/// Its gradient adds g back at those indices.
struct topk_op {
  static constexpr const char* name = "topk";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::input_shapes;
  static constexpr bool saves_indices = true;  // freed with the graph, as index_select's
  std::vector<std::int64_t> flat;
  shape_t shape;
  auto forward(const auto& x) const {
    return mg::reshape(mg::index_select(mg::reshape(x, {-1}), 0, flat), shape);
  }
  auto backward(const auto& x, const auto&, const auto& g) const {
    const shape_t xs = detail::shape_of(x);
    return mg::reshape(
        detail::call(index_add_op{{detail::numel_of(xs)}, 0, flat}, mg::reshape(g, {-1})), xs);
  }
};
/// The values of max and min along a dim: the elements their indices name, taken as topk takes
/// them (so the node saves the indices only, as torch's).
struct max_dim_op : topk_op {
  static constexpr const char* name = "max";
};
struct min_dim_op : topk_op {
  static constexpr const char* name = "min";
};

namespace detail {
template <class Op, class X>
auto extreme_along(const X& x, std::int64_t dim, bool keepdim, pick p, const char* op,
                   call_site site) {
  check_selectable<X>();
  const site_scope_for<X> here(site);
  extreme_at e = extreme_positions(x, dim, keepdim, p, op);
  auto i = indices_like(x, e.positions, e.out);
  auto flat = flat_indices(e.positions, e.shape, e.d, 1);
  return values_and_indices{call_at(site, Op{{std::move(flat), std::move(e.out)}}, x),
                            std::move(i)};
}
}  // namespace detail

/// The largest element of each slice along `dim` and its index: {values, indices}. The
/// gradient of the values goes to the element the index names (torch's max(dim)).
template <class X>
requires detail::Operands<X>
auto max(const X& x, std::int64_t dim, bool keepdim = false, call_site site = {}) {
  return detail::extreme_along<max_dim_op>(x, dim, keepdim, detail::pick::largest, "max", site);
}
/// The smallest element of each slice along `dim` and its index: {values, indices}.
template <class X>
requires detail::Operands<X>
auto min(const X& x, std::int64_t dim, bool keepdim = false, call_site site = {}) {
  return detail::extreme_along<min_dim_op>(x, dim, keepdim, detail::pick::smallest, "min", site);
}

/// The k largest elements of each slice along `dim` (or the k smallest, largest = false), in
/// order, with their indices: {values, indices}, each of x's shape with extent k along dim.
/// Equal values keep the order they appear in; NaN counts as the largest (Note [Selection
/// order]).
template <class X>
requires detail::Operands<X>
auto topk(const X& x, std::int64_t k, std::int64_t dim = -1, bool largest = true,
          call_site site = {}) {
  detail::check_selectable<X>();
  const detail::site_scope_for<X> here(site);
  const shape_t s = detail::shape_of(x);
  const std::size_t d = detail::wrap_dim(dim, s.size(), "topk", s);
  const std::int64_t n = s.empty() ? 1 : s[d];
  if (k < 0 || k > n)
    detail::fail("topk: k = ", k, " is out of range for dim ", dim, " of extent ", n, " (shape ",
                 detail::shape_string(s), "); valid: 0 to ", n);
  const auto p = largest ? detail::pick::largest : detail::pick::bottom;
  auto at = detail::positions_of(x, s, d, k, p);
  shape_t out = s;
  if (!out.empty()) out[d] = k;
  auto i = detail::indices_like(x, at, out);
  return values_and_indices{
      detail::call_at(site, topk_op{detail::flat_indices(at, s, d, k), out}, x), std::move(i)};
}

using selection_ops = op_list<topk_op, max_dim_op, min_dim_op>;

}  // namespace mg
