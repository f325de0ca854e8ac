// Element functions the op bodies need beyond <cmath>, written once for every element type:
// numbers here; SIMD packs through their hidden friends (simd.hpp); static-engine expressions
// and mg::tensor through the ops' public functions, found by argument-dependent lookup.
#pragma once

#include <cmath>
#include <type_traits>

#include <metagrad/detail/config.hpp>

namespace mg::detail {

// x^p for a constant exponent: an integral p with |p| <= 64 multiplies (exponentiation by
// squaring) and never calls std::pow, which is both faster and exact for negative bases.
template <class X>
requires std::is_arithmetic_v<X>
MG_HD constexpr auto power(X x, double p) {
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
requires(!std::is_arithmetic_v<X>)
MG_HD constexpr auto power(const X& x, double p) {
  return pow(x, p);
}

}  // namespace mg::detail
