// The array functions the forward of a non-elementwise op is written against (reductions, shape
// changes, matrix products), supplied once per array family: plain numbers here (0-d arrays),
// static-engine expressions (expr algebra, also 0-d), xtensor in xt/algebra.hpp, mg::tensor in
// runtime/apply.hpp. They compute; they never record. A family that lacks them fails Algebra.
//
// The backward of such an op is written against the ops' public functions instead (mg::expand,
// mg::sum_to, mg::matmul, ...), which record on tensors when create_graph is on: that is what
// makes the gradient of a gradient work. See Note [One formula] in nodes.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <metagrad/core/broadcast.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/error.hpp>
#include <metagrad/types.hpp>

namespace mg::detail {

/// Which elements a reduction combines: all of them, or those along `dim` (negative dims count
/// from the end); with keepdim the reduced dimensions stay, with extent 1.
struct reduce_dims {
  bool all = true;
  std::int64_t dim = 0;
  bool keepdim = false;
};

// Specialised per array family; the primary template is deliberately undefined.
template <class X>
struct algebra_impl;

template <class X>
using algebra = algebra_impl<std::remove_cvref_t<X>>;

template <class X>
concept Algebra = requires {
  sizeof(algebra_impl<std::remove_cvref_t<X>>);
};

// Numbers (and any type whose values are 0-d: static-engine expressions specialise to this):
// sums are the identity, broadcasts too, and matmul is the product.
struct scalar_algebra {
  MG_HD static constexpr auto sum(const auto& x, const reduce_dims&) { return x; }
  MG_HD static constexpr auto prod(const auto& x, const reduce_dims&) { return x; }
  MG_HD static constexpr auto max(const auto& x, const reduce_dims&) { return x; }
  MG_HD static constexpr auto min(const auto& x, const reduce_dims&) { return x; }
  MG_HD static constexpr auto unsqueeze(const auto& x, std::ptrdiff_t) { return x; }
  MG_HD static constexpr auto broadcast(const auto& x, const shape_t&) { return x; }
  MG_HD static constexpr auto sum_to(const auto& x, const shape_t&) { return x; }
  MG_HD static constexpr auto matmul(const auto& a, const auto& b, const char* = nullptr) {
    return a * b;
  }
  MG_HD static constexpr auto transpose(const auto& x) { return x; }
  // a 0-d value reshaped to a shape of one element, or permuted: itself
  static constexpr auto reshape(const auto& x, const shape_t&, const auto&) { return x; }
  static constexpr auto permute(const auto& x, const auto&) { return x; }
  // indexing is not meaningful on 0-d values; these keep the ops' forwards callable on numbers
  // (which is how an op's arity is read), and the ops check shapes before reaching them
  static constexpr auto slice(const auto& x, const auto&) { return x; }
  static constexpr auto select(const auto& x, std::size_t, std::int64_t) { return x; }
  static constexpr auto embed(const auto& g, const shape_t&, const auto&, bool) { return g; }
  static constexpr auto index_select(const auto& x, std::size_t, const auto&) { return x; }
  static constexpr auto index_add(const auto& g, const shape_t&, std::size_t, const auto&) {
    return g;
  }
  static constexpr auto cat(std::size_t, const shape_t&, const auto& x, const auto&...) {
    return x;
  }
  static shape_t shape(const auto&) { return {}; }
};

template <class X>
requires std::is_arithmetic_v<X>
struct algebra_impl<X> : scalar_algebra {
};

/// The shape of x in its family (numbers and expressions: 0-d).
template <class X>
shape_t shape_of(const X& x) {
  return algebra<X>::shape(x);
}

/// The dimension r.dim of a shape of rank `rank`, checked; op names the op in the message.
inline std::size_t reduced_dim(const reduce_dims& r, std::size_t rank, const char* op,
                               const shape_t& shape) {
  const auto n = static_cast<std::int64_t>(rank);
  const std::int64_t lo = n == 0 ? -1 : -n, hi = n == 0 ? 0 : n - 1;
  if (r.dim < lo || r.dim > hi)
    fail(op, ": dim ", r.dim, " is out of range for a tensor of shape ", shape_string(shape),
         " (valid: ", lo, " to ", hi, ")");
  return n == 0 ? 0 : static_cast<std::size_t>(r.dim < 0 ? r.dim + n : r.dim);
}

/// The reduced dimensions as a bit mask, and the result's shape.
template <int = 0>
std::uint32_t reduced_mask(const reduce_dims& r, const shape_t& shape, const char* op,
                           shape_t& out) {
  out.clear();
  if (shape.empty()) return 0;
  std::uint32_t mask = 0;
  const std::size_t d = r.all ? 0 : reduced_dim(r, shape.size(), op, shape);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const bool reduced = r.all || i == d;
    if (reduced) mask |= std::uint32_t{1} << i;
    if (!reduced)
      out.push_back(shape[i]);
    else if (r.keepdim)
      out.push_back(1);
  }
  return mask;
}

}  // namespace mg::detail
