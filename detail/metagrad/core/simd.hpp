// The one header that touches xsimd. pack<T> wraps xsimd::batch<T> so that the op structs'
// bodies run on it unchanged: it mixes with any arithmetic scalar on either side (xsimd's own
// operators need the scalar's type to match exactly, so `1 - y * y` would not compile), and
// pow with an integral exponent multiplies instead of going through exp(p * log x), which is
// both faster and correct for negative bases. Comparisons give a pack_mask, the condition of
// select (the lane-wise ?:).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#include <metagrad/core/config.hpp>
#include <metagrad/core/dispatch.hpp>

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
//
// The reduction r = |x| - j (p1 + p2 + ...) needs each product j p_k exactly. With a fused
// multiply-add (x86-64-v3, AVX-512, AArch64) fnma rounds once, after the exact product; without
// one (SSE2, the compilers' default on x86-64) j p_k is rounded first, which near the zeros of
// sin and cos left errors of up to 90,000 ulp in double and 245 ulp in float. So those builds
// split pi/2 into parts with few significant bits (33 for double, 11 for float: j < 2^20 and
// 2^13 below the limits), whose products with j are exact, and a last part at full precision.
// Packs a sum accumulates per lane before adding the block's total into a double (Note [Blocked
// sums] in xt/element_loop.hpp; the xtensor algebra's row sums block the same way).
inline constexpr std::size_t loop_block = 64;

#if defined(__FMA__) || defined(__AVX512F__) || defined(__aarch64__)
inline constexpr bool fused_multiply_add = true;
#else
inline constexpr bool fused_multiply_add = false;
#endif

