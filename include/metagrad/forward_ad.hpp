// Forward-mode automatic differentiation on mg::tensor (torch.autograd.forward_ad): inside a
// dual level, a tensor made with make_dual carries a tangent, and every op on it gives its
// result the tangent J·t (the Jacobian-vector product), computed alongside the values.
//
// ```cpp
// mg::forward_ad::dual_level level;
// auto x = mg::forward_ad::make_dual(primal, direction);
// auto [y, dy] = mg::forward_ad::unpack_dual(mg::sin(x) * x);   // dy = (cos x · x + sin
// x)·direction
// ```
// Built-in ops derive their tangents from their backward (Note [Tangents from the backward]);
// an mg::Function takes part through its static jvp. Tangents are cleared when the level closes.
#pragma once

#include <mutex>

#include <metagrad/error.hpp>
#include <metagrad/runtime/definitions.hpp>
#include <metagrad/runtime/forward_ad.hpp>
#include <metagrad/tensor.hpp>

namespace mg::forward_ad {

/// Opens the dual level for its lifetime (RAII); when it closes, every tangent made in it is
/// cleared. One level at a time (a second, nested one is an mg::error), as in torch.
class dual_level {
 public:
  dual_level() {
    auto& d = detail::duals();
    std::lock_guard lock(d.m);
    if (d.open)
      detail::fail(
          "forward_ad::dual_level: a dual level is already open; nested forward-mode "
          "levels are not supported, close the outer one first");
    d.open = true;
    detail::dual_level_open().store(true);
  }
  dual_level(const dual_level&) = delete;
  dual_level& operator=(const dual_level&) = delete;
  ~dual_level() {
    auto& d = detail::duals();
    std::lock_guard lock(d.m);
    for (const auto& w : d.duals)
      if (const auto t = w.lock()) t->tangent.reset();
    d.duals.clear();
    d.open = false;
    detail::dual_level_open().store(false);
  }
};

namespace detail_fw {
// A view of t (same elements), recorded as an identity when t requires grad, without tangent:
// it (and any view of it) does not read its base's tangent either, as torch's primal is a view
// that is not forward differentiable. make_dual and unpack_dual are templates in name only
// (Note [Lazy members]).
template <int I>
tensor differentiable_alias(const tensor& t) {
  mg::detail::suspend_tangents off;
  const auto& ti = *t.impl();
  const tensor v = mg::detail::view_of(t, ti.shape, ti.strides);
  v.impl()->offset = ti.offset;
  v.impl()->own_tangent_only = true;
  return mg::detail::record(reshape_op{{.shape = ti.shape, .view = true}}, mg::detail::lazy<I>(v),
                            t);
}
}  // namespace detail_fw

/// A tensor with primal's elements (a view of it, differentiable with respect to it) and
/// `tangent` as its tangent, inside an open dual_level:
/// ```cpp
/// auto x = mg::forward_ad::make_dual(mg::tensor({1.0, 2.0}, mg::f64), mg::ones({2}));
/// ```
template <int I = 0>
tensor make_dual(const tensor& primal, const tensor& tangent) {
  if (!primal.defined() || !tangent.defined())
    detail::fail("forward_ad::make_dual: the primal or the tangent is an undefined tensor");
  if (!detail::dual_level_open().load())
    detail::fail(
        "forward_ad::make_dual: no dual level is open; create an "
        "mg::forward_ad::dual_level first (it clears the tangents when it ends)");
  if (!detail::is_floating(primal.dtype()))
    detail::fail("forward_ad::make_dual: the primal (shape ", detail::shape_string(primal.shape()),
                 ") is ", detail::dtype_name(primal.dtype()),
                 "; only floating-point tensors have tangents");
  tensor y = detail_fw::differentiable_alias<I>(primal);
  detail::set_tangent<I>(y.impl(), tangent, "forward_ad::make_dual", 0);
  return y;
}

/// What unpack_dual returns: the primal (a view without tangent) and the tangent (undefined if
/// the tensor has none). Usable with structured bindings: `auto [p, t] = unpack_dual(y);`.
struct unpacked_dual {
  tensor primal;
  tensor tangent;
};

/// The primal and tangent of a tensor, inside an open dual level (outside one, the tangent is
/// undefined).
template <int I = 0>
unpacked_dual unpack_dual(const tensor& t) {
  if (!t.defined()) detail::fail("forward_ad::unpack_dual: the tensor is undefined");
  return {detail_fw::differentiable_alias<I>(t), detail::tangent_of(*t.impl())};
}

#if !MG_HEADER_ONLY  // compiled in the library (Note [Compiled core] in core/config.hpp)
extern template tensor make_dual<0>(const tensor&, const tensor&);
extern template unpacked_dual unpack_dual<0>(const tensor&);
#endif

}  // namespace mg::forward_ad
