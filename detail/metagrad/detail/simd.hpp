// The one header that touches xsimd. pack<T> wraps xsimd::batch<T> so that the op structs'
// bodies run on it unchanged: it mixes with any arithmetic scalar on either side (xsimd's own
// operators need the scalar's type to match exactly, so `1 - y * y` would not compile), and
// pow with an integral exponent multiplies instead of going through exp(p * log x), which is
// both faster and correct for negative bases.
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include <metagrad/detail/config.hpp>

namespace mg::detail {

template <class T>
struct pack {
  using batch = xsimd::batch<T>;
  static constexpr std::size_t size = batch::size;
  batch v;

  pack() = default;
  MG_INLINE pack(batch b) : v(b) {}
  template <class S>
  requires std::is_arithmetic_v<S> MG_INLINE pack(S s) : v(static_cast<T>(s)) {}

  MG_INLINE static pack load(const T* p) { return batch::load_unaligned(p); }
  MG_INLINE void store(T* p) const { v.store_unaligned(p); }
  MG_INLINE T reduce_add() const { return xsimd::hadd(v); }

  // pack (op) pack, and pack (op) number on either side
  MG_INLINE friend pack operator+(const pack& a, const pack& b) { return a.v + b.v; }
  MG_INLINE friend pack operator-(const pack& a, const pack& b) { return a.v - b.v; }
  MG_INLINE friend pack operator*(const pack& a, const pack& b) { return a.v * b.v; }
  MG_INLINE friend pack operator/(const pack& a, const pack& b) { return a.v / b.v; }
  MG_INLINE friend pack operator-(const pack& a) { return -a.v; }
  MG_INLINE pack& operator+=(const pack& b) {
    v += b.v;
    return *this;
  }

  MG_INLINE friend pack exp(const pack& a) { return xsimd::exp(a.v); }
  MG_INLINE friend pack log(const pack& a) { return xsimd::log(a.v); }
  MG_INLINE friend pack sin(const pack& a) { return xsimd::sin(a.v); }
  MG_INLINE friend pack cos(const pack& a) { return xsimd::cos(a.v); }
  MG_INLINE friend pack tanh(const pack& a) { return xsimd::tanh(a.v); }
  MG_INLINE friend pack pow(const pack& a, const pack& b) { return xsimd::pow(a.v, b.v); }
  template <class S>
  requires std::is_arithmetic_v<S> MG_INLINE friend pack pow(const pack& a, S p) {
    const double d = static_cast<double>(p);
    if (d == std::trunc(d) && std::fabs(d) <= 64) return xsimd::pow(a.v, static_cast<int>(d));
    return xsimd::pow(a.v, batch(static_cast<T>(d)));
  }
};

template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T>
operator+(const pack<T>& a, S s) { return a + pack<T>(s); }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T>
operator+(S s, const pack<T>& a) { return pack<T>(s) + a; }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T>
operator-(const pack<T>& a, S s) { return a - pack<T>(s); }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T>
operator-(S s, const pack<T>& a) { return pack<T>(s) - a; }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T>
operator*(const pack<T>& a, S s) { return a * pack<T>(s); }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T>
operator*(S s, const pack<T>& a) { return pack<T>(s) * a; }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T>
operator/(const pack<T>& a, S s) { return a / pack<T>(s); }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T>
operator/(S s, const pack<T>& a) { return pack<T>(s) / a; }

}  // namespace mg::detail
