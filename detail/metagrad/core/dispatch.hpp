// The one generic dispatch behind every op's public function: `mg::exp(x)`, `a + b`,
// `mg::atan2(t, 1.0)` all become detail::call(op, args...), which picks the evaluator from the
// arguments' family:
//   - numbers and SIMD packs (element values): op.forward(args...), inline;
//   - xtensor arrays: one SIMD loop for an elementwise op, the op's forward for others
//     (xt/region.hpp);
//   - static-engine expressions: a node<Op, Args...> (<metagrad/expr.hpp>);
//   - mg::tensor: a recorded runtime operation (<metagrad/tensor.hpp>).
// Numbers mix with any family (a constant; on tensors a 0-d tensor of the floating operands'
// dtype); two other families do not mix. A class joins a family by naming it: `using mg_family =
// ...;`. The families' implementations are found by argument-dependent lookup of apply_in(family,
// op, args...) where the call is instantiated, so this header knows no family and no op.
#pragma once

#include <cstdint>
#include <type_traits>

#include <metagrad/call_site.hpp>
#include <metagrad/core/config.hpp>

namespace mg::detail {

struct number_family {};
struct element_family {};  // SIMD packs
struct array_family {};    // xtensor arrays (the static engine's general path)
struct expr_family {};
struct tensor_family {};
struct dual_family {};  // xtensor arrays with tangents: Note [Dual arrays] (xt/dual_family.hpp)

template <class T>
struct family_of_impl {
  using type = void;
};
template <class T>
requires std::is_arithmetic_v<T>
struct family_of_impl<T> {
  using type = number_family;
};
template <class T>
requires requires { typename T::mg_family; }
struct family_of_impl<T> {
  using type = typename T::mg_family;
};
template <class T>
using family_of_t = typename family_of_impl<std::remove_cvref_t<T>>::type;

// Two families joined: a number joins anything, equal families stay, an array joins a static-engine
// expression as one of its constants (data a traced function captured: Note [Captured arrays] in
// xt/array_family.hpp) and an array with a tangent as a constant too (Note [Dual arrays]),
// anything else is void.
template <class A, class B>
using join2_t = std::conditional_t<
    std::is_same_v<A, number_family>, B,
    std::conditional_t<
        std::is_same_v<B, number_family> || std::is_same_v<A, B>, A,
        std::conditional_t<
            (std::is_same_v<A, array_family> && std::is_same_v<B, expr_family>) ||
                (std::is_same_v<A, expr_family> && std::is_same_v<B, array_family>),
            expr_family,
            std::conditional_t<
                (std::is_same_v<A, array_family> && std::is_same_v<B, dual_family>) ||
                    (std::is_same_v<A, dual_family> && std::is_same_v<B, array_family>),
                dual_family, void>>>>;

template <class... F>
struct join;
template <class F>
struct join<F> {
  using type = F;
};
template <class F, class G, class... R>
struct join<F, G, R...> {
  using type = typename join<join2_t<F, G>, R...>::type;
};
template <class... X>
using family_t = typename join<family_of_t<X>...>::type;

/// Arguments an op's public function accepts: each of a metagrad family, and the families agree.
template <class... X>
concept Operands = (!std::is_void_v<family_of_t<X>> && ...) && !std::is_void_v<family_t<X...>>;

/// Operands of the generic operators (+, -, *, /, comparisons): at least one is a static-engine
/// expression or an array with a tangent (Note [Dual arrays]). Operators on tensors are overloads
/// of their own, taking the tensor operand as detail::tracked so that they capture the caller's
/// site (Note [Call sites]); numbers and packs have their own operators.
template <class... X>
concept OperatorOperands = Operands<X...> &&
    (std::is_same_v<family_t<X...>, expr_family> || std::is_same_v<family_t<X...>, dual_family>);

/// The other operand of an operator on a tensor: a tensor or a number.
template <class X>
concept TensorOperatorOperand = std::is_arithmetic_v<X> || std::is_same_v<X, tensor>;

/// Values that are 0-d in every evaluation: numbers and static-engine expressions (whose
/// backward is traced symbolically, before any shape is known).
template <class X>
concept ZeroD =
    std::is_same_v<family_of_t<X>, number_family> || std::is_same_v<family_of_t<X>, expr_family>;

// For the backward of an op that declares `gradient_reads` (Note [What a node saves]): does x
// hold elements? The runtime engine passes a value that no wanted gradient reads as a tensor that
// only describes its shape; the gradients that read it are not wanted. The static engine on
// arrays passes an array of zeros of a shape_only_v type; others pass every value.
// A value that only describes a shape, in the static engine on arrays: Note [Wanted gradients]
// in sweep.hpp (specialised in xt/algebra.hpp).
template <class X>
inline constexpr bool shape_only_v = false;
template <class X>
bool holds_elements(const X& x) {
  if constexpr (shape_only_v<X>) {
    return false;
  } else if constexpr (std::is_same_v<family_of_t<X>, tensor_family>) {
    return x.impl()->store->nbytes != 0 || x.numel() == 0;
  } else {
    return true;
  }
}
// f(), a gradient that reads `read`: computed when read holds elements, else left undefined.
template <class X, class F>
auto gradient_reading(const X& read, const F& f) {
  if (holds_elements(read)) return f();
  return decltype(f()){};
}

// A number among a tensor op's operands, as the type the compiled library instantiates the
// tensor family for: bool, std::int64_t or double (Note [Compiled core] in config.hpp). Type
// promotion reads only the kind of number (bool, integer, floating), which this keeps.
template <class X>
constexpr decltype(auto) canonical(const X& x) {
  if constexpr (std::is_same_v<X, bool> || !std::is_arithmetic_v<X>) {
    return (x);
  } else if constexpr (std::is_integral_v<X>) {
    return static_cast<std::int64_t>(x);
  } else {
    return static_cast<double>(x);
  }
}

// Applies op to args in the evaluator of their family. See the comment at the top.
MG_EXEC_CHECK_DISABLE
template <class Op, class... X>
MG_HD MG_INLINE constexpr auto call(const Op& op, const X&... x) {
  using F = family_t<X...>;
  if constexpr (std::is_same_v<F, tensor_family>) {
    return apply_in(F{}, op, canonical(x)...);
  } else if constexpr (std::is_same_v<F, expr_family> || std::is_same_v<F, array_family> ||
                       std::is_same_v<F, dual_family>) {
    return apply_in(F{}, op, x...);
  } else {
    return op.forward(x...);
  }
}

// call(op, x...) from an operator whose call in the traced function's code is Origin: a number
// among static-engine expressions becomes a constant of that origin (Note [Constant origins] in
// static/plan.hpp); everything else is call(op, x...).
MG_EXEC_CHECK_DISABLE
template <class Origin, class Op, class... X>
MG_HD MG_INLINE constexpr auto call_from(const Op& op, const X&... x) {
  if constexpr (std::is_same_v<family_t<X...>, expr_family> && (std::is_arithmetic_v<X> || ...)) {
    return apply_in_from<Origin>(expr_family{}, op, x...);
  } else {
    return call(op, x...);
  }
}

// What a composite public function opens for its body: Note [Call sites].
template <class... X>
using site_scope_for =
    std::conditional_t<std::is_same_v<family_t<X...>, tensor_family>, site_scope, no_site_scope>;

// The tensor path of call_at (a function of its own: a constexpr function may not hold a
// site_scope, which is not a literal type).
template <class Op, class... X>
auto call_in_scope(const call_site& site, const Op& op, const X&... x) {
  const site_scope here(site);
  return call(op, x...);
}

// call(op, x...) from a public function called at `site`: on tensors the node it records
// names that call (Note [Call sites]); elsewhere the site is unused.
MG_EXEC_CHECK_DISABLE
template <class Op, class... X>
MG_HD MG_INLINE constexpr auto call_at(const call_site& site, const Op& op, const X&... x) {
  if constexpr (std::is_same_v<family_t<X...>, tensor_family>) {
    return call_in_scope(site, op, x...);
  } else {
    return call(op, x...);
  }
}

}  // namespace mg::detail
