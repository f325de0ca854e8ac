// Indexing ops: slice, select (t[i]), index_select, cat and stack, with the ops that carry their
// gradients back (embed: a slice written into zeros; index_add: rows summed into zeros, so
// repeated indices accumulate). On tensors slice and select are views sharing storage and
// version counter, as in torch; index_select, cat and stack copy.
//
// cat and stack take a tensor_list on tensors (`mg::cat({a, b}, 1)`, declared with mg::tensor)
// and a std::tuple of operands in every family, the static engine included
// (`mg::cat(std::tuple{x, y}, 1)`).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <metagrad/concepts.hpp>
#include <metagrad/core/algebra.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/shape_rules.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/ops/shape.hpp>

namespace mg {

template <class X>
requires detail::Operands<X>
auto slice(const X& x, std::int64_t dim, std::optional<std::int64_t> start = {},
           std::optional<std::int64_t> end = {}, std::int64_t step = 1, call_site site = {});
template <class X>
requires detail::Operands<X>
auto select(const X& x, std::int64_t dim, std::int64_t index, call_site site = {});
template <class X>
requires detail::Operands<X>
auto index_select(const X& x, std::int64_t dim, const std::vector<std::int64_t>& index,
                  call_site site = {});

/// g written into zeros of `shape` at the elements a slice (or, with `drop`, a select) took:
/// the adjoint of slice and select.
struct embed_op {
  static constexpr const char* name = "slice_backward";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::nothing;
  shape_t shape;
  detail::slice_range r;
  bool drop = false;  // g lacks dimension r.dim (select)
  auto forward(const auto& g) const {
    return detail::algebra<decltype(g)>::embed(g, shape, r, drop);
  }
  // d/dg embed(g) = the elements of gg at the slice
  auto backward(const auto&, const auto&, const auto& gg) const {
    const auto d = static_cast<std::int64_t>(r.dim);
    if constexpr (detail::ZeroD<decltype(gg)>) {
      return gg;  // 0-d: nothing was sliced
    } else {
      if (drop) return mg::select(gg, d, r.start);
      const std::int64_t end = r.length == 0 ? r.start : r.start + (r.length - 1) * r.step + 1;
      return mg::slice(gg, d, r.start, end, r.step);
    }
  }
};

/// The elements start, start + step, ... below end along `dim` (a view on tensors). start and end
/// are clamped to the extent; negative ones count from the end; step is positive.
struct slice_op {
  static constexpr const char* name = "slice";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::input_shapes;
  detail::slice_spec s;
  auto forward(const auto& x) const {
    return detail::algebra<decltype(x)>::slice(x, detail::resolve_slice(s, detail::shape_of(x)));
  }
  // d/dx slice(x) = g at the sliced elements, 0 elsewhere
  auto backward(const auto& x, const auto&, const auto& g) const {
    const shape_t xs = detail::shape_of(x);
    return detail::call(embed_op{xs, embedding(xs), drops_dimension}, g);
  }
  // where backward writes g in zeros of the input's shape xs
  static constexpr bool drops_dimension = false;
  detail::slice_range embedding(const shape_t& xs) const { return detail::resolve_slice(s, xs); }
};
template <class X>
requires detail::Operands<X>
auto slice(const X& x, std::int64_t dim, std::optional<std::int64_t> start,
           std::optional<std::int64_t> end, std::int64_t step, call_site site) {
  return detail::call_at(site, slice_op{{dim, start, end, step}}, x);
}

/// The elements at `index` along `dim`, without that dimension (a view on tensors; `t[i]` is
/// select(t, 0, i)). Negative indices count from the end.
struct select_op {
  static constexpr const char* name = "select";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::input_shapes;
  std::int64_t dim, index;
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  detail::slice_range at(const shape_t& xs) const {
    if (xs.empty()) detail::fail("select: a 0-d tensor cannot be indexed (it has no dimensions)");
    const std::size_t d = detail::wrap_dim(dim, xs.size(), "select", xs);
    return {d, detail::wrap_index(index, xs[d], "select", d, xs), 1, 1};
  }
  auto forward(const auto& x) const {
    const auto r = at(detail::shape_of(x));
    return detail::algebra<decltype(x)>::select(x, r.dim, r.start);
  }
  // d/dx select(x) = g at the selected elements, 0 elsewhere
  auto backward(const auto& x, const auto&, const auto& g) const {
    const shape_t xs = detail::shape_of(x);
    return detail::call(embed_op{xs, embedding(xs), drops_dimension}, g);
  }
  // where backward writes g in zeros of the input's shape xs (g lacks dimension dim)
  static constexpr bool drops_dimension = true;
  detail::slice_range embedding(const shape_t& xs) const { return at(xs); }
};
template <class X>
requires detail::Operands<X>
auto select(const X& x, std::int64_t dim, std::int64_t index, call_site site) {
  return detail::call_at(site, select_op{dim, index}, x);
}

// Note [Fixed indices]: slice and select with their dimension and bounds as template arguments,
// `mg::slice<0, 14, 28>(w)` and `mg::select<0, 2>(m)`. In the static engine the op then carries no
// run-time state: its type is all of it (it says is_stateless; T{} builds it with its bounds), so
// every occurrence of one fixed slice of one value is planned as one slot (Note [Slot identity]
// in static/plan.hpp), and a loop of mg::repeat reads it once per call rather than once per
// occurrence and step (Note [Loop-invariant reads] in static/scan.hpp). With run-time bounds,
// two slices of one type may take different elements, so each occurrence is computed apart. On
// other operands (tensors, xtensor arrays) they are slice(x, Dim, Start, End) and select(x, Dim,
// Index).
template <std::int64_t Dim, std::int64_t Start, std::int64_t End>
struct fixed_slice_op : slice_op {
  static constexpr bool is_stateless = true;
  fixed_slice_op() : slice_op{{Dim, Start, End, 1}} {}
};
template <std::int64_t Dim, std::int64_t Index>
struct fixed_select_op : select_op {
  static constexpr bool is_stateless = true;
  fixed_select_op() : select_op{Dim, Index} {}
};

/// The elements Start, Start + 1, ... below End along Dim, the bounds known at compile time (Note
/// [Fixed indices]); otherwise as slice(x, Dim, Start, End).
template <std::int64_t Dim, std::int64_t Start, std::int64_t End, class X>
requires detail::Operands<X>
auto slice(const X& x, call_site site = {}) {
  if constexpr (std::is_same_v<detail::family_of_t<X>, detail::expr_family>) {
    return detail::call_at(site, fixed_slice_op<Dim, Start, End>{}, x);
  } else {
    return slice(x, Dim, Start, End, 1, site);
  }
}
/// The elements at Index along Dim, without that dimension, both known at compile time (Note
/// [Fixed indices]); otherwise as select(x, Dim, Index).
template <std::int64_t Dim, std::int64_t Index, class X>
requires detail::Operands<X>
auto select(const X& x, call_site site = {}) {
  if constexpr (std::is_same_v<detail::family_of_t<X>, detail::expr_family>) {
    return detail::call_at(site, fixed_select_op<Dim, Index>{}, x);
  } else {
    return select(x, Dim, Index, site);
  }
}

/// Zeros of `shape` with slice k of g along `dim` added at index[k] (repeated indices add up):
/// the adjoint of index_select.
struct index_add_op {
  static constexpr const char* name = "index_select_backward";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::nothing;
  shape_t shape;
  std::size_t dim;
  std::vector<std::int64_t> index;
  auto forward(const auto& g) const {
    return detail::algebra<decltype(g)>::index_add(g, shape, dim, index);
  }
  // d/dg index_add(g) = the slices of gg at the indices
  auto backward(const auto&, const auto&, const auto& gg) const {
    return mg::index_select(gg, static_cast<std::int64_t>(dim), index);
  }
};

/// The slices of x along `dim` at the given indices, in their order (repeats allowed).
struct index_select_op {
  static constexpr const char* name = "index_select";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::input_shapes;
  static constexpr bool saves_indices = true;  // freed with the graph, as torch's saved index
  std::int64_t dim;
  std::vector<std::int64_t> index;
  template <int = 0>  // Note [Lazy members] in runtime/lazy.hpp
  std::size_t checked_dim(const shape_t& xs) const {
    const std::size_t d = detail::wrap_dim(dim, xs.size(), "index_select", xs);
    const std::int64_t n = xs.empty() ? 1 : xs[d];
    if (xs.empty() && index.size() != 1)
      detail::fail("index_select: a 0-d tensor takes exactly one index (0), got ", index.size());
    for (auto i : index)
      if (i < 0 || i >= n)
        detail::fail("index_select: index ", i, " is out of range for dim ", dim,
                     " of a tensor of shape ", detail::shape_string(xs), " (valid: 0 to ", n - 1,
                     ")");
    return d;
  }
  auto forward(const auto& x) const {
    const shape_t xs = detail::shape_of(x);
    return detail::algebra<decltype(x)>::index_select(x, checked_dim(xs), index);
  }
  // d/dx index_select(x) = g's slices added at their indices
  auto backward(const auto& x, const auto&, const auto& g) const {
    const shape_t xs = detail::shape_of(x);
    return detail::call(index_add_op{xs, checked_dim(xs), index}, g);
  }
};
template <class X>
requires detail::Operands<X>
auto index_select(const X& x, std::int64_t dim, const std::vector<std::int64_t>& index,
                  call_site site) {
  return detail::call_at(site, index_select_op{dim, index}, x);
}

/// N operands joined along `dim`; their other extents agree.
template <std::size_t N>
struct cat_op {
  static constexpr const char* name = "cat";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::input_shapes;
  std::int64_t dim = 0;
  template <class... X>
  requires(sizeof...(X) == N) auto forward(const X&... x) const {
    std::size_t d = 0;
    const shape_t out = detail::cat_shape({detail::shape_of(x)...}, dim, "cat", d);
    using first = std::tuple_element_t<0, std::tuple<X...>>;
    return detail::algebra<first>::cat(d, out, x...);
  }
  // d/dx_k cat(x...) = the slice of g that x_k filled
  template <class... X>
  requires(sizeof...(X) == N + 2) auto backward(const X&... a) const {
    return [&]<std::size_t... k>(std::index_sequence<k...>) {
      std::size_t d = 0;
      const auto args = std::tie(a...);
      const std::vector<shape_t> shapes{detail::shape_of(std::get<k>(args))...};
      detail::cat_shape(shapes, dim, "cat", d);
      std::array<std::int64_t, N + 1> off{};
      for (std::size_t i = 0; i < N; ++i) off[i + 1] = off[i] + shapes[i][d];
      const auto& g = std::get<N + 1>(args);
      const auto dd = static_cast<std::int64_t>(d);
      return grads{mg::slice(g, dd, off[k], off[k + 1])...};
    }
    (std::make_index_sequence<N>{});
  }
};

/// cat and stack of a tuple of operands (any family, the static engine included).
template <class... X>
requires detail::Operands<X...> &&
    (sizeof...(X) >= 2) auto cat(const std::tuple<X...>& xs, std::int64_t dim = 0,
                                 call_site site = {}) {
  const detail::site_scope_for<X...> here(site);
  return std::apply([&](const auto&... x) { return detail::call(cat_op<sizeof...(X)>{dim}, x...); },
                    xs);
}
template <class... X>
requires detail::Operands<X...> &&
    (sizeof...(X) >= 2) auto stack(const std::tuple<X...>& xs, std::int64_t dim = 0,
                                   call_site site = {}) {
  const detail::site_scope_for<X...> here(site);
  return std::apply(
      [&](const auto&... x) {
        return detail::call(cat_op<sizeof...(X)>{dim}, mg::unsqueeze(x, dim)...);
      },
      xs);
}

using indexing_ops = op_list<slice_op, embed_op, select_op, index_select_op, index_add_op>;

}  // namespace mg
