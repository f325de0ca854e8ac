// Comparisons (gt, lt, ge, le, eq, ne and their operators), which give bool tensors and have no
// gradient, and where(cond, a, b), which selects by a bool condition. The operators have a
// generic template for static-engine expressions and two overloads for tensors, as those of
// <metagrad/ops/arithmetic.hpp>.
#pragma once

#include <type_traits>

#include <metagrad/concepts.hpp>
#include <metagrad/core/broadcast.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/element_math.hpp>
#include <metagrad/core/storage.hpp>
#include <metagrad/error.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/types.hpp>

namespace mg {

struct gt_op {
  static constexpr const char* name = "gt";
  static constexpr bool differentiable = false;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a > b; }
};
template <class A, class B>
requires detail::Operands<A, B> MG_HD constexpr auto gt(const A& a, const B& b,
                                                        call_site site = {}) {
  return detail::call_at(site, gt_op{}, a, b);
}
template <class L, class R>
requires detail::OperatorOperands<L, R> MG_HD constexpr auto operator>(const L& a, const R& b) {
  return detail::call(gt_op{}, a, b);
}
template <class R>
requires detail::TensorOperatorOperand<R>
auto operator>(detail::tracked a, const R& b) {
  return detail::call_at(a.site, gt_op{}, a.value, b);
}
template <class L>
requires std::is_arithmetic_v<L>
auto operator>(const L& a, detail::tracked b) {
  return detail::call_at(b.site, gt_op{}, a, b.value);
}

struct lt_op {
  static constexpr const char* name = "lt";
  static constexpr bool differentiable = false;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a < b; }
};
template <class A, class B>
requires detail::Operands<A, B> MG_HD constexpr auto lt(const A& a, const B& b,
                                                        call_site site = {}) {
  return detail::call_at(site, lt_op{}, a, b);
}
template <class L, class R>
requires detail::OperatorOperands<L, R> MG_HD constexpr auto operator<(const L& a, const R& b) {
  return detail::call(lt_op{}, a, b);
}
template <class R>
requires detail::TensorOperatorOperand<R>
auto operator<(detail::tracked a, const R& b) {
  return detail::call_at(a.site, lt_op{}, a.value, b);
}
template <class L>
requires std::is_arithmetic_v<L>
auto operator<(const L& a, detail::tracked b) {
  return detail::call_at(b.site, lt_op{}, a, b.value);
}

struct ge_op {
  static constexpr const char* name = "ge";
  static constexpr bool differentiable = false;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a >= b; }
};
template <class A, class B>
requires detail::Operands<A, B> MG_HD constexpr auto ge(const A& a, const B& b,
                                                        call_site site = {}) {
  return detail::call_at(site, ge_op{}, a, b);
}
template <class L, class R>
requires detail::OperatorOperands<L, R> MG_HD constexpr auto operator>=(const L& a, const R& b) {
  return detail::call(ge_op{}, a, b);
}
template <class R>
requires detail::TensorOperatorOperand<R>
auto operator>=(detail::tracked a, const R& b) {
  return detail::call_at(a.site, ge_op{}, a.value, b);
}
template <class L>
requires std::is_arithmetic_v<L>
auto operator>=(const L& a, detail::tracked b) {
  return detail::call_at(b.site, ge_op{}, a, b.value);
}

struct le_op {
  static constexpr const char* name = "le";
  static constexpr bool differentiable = false;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a <= b; }
};
template <class A, class B>
requires detail::Operands<A, B> MG_HD constexpr auto le(const A& a, const B& b,
                                                        call_site site = {}) {
  return detail::call_at(site, le_op{}, a, b);
}
template <class L, class R>
requires detail::OperatorOperands<L, R> MG_HD constexpr auto operator<=(const L& a, const R& b) {
  return detail::call(le_op{}, a, b);
}
template <class R>
requires detail::TensorOperatorOperand<R>
auto operator<=(detail::tracked a, const R& b) {
  return detail::call_at(a.site, le_op{}, a.value, b);
}
template <class L>
requires std::is_arithmetic_v<L>
auto operator<=(const L& a, detail::tracked b) {
  return detail::call_at(b.site, le_op{}, a, b.value);
}

