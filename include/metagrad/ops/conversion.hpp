// Conversions of mg::tensor: to another dtype, to another device, to contiguous memory, and a
// copy. Their public functions are tensor's members: `x.to(mg::f64)`, `x.to(mg::device::cuda)`,
// `x.contiguous()`, `x.clone()` (also `mg::clone(x)`).
#pragma once

#include <metagrad/concepts.hpp>
#include <metagrad/core/algebra.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/types.hpp>

namespace mg {

struct to_dtype_op {
  static constexpr const char* name = "to";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::nothing;
  dtype to, from;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::to_dtype(x, to); }
  // d/dx convert(x) = 1, in x's dtype
  auto backward(const auto&, const auto&, const auto& g) const { return g.to(from); }
};

struct to_device_op {
  static constexpr const char* name = "to_device";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::nothing;
  device to, from;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::to_device(x, to); }
  // d/dx move(x) = 1, on x's device
  auto backward(const auto&, const auto&, const auto& g) const { return g.to(from); }
};

struct contiguous_op {
  static constexpr const char* name = "contiguous";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::nothing;
  static auto forward(const auto& x) { return detail::algebra<decltype(x)>::contiguous(x); }
  // d/dx copy(x) = 1
  static auto backward(const auto&, const auto&, const auto& g) { return g; }
};

/// A copy that owns its storage (torch's clone): recorded, with the identity as its gradient.
struct clone_op {
  static constexpr const char* name = "clone";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::jointly;
  static constexpr auto saves = saved::nothing;
  static auto forward(const auto& x) { return detail::algebra<decltype(x)>::clone(x); }
  // d/dx copy(x) = 1
  static auto backward(const auto&, const auto&, const auto& g) { return g; }
};

using conversion_ops = op_list<to_dtype_op, to_device_op, contiguous_op, clone_op>;

}  // namespace mg
