// Element functions the op bodies need beyond <cmath>, written once for every element type:
// numbers here; SIMD packs through their hidden friends (simd.hpp); static-engine expressions
// and mg::tensor through the ops' public functions, found by argument-dependent lookup.
#pragma once

#include <cmath>
#include <type_traits>

#include <metagrad/core/config.hpp>
#include <metagrad/core/dispatch.hpp>

namespace mg {
struct where_op;
}

namespace mg::detail {

// x^p for a constant exponent: an integral p with |p| <= 64 multiplies (exponentiation by
// squaring) and never calls std::pow, which is both faster and exact for negative bases.
template <class X>
requires std::is_arithmetic_v<X> MG_HD constexpr auto power(X x, double p) {
  using T = std::conditional_t<std::is_floating_point_v<X>, X, double>;
  if (p == static_cast<double>(static_cast<long long>(p)) && p >= -64 && p <= 64) {
    long long n = static_cast<long long>(p);
    const bool inverse = n < 0;
    if (inverse) n = -n;
    T result = T(1), base = static_cast<T>(x);
    while (n) {
      if (n & 1) result *= base;
      base *= base;
      n >>= 1;
    }
    return inverse ? T(1) / result : result;
  }
  using std::pow;
  return static_cast<T>(pow(static_cast<T>(x), static_cast<T>(p)));
}

// Any other element type (a pack) or an expression/tensor: its own pow, found by ADL.
template <class X>
requires(!std::is_arithmetic_v<X>) MG_HD MG_INLINE constexpr auto power(const X& x, double p) {
  return pow(x, p);
}

// The number s in the element type of x (an op's attribute such as clamp's bound, so that float
// elements stay float); other element types take numbers as they are.
template <class X, class S>
MG_HD constexpr auto like(const X&, S s) {
  if constexpr (std::is_arithmetic_v<X>) {
    return static_cast<X>(s);
  } else {
    return s;
  }
}

// c ? a : b in the common type of a and b. Op bodies write `using detail::select;` and call
// select(x > 0, x, 0): numbers take this one; packs take their own (simd.hpp), found by ADL on
// the mask that their comparisons return.
template <class C, class A, class B>
requires std::is_arithmetic_v<C> && std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
    MG_HD constexpr auto select(C c, A a, B b) {
  using T = std::common_type_t<A, B>;
  return c ? static_cast<T>(a) : static_cast<T>(b);
}

// On static-engine expressions and tensors, select is the where op (its function checks that a
// tensor condition is bool; the ops' backward bodies pass conditions the engine made itself).
template <class C, class A, class B, class W = where_op>
requires std::is_same_v<family_t<C, A, B>, expr_family> ||
    std::is_same_v<family_t<C, A, B>, tensor_family> ||
    std::is_same_v<family_t<C, A, B>, array_family> ||
    std::is_same_v<family_t<C, A, B>, dual_family>
auto select(const C& c, const A& a, const B& b) { return call(W{}, c, a, b); }

}  // namespace mg::detail
