// The inline sine and cosine of SIMD packs (Note [Inline trigonometry] in core/simd.hpp)
// against std::sin and std::cos evaluated in long double, lane by lane: a dense grid, random
// arguments up to the reduction limit, the neighbourhoods of multiples of pi/2 (where the
// reduction cancels), signed zeros, and the arguments that take xsimd's path (beyond the limit,
// infinities) or propagate (NaN).
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/core/simd.hpp>

namespace {

template <class T>
struct ulps_allowed;
template <>
struct ulps_allowed<float> {
  static constexpr double value = 2.0;
};
template <>
struct ulps_allowed<double> {
  static constexpr double value = 2.0;
};

// The error of `got` against the exact `ref` in units of the last place of T at |ref|: purely
// relative, also next to the zeros of sin and cos, where a reduction that is not exact to well
// beyond T's precision shows up first.
template <class T>
double ulp_error(T got, long double ref) {
  const long double scale = std::fmax(std::fabs(ref), std::numeric_limits<T>::min());
  const long double ulp = scale * std::numeric_limits<T>::epsilon();
  return static_cast<double>(std::fabs(static_cast<long double>(got) - ref) / ulp);
}

template <class T>
std::vector<T> arguments() {
  using K = mg::detail::trig_coefficients<T>;
  std::vector<T> xs;
  for (int i = -20000; i <= 20000; ++i) xs.push_back(static_cast<T>(i * 5e-4));  // [-10, 10]
  std::mt19937_64 gen(3);
  std::uniform_real_distribution<double> wide(-K::limit, K::limit);
  for (int i = 0; i < 20000; ++i) xs.push_back(static_cast<T>(wide(gen)));
  const long double half_pi = 1.57079632679489661923132169163975144L;
  for (int k = -2000; k <= 2000; k += 7) {
    const T m = static_cast<T>(k * half_pi);
    T x = m;
    for (int step = 0; step < 4; ++step) x = std::nextafter(x, T(1e9));
    for (int step = 0; step < 8; ++step, x = std::nextafter(x, T(-1e9))) xs.push_back(x);
  }
  for (T tiny : {T(1e-30), T(1e-8), std::numeric_limits<T>::denorm_min()}) {
    xs.push_back(tiny);
    xs.push_back(-tiny);
  }
  xs.push_back(static_cast<T>(K::limit));
  xs.push_back(-static_cast<T>(K::limit));
  while (xs.size() % mg::detail::pack<T>::size) xs.push_back(T(0.5));
  return xs;
}

template <class T>
void check_accuracy() {
  using P = mg::detail::pack<T>;
  const auto xs = arguments<T>();
  double worst_sin = 0, worst_cos = 0;
  for (std::size_t i = 0; i < xs.size(); i += P::size) {
    const P x = P::load(xs.data() + i);
    T s[P::size], c[P::size];
    sin(x).store(s);
    cos(x).store(c);
    for (std::size_t k = 0; k < P::size; ++k) {
      const long double xl = xs[i + k];
      const double es = ulp_error(s[k], std::sin(xl)), ec = ulp_error(c[k], std::cos(xl));
      worst_sin = std::fmax(worst_sin, es);
      worst_cos = std::fmax(worst_cos, ec);
      EXPECT_LE(es, ulps_allowed<T>::value) << "sin(" << xs[i + k] << ") = " << s[k];
      EXPECT_LE(ec, ulps_allowed<T>::value) << "cos(" << xs[i + k] << ") = " << c[k];
    }
  }
  std::printf("inline trig, %s: worst error %.3f ulp (sin), %.3f ulp (cos) over %zu arguments\n",
              sizeof(T) == 4 ? "float" : "double", worst_sin, worst_cos, xs.size());
}

template <class T>
void check_special_values() {
  using P = mg::detail::pack<T>;
  using K = mg::detail::trig_coefficients<T>;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  // one pack mixing a value beyond the limit with ordinary ones: the whole pack takes xsimd's path
  std::vector<T> xs(P::size, T(0.25));
  xs[0] = static_cast<T>(K::limit * 4 + T(0.3));
  xs[1] = T(-0.0);
  const P x = P::load(xs.data());
  T s[P::size], c[P::size];
  sin(x).store(s);
  cos(x).store(c);
  EXPECT_LE(ulp_error(s[0], std::sin(static_cast<long double>(xs[0]))), 2.0);
  EXPECT_LE(ulp_error(c[0], std::cos(static_cast<long double>(xs[0]))), 2.0);
  EXPECT_EQ(s[1], T(0));
  EXPECT_TRUE(std::signbit(s[1])) << "sin(-0) is -0";
  EXPECT_EQ(c[1], T(1));
  sin(P(T(0.25))).store(s);  // (a pack of two doubles has no third lane)
  EXPECT_LE(ulp_error(s[0], std::sin(0.25L)), 1.0);
  for (T special : {inf, -inf, nan}) {
    sin(P(special)).store(s);
    cos(P(special)).store(c);
    EXPECT_TRUE(std::isnan(s[0])) << "sin(" << special << ")";
    EXPECT_TRUE(std::isnan(c[0])) << "cos(" << special << ")";
  }
}

}  // namespace

TEST(InlineTrig, FloatAccuracy) { check_accuracy<float>(); }
TEST(InlineTrig, DoubleAccuracy) { check_accuracy<double>(); }
TEST(InlineTrig, FloatSpecialValues) { check_special_values<float>(); }
TEST(InlineTrig, DoubleSpecialValues) { check_special_values<double>(); }
