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
#include <metagrad/detail/dispatch.hpp>

namespace mg::detail {

// Note [Inline trigonometry]: the fused loop evaluates sin(x) in its forward part and cos(x) in
// its backward part (sin_op's derivative). xsimd's sin and cos stay out of line there (GCC's
// flatten cannot inline them: "function not inlinable"), so each paid a call, spills of every
// live register, and its own range reduction, where a hand-written loop inlines both and shares
// the reduction. So packs use the functions below: a Cody-Waite reduction by pi/2 and minimax
// polynomials on [-pi/4, pi/4] (the classic Cephes coefficients), all inline; sin and cos of one
// value then reduce once after common subexpression elimination. Arguments beyond `limit`
// (where the three-part reduction loses accuracy), infinities included, take xsimd's own
// functions: one branch per pack, not taken in practice. Accuracy is tested against std::sin
// and std::cos in tests/static/simd_trig_test.cpp.
template <class T>
struct trig_coefficients;
template <>
struct trig_coefficients<float> {
  static constexpr float limit = 8192.0f;
  static constexpr float two_over_pi = 0.636619772367581343f;
  // pi/2 = p1 + p2 + p3 + p4; p1 and p2 have few significant bits, so x - j*p1 - j*p2 is exact
  static constexpr float p1 = 1.5703125f, p2 = 4.837512969970703125e-4f,
                         p3 = 7.54978995489188216e-8f, p4 = -1.7151245100058819e-15f;
  static constexpr float sin_c[] = {-1.9515295891e-4f, 8.3321608736e-3f, -1.6666654611e-1f};
  static constexpr float cos_c[] = {2.443315711809948e-5f, -1.388731625493765e-3f,
                                    4.166664568298827e-2f};
};
template <>
struct trig_coefficients<double> {
  static constexpr double limit = 1.0e5;
  static constexpr double two_over_pi = 0.636619772367581343;
  static constexpr double p1 = 1.57079625129699707031, p2 = 7.54978941586159635336e-8,
                          p3 = 5.39030285815811905290e-15, p4 = 8.4784276603689e-32;
  static constexpr double sin_c[] = {1.58962301576546568060e-10, -2.50507477628578072866e-8,
                                     2.75573136213857245213e-6,  -1.98412698295895385996e-4,
                                     8.33333333332211858878e-3,  -1.66666666666666307295e-1};
  static constexpr double cos_c[] = {-1.13585365213876817300e-11, 2.08757008419747316778e-9,
                                     -2.75573141792967388112e-7,  2.48015872888517045348e-5,
                                     -1.38888888888730564116e-3,  4.16666666666665929218e-2};
};

template <class B, class T, std::size_t N>
MG_INLINE B horner(const B& z, const T (&c)[N]) {
  B r(c[0]);
  for (std::size_t k = 1; k < N; ++k) r = xsimd::fma(r, z, B(c[k]));
  return r;
}

// xsimd's own sin or cos, out of line and cold: the loops that inline inline_trig keep their
// registers and constants on the hot path.
template <bool Sine, class B>
[[gnu::noinline, gnu::cold]] B trig_fallback(B x) {
  return Sine ? xsimd::sin(x) : xsimd::cos(x);
}

// sin(x) (Sine) or cos(x), inline. See Note [Inline trigonometry].
template <bool Sine, class T, class A>
MG_INLINE xsimd::batch<T, A> inline_trig(const xsimd::batch<T, A>& x) {
  using B = xsimd::batch<T, A>;
  using K = trig_coefficients<T>;
  const B ax = xsimd::abs(x);
  const B j = xsimd::nearbyint(ax * B(K::two_over_pi));  // the quadrant, j >= 0
  B r = xsimd::fnma(j, B(K::p1), ax);
  r = xsimd::fnma(j, B(K::p2), r);
  r = xsimd::fnma(j, B(K::p3), r);
  r = xsimd::fnma(j, B(K::p4), r);
  const B z = r * r;
  const B s = xsimd::fma(r * z, horner(z, K::sin_c), r);
  const B c = xsimd::fma(z * z, horner(z, K::cos_c), xsimd::fnma(B(T(0.5)), z, B(T(1))));
  const B q = xsimd::fnma(B(T(4)), xsimd::floor(j * B(T(0.25))), j);  // j mod 4
  const auto odd = (q == B(T(1))) || (q == B(T(3)));
  B v;
  if constexpr (Sine) {
    // sin(|x|) by quadrant: s, c, -s, -c; then sin is odd
    v = xsimd::select(odd, c, s);
    v = xsimd::select(q >= B(T(2)), -v, v) ^ xsimd::bitofsign(x);
  } else {
    // cos(|x|) = cos(x) by quadrant: c, -s, -c, s
    v = xsimd::select(odd, s, c);
    v = xsimd::select((q == B(T(1))) || (q == B(T(2))), -v, v);
  }
  // The fallback patches the result instead of replacing the computation: no branch precedes
  // the reduction, so sin(x) and cos(x) of one x share it (NaN compares false: not patched).
  const auto big = ax > B(K::limit);
  if (xsimd::any(big)) [[unlikely]]
    v = xsimd::select(big, trig_fallback<Sine>(x), v);
  return v;
}

template <class T>
struct pack {
  using mg_family = element_family;
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
  MG_INLINE friend pack sin(const pack& a) { return inline_trig<true>(a.v); }
  MG_INLINE friend pack cos(const pack& a) { return inline_trig<false>(a.v); }
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