template <class T>
struct trig_coefficients;
template <>
struct trig_coefficients<float> {
  static constexpr float limit = 8192.0f;
  static constexpr float two_over_pi = 0.636619772367581343f;
  // pi/2 = p1 + p2 + p3 + p4; p1 and p2 have few significant bits, so x - j*p1 - j*p2 is exact
  static constexpr float p1 = 1.5703125f, p2 = 4.837512969970703125e-4f,
                         p3 = 7.54978995489188216e-8f, p4 = -1.7151245100058819e-15f;
  // pi/2 in parts of at most 11 significant bits (all but the last), for builds without FMA
  static constexpr float exact_parts[] = {1.5703125f,
                                          4.8375129699707031e-4f,
                                          7.5495336204767227e-8f,
                                          2.5632829192545614e-12f,
                                          6.1257422745431001e-17f,
                                          -2.5080116172607799e-20f,
                                          -2.6718908186452923e-24f};
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
  // pi/2 in parts of at most 33 significant bits (all but the last), for builds without FMA
  static constexpr double exact_parts[] = {1.57079632673412561417, 6.0771005063039659766e-11,
                                           2.0222662487111664558e-21, 8.47842766034822932286e-32,
                                           2.06703210982639879819e-43};
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
  B r = ax;
  if constexpr (fused_multiply_add) {
    r = xsimd::fnma(j, B(K::p1), r);
    r = xsimd::fnma(j, B(K::p2), r);
    r = xsimd::fnma(j, B(K::p3), r);
    r = xsimd::fnma(j, B(K::p4), r);
  } else {
    for (const T p : K::exact_parts) r = r - j * B(p);
  }
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

// atan2(y, x) lane by lane as std::atan2. xsimd documents atan2(x, y) as "the arc tangent of
// x/y": its first argument is the numerator, std's y, so the order is std's. But it divides
// first, and the quotient is NaN where |y| and |x| are both 0 or both infinite, which std
// defines (+-0 or +-pi, +-pi/4 or +-3pi/4 by the signs): those lanes are patched without a
// branch, since zeros are common in practice (the mask costs a few compares).
template <class T, class A>
MG_INLINE xsimd::batch<T, A> atan2_std(const xsimd::batch<T, A>& y, const xsimd::batch<T, A>& x) {
  using B = xsimd::batch<T, A>;
  const B r = xsimd::atan2(y, x);
  const B ay = xsimd::abs(y), ax = xsimd::abs(x);
  const auto zero = ay == B(T(0));
  const auto special = (ay == ax) && (zero || (ay == B(std::numeric_limits<T>::infinity())));
  // |y| = |x| = 0 gives 0 and |y| = |x| = inf gives pi/4 for x >= 0 (sign bit clear), and pi
  // minus that for x <= 0 (sign bit set: -0 counts as negative); then y's sign
  const B base = xsimd::select(zero, B(T(0)), B(T(0.785398163397448309616)));
  const auto x_negative = xsimd::copysign(B(T(1)), x) < B(T(0));  // -0 too, unlike x < 0
  const B s = xsimd::select(x_negative, B(T(3.14159265358979323846)) - base, base);
  return xsimd::select(special, xsimd::copysign(s, y), r);
}

// Note [Double erf]: xsimd 8.1's erf of doubles is off by up to 20 ulp on |x| < 0.65 and 68 ulp
// near |x| = 2.2 (its rational approximations are not accurate to double precision), where its
// float erf is within 2 ulp. So packs of doubles use Cephes' erf (ndtr.c): x T(x^2) / U(x^2)
// for |x| < 1, else 1 - erfc(|x|) with erfc(a) = exp(-a^2) P(a) / Q(a). erfc(a) < 2^-54 beyond
// |x| = 6, so erf rounds to +-1 there and a is clamped to 6 (infinities included) instead of
// taking Cephes' third range. Each range is computed only when a lane needs it. Measured within
// 2.5 ulp of the exact erf on [-7, 7] (2.6 without FMA).
struct erf_coefficients {
  static constexpr double t[] = {9.60497373987051638749E0, 9.00260197203842689217E1,
                                 2.23200534594684319226E3, 7.00332514112805075473E3,
                                 5.55923013010394962768E4};
  static constexpr double u[] = {1.00000000000000000000E0, 3.35617141647503099647E1,
                                 5.21357949780152679795E2, 4.59432382970980127987E3,
                                 2.26290000613890934246E4, 4.92673942608635921086E4};
  static constexpr double p[] = {
      2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
      4.86371970985681366614E1,   1.96520832956077098242E2,  5.26445194995477358631E2,
      9.34528527171957607540E2,   1.02755188689515710272E3,  5.57535335369399327526E2};
  static constexpr double q[] = {
      1.00000000000000000000E0, 1.32281951154744992508E1, 8.67072140885989742329E1,
      3.54937778887819891062E2, 9.75708501743205489753E2, 1.82390916687909736289E3,
      2.24633760818710981792E3, 1.65666309194161350182E3, 5.57535340817727675546E2};
};

// erf(x) for doubles. See Note [Double erf].
template <class A>
MG_INLINE xsimd::batch<double, A> erf_double(const xsimd::batch<double, A>& x) {
  using B = xsimd::batch<double, A>;
  using K = erf_coefficients;
  const B a = xsimd::abs(x);
  const auto small = a < B(1.0);
  B r(0.0);
  if (xsimd::any(small)) {
    const B z = x * x;
    r = x * horner(z, K::t) / horner(z, K::u);
  }
  if (!xsimd::all(small)) {
    const B c = xsimd::select(a > B(6.0), B(6.0), a);  // NaN stays NaN
    const B e = B(1.0) - xsimd::exp(-(c * c)) * horner(c, K::p) / horner(c, K::q);
    r = xsimd::select(small, r, xsimd::copysign(e, x));
  }
  return r;
}

template <class T>
struct pack_mask;

template <class T>
struct pack {
  using mg_family = element_family;
  using batch = xsimd::batch<T>;
  static constexpr std::size_t size = batch::size;
  batch v;

  pack() = default;
  MG_INLINE pack(batch b) : v(b) {}
  // a comparison's lanes as values: 1 where true, 0 where false
  MG_INLINE pack(const pack_mask<T>& m);
  template <class S>
  requires std::is_arithmetic_v<S> MG_INLINE pack(S s) : v(static_cast<T>(s)) {}

  MG_INLINE static pack load(const T* p) { return batch::load_unaligned(p); }
  MG_INLINE void store(T* p) const { v.store_unaligned(p); }
  MG_INLINE T reduce_add() const { return xsimd::hadd(v); }
  MG_INLINE T reduce_mul() const {
    alignas(batch::arch_type::alignment()) T lanes[size];
    v.store_aligned(lanes);
    T p = lanes[0];
    for (std::size_t k = 1; k < size; ++k) p *= lanes[k];
    return p;
  }