struct eq_op {
  static constexpr const char* name = "eq";
  static constexpr bool differentiable = false;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a == b; }
};
template <class A, class B>
requires detail::Operands<A, B> MG_HD constexpr auto eq(const A& a, const B& b,
                                                        call_site site = {}) {
  return detail::call_at(site, eq_op{}, a, b);
}
template <class L, class R>
requires detail::OperatorOperands<L, R> MG_HD constexpr auto operator==(const L& a, const R& b) {
  return detail::call(eq_op{}, a, b);
}
template <class R>
requires detail::TensorOperatorOperand<R>
auto operator==(detail::tracked a, const R& b) {
  return detail::call_at(a.site, eq_op{}, a.value, b);
}
template <class L>
requires std::is_arithmetic_v<L>
auto operator==(const L& a, detail::tracked b) {
  return detail::call_at(b.site, eq_op{}, a, b.value);
}

struct ne_op {
  static constexpr const char* name = "ne";
  static constexpr bool differentiable = false;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a != b; }
};
template <class A, class B>
requires detail::Operands<A, B> MG_HD constexpr auto ne(const A& a, const B& b,
                                                        call_site site = {}) {
  return detail::call_at(site, ne_op{}, a, b);
}
template <class L, class R>
requires detail::OperatorOperands<L, R> MG_HD constexpr auto operator!=(const L& a, const R& b) {
  return detail::call(ne_op{}, a, b);
}
template <class R>
requires detail::TensorOperatorOperand<R>
auto operator!=(detail::tracked a, const R& b) {
  return detail::call_at(a.site, ne_op{}, a.value, b);
}
template <class L>
requires std::is_arithmetic_v<L>
auto operator!=(const L& a, detail::tracked b) {
  return detail::call_at(b.site, ne_op{}, a, b.value);
}

/// cond ? a : b elementwise (numpy broadcasting of all three); cond is a bool tensor (on
/// tensors), a comparison (static engine) or a number. The condition gets no gradient.
struct where_op {
  static constexpr const char* name = "where";
  static constexpr bool keeps_integers = true;
  static constexpr auto saves = saved::inputs;
  MG_HD static constexpr auto forward(const auto& c, const auto& a, const auto& b) {
    using detail::select;
    return select(c, a, b);
  }
  // d/da where(c, a, b) = c, d/db where(c, a, b) = !c
  MG_HD static constexpr auto backward(const auto& c, const auto&, const auto&, const auto&,
                                       const auto& g) {
    using detail::select;
    return grads{no_grad{}, select(c, g, 0), select(c, 0, g)};
  }
};

template <class C, class A, class B>
requires detail::Operands<C, A, B> &&
    (!std::is_same_v<detail::family_t<C, A, B>, detail::tensor_family>)MG_HD
    constexpr auto where(const C& c, const A& a, const B& b, call_site site = {}) {
  return detail::call_at(site, where_op{}, c, a, b);
}
// On tensors the condition is checked: it must be bool (a comparison's result).
template <class C, class A, class B>
requires detail::Operands<C, A, B> &&
    std::is_same_v<detail::family_t<C, A, B>, detail::tensor_family>
auto where(const C& c, const A& a, const B& b, call_site site = {}) {
  if constexpr (requires { c.dtype(); }) {
    if (c.defined() && c.dtype() != dtype::b8)
      detail::fail("where: the condition has dtype ", detail::dtype_name(c.dtype()), " (shape ",
                   detail::shape_string(c.shape()),
                   "); it must be a bool tensor: compare, e.g. mg::where(x > 0, a, b), or convert "
                   "with .to(mg::b8)");
  }
  return detail::call_at(site, where_op{}, c, a, b);
}

using comparison_ops = op_list<gt_op, lt_op, ge_op, le_op, eq_op, ne_op, where_op>;

}  // namespace mg
