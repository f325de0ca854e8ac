// The static engine on xtensor arrays (xt::xtensor, xt::xtensor_fixed, xt::xarray and
// expressions), mixed freely with float/double arguments: mg::grad(f)(x, w) with arrays runs the
// array family's evaluator (xt/array_family.hpp says how it picks a fused SIMD loop or the
// general path). This header adds the operators that mix an array with a static-engine
// expression or a dual array.

#pragma once

#include <xtensor/xarray.hpp>

#include <metagrad/concepts.hpp>
#include <metagrad/error.hpp>
#include <metagrad/static.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/array_family.hpp>
#include <metagrad/xt/region.hpp>

namespace mg {

// Note [Captured arrays] (xt/array_family.hpp): an xtensor array with a static-engine expression
// (or a dual array: Note [Dual arrays]), in either order. xtensor's operators take forwarding
// references, which bind a non-const array better than a const reference; these take them too and
// are more constrained, so they win.

template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator+(L&& a, R&& b) { return detail::call(add_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator-(L&& a, R&& b) { return detail::call(sub_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator*(L&& a, R&& b) { return detail::call(mul_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator/(L&& a, R&& b) { return detail::call(div_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator>(L&& a, R&& b) { return detail::call(gt_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator<(L&& a, R&& b) { return detail::call(lt_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator>=(L&& a, R&& b) { return detail::call(ge_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator<=(L&& a, R&& b) { return detail::call(le_op{}, a, b); }

}  // namespace mg