  // pack (op) pack, and pack (op) number on either side
  MG_INLINE friend pack operator+(const pack& a, const pack& b) { return a.v + b.v; }
  MG_INLINE friend pack operator-(const pack& a, const pack& b) { return a.v - b.v; }
  MG_INLINE friend pack operator*(const pack& a, const pack& b) { return a.v * b.v; }
  MG_INLINE friend pack operator/(const pack& a, const pack& b) { return a.v / b.v; }
  MG_INLINE friend pack operator-(const pack& a) { return -a.v; }
  // comparisons give a lane mask (pack_mask, below), the condition of select. != negates ==:
  // xsimd's AVX != is the ordered compare, false where a lane is NaN, where std's is true.
  MG_INLINE friend pack_mask<T> operator<(const pack& a, const pack& b) { return a.v < b.v; }
  MG_INLINE friend pack_mask<T> operator>(const pack& a, const pack& b) { return a.v > b.v; }
  MG_INLINE friend pack_mask<T> operator<=(const pack& a, const pack& b) { return a.v <= b.v; }
  MG_INLINE friend pack_mask<T> operator>=(const pack& a, const pack& b) { return a.v >= b.v; }
  MG_INLINE friend pack_mask<T> operator==(const pack& a, const pack& b) { return a.v == b.v; }
  MG_INLINE friend pack_mask<T> operator!=(const pack& a, const pack& b) { return !(a.v == b.v); }
  MG_INLINE pack& operator+=(const pack& b) {
    v += b.v;
    return *this;
  }

  MG_INLINE friend pack exp(const pack& a) { return xsimd::exp(a.v); }
  MG_INLINE friend pack log(const pack& a) { return xsimd::log(a.v); }
  MG_INLINE friend pack sin(const pack& a) { return inline_trig<true>(a.v); }
  MG_INLINE friend pack cos(const pack& a) { return inline_trig<false>(a.v); }
  MG_INLINE friend pack tanh(const pack& a) { return xsimd::tanh(a.v); }
  MG_INLINE friend pack tan(const pack& a) { return xsimd::tan(a.v); }
  MG_INLINE friend pack sqrt(const pack& a) { return xsimd::sqrt(a.v); }
  MG_INLINE friend pack abs(const pack& a) { return xsimd::abs(a.v); }
  MG_INLINE friend pack fabs(const pack& a) { return xsimd::abs(a.v); }
  MG_INLINE friend pack log1p(const pack& a) { return xsimd::log1p(a.v); }
  MG_INLINE friend pack expm1(const pack& a) { return xsimd::expm1(a.v); }
  MG_INLINE friend pack erf(const pack& a) {
    if constexpr (std::is_same_v<T, double>)
      return erf_double(a.v);  // Note [Double erf]
    else
      return xsimd::erf(a.v);
  }
  MG_INLINE friend pack atan2(const pack& y, const pack& x) { return atan2_std(y.v, x.v); }
  // std::max and std::min lane by lane, NaN included ((a < b) ? b : a): an op body calls them
  // unqualified after `using std::max;`, as it calls exp
  MG_INLINE friend pack max(const pack& a, const pack& b) {
    return xsimd::select(a.v < b.v, b.v, a.v);
  }
  MG_INLINE friend pack min(const pack& a, const pack& b) {
    return xsimd::select(b.v < a.v, b.v, a.v);
  }
  // xsimd's pow is exp(b log a): patched where a or b is 0, as std::pow defines them
  MG_INLINE friend pack pow(const pack& a, const pack& b) {
    const batch zero(T(0));
    batch r = xsimd::pow(a.v, b.v);
    r = xsimd::select(a.v == zero, xsimd::select(b.v > zero, zero, batch(T(INFINITY))), r);
    return xsimd::select(b.v == zero, batch(T(1)), r);
  }
  template <class S>
  requires std::is_arithmetic_v<S> MG_INLINE friend pack pow(const pack& a, S p) {
    const double d = static_cast<double>(p);
    // the common exponents inline, compared, not rounded (this runs once per pack); the rest out
    // of line, so that a loop's body stays small enough to inline pow's caller
    if (d == 2.0) return a.v * a.v;
    if (d == 1.0) return a;
    return pow_other(a, d);
  }
  [[gnu::noinline]] static pack pow_other(const pack& a, double d) {
    if (d == std::trunc(d) && std::fabs(d) <= 64) {  // as detail::power on numbers, lane by lane
      long long n = static_cast<long long>(std::fabs(d));
      batch result(T(1)), base = a.v;
      while (n) {
        if (n & 1) result *= base;
        base *= base;
        n >>= 1;
      }
      return d < 0 ? batch(T(1)) / result : result;
    }
    const batch r = xsimd::pow(a.v, batch(static_cast<T>(d)));
    // xsimd's pow gives 0 at a = +-0 for every p; std::pow gives +inf for p < 0
    if (d < 0) return xsimd::select(a.v == batch(T(0)), batch(T(INFINITY)), r);
    return r;
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

template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator<(const pack<T>& a, S s) { return a < pack<T>(s); }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator<(S s, const pack<T>& a) { return pack<T>(s) < a; }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator>(const pack<T>& a, S s) { return a > pack<T>(s); }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator>(S s, const pack<T>& a) { return pack<T>(s) > a; }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator<=(const pack<T>& a, S s) { return a <= pack<T>(s); }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator<=(S s, const pack<T>& a) { return pack<T>(s) <= a; }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator>=(const pack<T>& a, S s) { return a >= pack<T>(s); }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator>=(S s, const pack<T>& a) { return pack<T>(s) >= a; }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator==(const pack<T>& a, S s) { return a == pack<T>(s); }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator==(S s, const pack<T>& a) { return pack<T>(s) == a; }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator!=(const pack<T>& a, S s) { return a != pack<T>(s); }
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack_mask<T>
operator!=(S s, const pack<T>& a) { return pack<T>(s) != a; }

template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T> atan2(const pack<T>& y, S x) {
  return atan2(y, pack<T>(x));
}
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T> atan2(S y, const pack<T>& x) {
  return atan2(pack<T>(y), x);
}
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T> max(const pack<T>& a, S b) {
  return max(a, pack<T>(b));
}
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T> max(S a, const pack<T>& b) {
  return max(pack<T>(a), b);
}
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T> min(const pack<T>& a, S b) {
  return min(a, pack<T>(b));
}
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T> min(S a, const pack<T>& b) {
  return min(pack<T>(a), b);
}
// a number to a pack power: no integral shortcut, the exponent varies by lane
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T> pow(S a, const pack<T>& p) {
  return pow(pack<T>(a), p);
}

// The lanes of a comparison of packs. It joins the element family so that an op applied to it
// (where's condition) evaluates inline like a pack. select(m, a, b) is the lane-wise m ? a : b
// for packs and numbers alike (the number version is in element_math.hpp): op bodies write
// `using detail::select; select(x > 0, x, 0)` and find this one by ADL.
template <class T>
struct pack_mask {
  using mg_family = element_family;
  using batch_bool = xsimd::batch_bool<T>;
  static constexpr std::size_t size = batch_bool::size;
  batch_bool v;

  pack_mask() = default;
  MG_INLINE pack_mask(batch_bool b) : v(b) {}

  // 1 where true, 0 where false: how a bool result is stored through a pack of T
  MG_INLINE pack<T> as_values() const {
    using B = typename pack<T>::batch;
    return xsimd::select(v, B(T(1)), B(T(0)));
  }

  MG_INLINE friend pack<T> select(const pack_mask& c, const pack<T>& a, const pack<T>& b) {
    return xsimd::select(c.v, a.v, b.v);
  }
};

template <class T>
MG_INLINE pack<T>::pack(const pack_mask<T>& m) : v(m.as_values().v) {}

// select with numbers for either or both branches, converted to packs
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T> select(const pack_mask<T>& c, const pack<T>& a,
                                                          S b) {
  return select(c, a, pack<T>(b));
}
template <class T, class S>
requires std::is_arithmetic_v<S> MG_INLINE pack<T> select(const pack_mask<T>& c, S a,
                                                          const pack<T>& b) {
  return select(c, pack<T>(a), b);
}
template <class T, class S1, class S2>
requires std::is_arithmetic_v<S1> && std::is_arithmetic_v<S2> MG_INLINE pack<T> select(
    const pack_mask<T>& c, S1 a, S2 b) {
  return select(c, pack<T>(a), pack<T>(b));
}

// A number as the condition (a constant compared, in a sweep over packs): the same for every lane.
template <class C, class T>
requires std::is_arithmetic_v<C> MG_INLINE pack<T> select(C c, const pack<T>& a, const pack<T>& b) {
  return c ? a : b;
}
template <class C, class T, class S>
requires std::is_arithmetic_v<C> && std::is_arithmetic_v<S> MG_INLINE pack<T> select(
    C c, const pack<T>& a, S b) {
  return c ? a : pack<T>(b);
}
template <class C, class T, class S>
requires std::is_arithmetic_v<C> && std::is_arithmetic_v<S> MG_INLINE pack<T> select(
    C c, S a, const pack<T>& b) {
  return c ? pack<T>(a) : b;
}

// A pack used as a condition (where's condition on the runtime engine, converted to the value
// type): true where it is not 0.
template <class T, class A, class B>
requires(std::is_same_v<A, pack<T>> || std::is_arithmetic_v<A>) &&
    (std::is_same_v<B, pack<T>> ||
     std::is_arithmetic_v<B>)MG_INLINE pack<T> select(const pack<T>& c, const A& a, const B& b) {
  return select(c != T(0), pack<T>(a), pack<T>(b));
}

}  // namespace mg::detail
