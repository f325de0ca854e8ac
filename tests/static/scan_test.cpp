// Note [Scan] (static/scan.hpp): mg::repeat with a step that holds constants (a literal, a
// captured double) becomes one node that runs the step N times. Its value is the plain loop's,
// its first and second derivatives match central differences, on numbers and arrays, for a
// value state and a pair, nested loops, and two loops with the same step type.
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>
#include <xtensor/xfixed.hpp>
#include <xtensor/xtensor.hpp>

#include <metagrad/xtensor.hpp>

#include "support/harness.hpp"
#include "support/harness_xtensor.hpp"

namespace {
// t <- t + 0.5 sin(t) x, N times: the literal 0.5 is a constant of every step
template <std::size_t N>
auto relax(const auto& t0, const auto& x) {
  return mg::repeat<N>([&](const auto& t) { return t + 0.5 * sin(t) * x; }, t0);
}

double relax_by_hand(double t, double x, int n) {
  for (int k = 0; k < n; ++k) t = t + 0.5 * std::sin(t) * x;
  return t;
}

// example-begin oscillator
// N explicit Euler steps of the damped oscillator x'' = -k x - c x' with step 0.05 from x = 1,
// v = 0, written as a physics step is written: literal constants in the step, a pair as the
// state. The step holds constants, so mg::repeat makes the loop one node: its compile time does
// not grow with N, and its gradient and Hessian are those of the loop.
template <std::size_t N>
auto oscillator(const auto& k, const auto& c) {
  auto euler = [&](const auto& s) {
    const auto& [x, v] = s;
    return std::pair{x + 0.05 * v, v - 0.05 * (k * x + c * v)};
  };
  return mg::repeat<N>(euler, std::pair{1.0, 0.0}).first;
}
// example-end oscillator
}  // namespace

TEST(StaticScan, IsOneNodeWhateverTheSteps) {
  auto f = [](auto t, auto x) { return relax<1000>(t, x); };
  using E = mg::detail::traced_t<decltype(f), 2>;
  static_assert(mg::detail::plan_v<E>.nslots == 3);  // x0, x1 and the loop
  // x small enough that t drifts without reaching the fixed point pi (both derivatives ~ 1)
  const auto [dt, dx] = mg::grad(f)(0.3, 0.002);
  const auto at = std::tuple{0.3, 0.002};
  EXPECT_GT(std::abs(dx), 0.1);
  EXPECT_DOUBLE_EQ(f(0.3, 0.002), relax_by_hand(0.3, 0.002, 1000));
  EXPECT_DOUBLE_EQ(mg::value_and_grad(f)(0.3, 0.002).first, relax_by_hand(0.3, 0.002, 1000));
  EXPECT_TRUE(mg_test::near_rel(dt, mg_test::central_difference<0>(f, at), 1e-6));
  EXPECT_TRUE(mg_test::near_rel(dx, mg_test::central_difference<1>(f, at), 1e-6));
}

TEST(StaticScan, FirstAndSecondOrderOnNumbers) {
  mg_test::check_static([](auto t, auto x) { return relax<16>(t, x); }, 0.3, 0.7);
  mg_test::check_static([](auto t, auto x) { return relax<16>(t, x) * relax<3>(x, t); }, 0.3, 0.7);
  mg_test::check_static([](auto k, auto c) { return oscillator<40>(k, c); }, 3.0, 0.4);
  // the full Hessian, and a Hessian-vector product by forward mode over the gradient
  auto f = [](auto k, auto c) { return oscillator<40>(k, c); };
  const auto [hk, hc] = mg::hessian(f)(3.0, 0.4);
  const auto hv = mg::jvp(mg::grad(f), std::tuple{3.0, 0.4}, std::tuple{1.0, -2.0}).second;
  EXPECT_TRUE(mg_test::near_rel(std::get<0>(hv), std::get<0>(hk) - 2 * std::get<1>(hk), 1e-12));
  EXPECT_TRUE(mg_test::near_rel(std::get<1>(hv), std::get<0>(hc) - 2 * std::get<1>(hc), 1e-12));
  EXPECT_TRUE(mg_test::near_rel(std::get<1>(hk), std::get<0>(hc), 1e-12));  // symmetric
}

// mg::unroll: a step without constants is unrolled unless told never to be; a step with
// constants is one node unless told always to unroll. Both ways give the same derivatives.
TEST(StaticScan, UnrollPolicy) {
  auto plain = [](auto t, auto x) {
    return mg::repeat<16>([&](const auto& s) { return sin(s) * x + s; }, t);
  };
  auto loop = [](auto t, auto x) {
    return mg::repeat<16, mg::unroll::never>([&](const auto& s) { return sin(s) * x + s; }, t);
  };
  static_assert(mg::detail::plan_v<mg::detail::traced_t<decltype(plain), 2>>.nslots == 50);
  static_assert(mg::detail::plan_v<mg::detail::traced_t<decltype(loop), 2>>.nslots == 3);
  const auto [pt, px] = mg::grad(plain)(0.3, 0.1);
  const auto [lt, lx] = mg::grad(loop)(0.3, 0.1);
  EXPECT_TRUE(mg_test::near_rel(pt, lt, 1e-13));
  EXPECT_TRUE(mg_test::near_rel(px, lx, 1e-13));
  mg_test::check_static(loop, 0.3, 0.1);  // the Hessian of 16 steps, which unrolled is too big
  auto unrolled = [](auto t, auto x) {
    return mg::repeat<4, mg::unroll::always>([&](const auto& s) { return s + 0.5 * sin(s) * x; },
                                             t);
  };
  static_assert(mg::detail::plan_v<mg::detail::traced_t<decltype(unrolled), 2>>.nslots > 4 * 4);
  EXPECT_TRUE(mg_test::near_rel(
      mg::grad<1>(unrolled)(0.3, 0.7),
      mg::grad<1>([](auto t, auto x) { return relax<4>(t, x); })(0.3, 0.7), 1e-14));
}

TEST(StaticScan, ACapturedNumberIsReadAtEachCall) {
  for (const double h : {0.1, 0.2}) {
    auto f = [h](auto t, auto x) {
      return mg::repeat<20>([&](const auto& s) { return s + h * sin(s) * x; }, t);
    };
    const auto at = std::tuple{0.3, 0.7};
    EXPECT_TRUE(
        mg_test::near_rel(mg::grad<1>(f)(0.3, 0.7), mg_test::central_difference<1>(f, at), 1e-6));
    mg_test::check_static(f, 0.3, 0.7);
  }
}

// The same step (one lambda type) in two loops with different constants, and a loop inside a
// loop's step that reads the outer state: each loop node holds its own constants.
TEST(StaticScan, LoopsOfOneStepTypeAndNestedLoops) {
  auto twice = [](auto t, auto x) {
    auto loop = [&](double h) {
      return mg::repeat<10>([&, h](const auto& s) { return s + h * sin(s) * x; }, t);
    };
    return loop(0.1) - 2.0 * loop(0.3);
  };
  auto by_hand = [](double t, double x, double h) {
    for (int k = 0; k < 10; ++k) t = t + h * std::sin(t) * x;
    return t;
  };
  EXPECT_DOUBLE_EQ(mg::value_and_grad(twice)(0.3, 0.7).first,
                   by_hand(0.3, 0.7, 0.1) - 2.0 * by_hand(0.3, 0.7, 0.3));
  mg_test::check_static(twice, 0.3, 0.7);
  auto nested = [](auto t, auto x) {
    return mg::repeat<5>(
        [&](const auto& s) {
          auto inner = mg::repeat<4>([&](const auto& u) { return u + 0.25 * cos(u) * s; }, x);
          return s + 0.1 * inner * s;
        },
        t);
  };
  mg_test::check_static(nested, 0.3, 0.7);
}

// f(0.7, 0.3) against 20 steps of (x, y, z) <- (x + 0.1 y a, y - 0.1 z, z + 0.1 sin(x) b) by
// hand, from (a, b, 0), returning x y + z; and its derivatives against central differences.
template <class F>
void check_three_value_loop(const F& f) {
  double x = 0.7, y = 0.3, z = 0;
  for (int k = 0; k < 20; ++k) {
    const double nx = x + 0.1 * y * 0.7, ny = y - 0.1 * z;
    z = z + 0.1 * std::sin(x) * 0.3;
    x = nx;
    y = ny;
  }
  EXPECT_DOUBLE_EQ(f(0.7, 0.3), x * y + z);
  EXPECT_DOUBLE_EQ(mg::value_and_grad(f)(0.7, 0.3).first, x * y + z);
  mg_test::check_static(f, 0.7, 0.3);
}

// A state of three values, one starting as the integer 0: on numbers the loop must not store
// the step's doubles back into an int (it unrolls instead), and traced it is one node per value.
TEST(StaticScan, ATupleStateWithAnIntegerStart) {
  auto f = [](auto a, auto b) {
    auto step = [&](const auto& s) {
      const auto& [x, y, z] = s;
      return std::tuple{x + 0.1 * y * a, y - 0.1 * z, z + 0.1 * sin(x) * b};
    };
    const auto [x, y, z] = mg::repeat<20>(step, std::tuple{a, b, 0});
    return x * y + z;
  };
  check_three_value_loop(f);
}

TEST(StaticScan, FirstOrderOnArrays) {
  const xt::xtensor<double, 1> t = {0.3, 0.5, 0.2, -0.4}, x = {0.1, 0.05, -0.1, 0.2};
  mg_test::check_xt([](auto a, auto b) { return sum(relax<30>(a, b)); }, t, x);
  mg_test::check_xt([](auto a, auto b) { return sum(relax<30>(a, b) * a); }, t, x);
  const xt::xtensor_fixed<double, xt::xshape<4>> tf = t, xf = x;
  mg_test::check_xt([](auto a, auto b) { return sum(relax<30>(a, b)); }, tf, xf);
  // a number's state driven by arrays it captured
  mg_test::check_xt(
      [](auto a, auto b) {
        return mg::repeat<8>([&](const auto& s) { return s + 0.1 * sum(sin(a * s) * b); }, sum(a));
      },
      t, x);
}

// A function of a number whose step reads an array it captured: the array is a constant of the
// loop's step, and the function is differentiated by the array evaluator.
TEST(StaticScan, AStepReadingACapturedArray) {
  const xt::xtensor<double, 1> y = {0.5, -0.25, 1.0};
  auto f = [&y](auto mu) {
    return mg::repeat<6>([&](const auto& s) { return s + 0.1 * sum(sin(y - s)); }, mu);
  };
  auto by_hand = [&y](double s) {
    for (int k = 0; k < 6; ++k) {
      double d = 0;
      for (const double v : y) d += std::sin(v - s);
      s += 0.1 * d;
    }
    return s;
  };
  const auto [value, d] = mg::value_and_grad(f)(0.3);
  EXPECT_NEAR(double(value), by_hand(0.3), 1e-14);
  EXPECT_TRUE(
      mg_test::near_rel(double(d), mg_test::central_difference<0>(by_hand, std::tuple{0.3}), 1e-7));
}

// A step that turns a number state into an array is an mg::error naming the fix.
TEST(StaticScan, ANumberStateMustStayANumber) {
  const xt::xtensor<double, 1> y = {0.5, -0.25, 1.0};
  auto f = [&y](auto mu) {
    return mg::repeat<3>([&](const auto& s) { return s + 0.1 * sin(y - s); }, mu);
  };
  const std::string what = mg_test::error_of([&] { (void)mg::grad(f)(0.3); });
  EXPECT_NE(what.find("mg::repeat: a step on a number state returned an array of 3 elements"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("reduce the step's value to a number"), std::string::npos) << what;
}

TEST(StaticScan, PrintsAsALoop) {
  auto f = [](auto t, auto x) { return relax<16>(t, x); };
  EXPECT_EQ(mg::to_string(mg::trace<2>(f)), "repeat<16>(s0 -> s0 + 0.5 * sin(s0) * x1; s0 = x0)");
  auto g = [](auto k, auto c) { return oscillator<40>(k, c); };
  EXPECT_EQ(mg::to_string(mg::trace<2>(g)),
            "repeat<40>((s0, s1) -> (s0 + 0.05 * s1, s1 - 0.05 * (x0 * s0 + x1 * s1)); "
            "s0 = 1, s1 = 0)[0]");
  auto nested = [](auto t, auto x) {  // the inner loop's state prints as t0
    return mg::repeat<5>(
        [&](const auto& s) {
          return s + 0.1 * mg::repeat<4>([&](const auto& u) { return u + 0.25 * cos(u) * s; }, x);
        },
        t);
  };
  EXPECT_EQ(mg::to_string(mg::trace<2>(nested)),
            "repeat<5>(s0 -> s0 + 0.1 * repeat<4>(t0 -> t0 + 0.25 * cos(t0) * s0; t0 = x1); "
            "s0 = x0)");
}

// A state nested as the step's data is (a pair inside a tuple): its values are the loop's
// components, flattened, and the loop is one node per value.
TEST(StaticScan, ANestedTupleState) {
  auto f = [](auto a, auto b) {
    auto step = [&](const auto& s) {
      const auto& [x, yz] = s;
      const auto& [y, z] = yz;
      return std::tuple{x + 0.1 * y * a, std::pair{y - 0.1 * z, z + 0.1 * sin(x) * b}};
    };
    const auto [x, yz] = mg::repeat<20>(step, std::tuple{a, std::pair{b, 0.0}});
    return x * yz.first + yz.second;
  };
  check_three_value_loop(f);
}

// The nesting the other way round: a pair of two values before a third. Each component is read
// from its own place (a value after a nested pair once read the pair's second value).
TEST(StaticScan, ANestedPairBeforeAValue) {
  auto f = [](auto a, auto b) {
    auto step = [&](const auto& s) {
      const auto& [xy, z] = s;
      const auto& [x, y] = xy;
      return std::tuple{std::pair{x + 0.1 * y * a, y - 0.1 * z}, z + 0.1 * sin(x) * b};
    };
    const auto [xy, z] = mg::repeat<20>(step, std::tuple{std::pair{a, b}, 0.0});
    return xy.first * xy.second + z;
  };
  check_three_value_loop(f);
}

// A step that advances a captured counter to read its data (a row per step, as an LSTM reads its
// inputs) reads other values at every call: traced once, it would run its first step's data N
// times. It is an mg::error naming the cause and the fixes; unrolled, it is right.
TEST(StaticScan, AStepReadingChangingCapturedDataIsAnError) {
  const double rows[4] = {0.5, -1.0, 2.0, 0.25};
  auto f = [&](auto w) {
    int k = 0;
    return mg::repeat<4>([&](const auto& s) { return s * w + rows[k++]; }, w);
  };
  const std::string what = mg_test::error_of([&] { (void)mg::grad(f)(0.3); });
  EXPECT_NE(what.find("mg::repeat: the step read other values when it was traced again"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("mg::unroll::always"), std::string::npos) << what;
  auto unrolled = [&](auto w) {
    int k = 0;
    return mg::repeat<4, mg::unroll::always>([&](const auto& s) { return s * w + rows[k++]; }, w);
  };
  auto by_hand = [&](double w) {
    double s = w;
    for (const double r : rows) s = s * w + r;
    return s;
  };
  EXPECT_DOUBLE_EQ(mg::value_and_grad(unrolled)(0.3).first, by_hand(0.3));
  EXPECT_TRUE(mg_test::near_rel(mg::grad(unrolled)(0.3),
                                mg_test::central_difference<0>(by_hand, std::tuple{0.3}), 1e-8));
}

namespace {
// 2x as a shaped op (seen as a whole array) that counts how often it runs: once per step of
// the loop that calls it.
int doubled_forward = 0, doubled_backward = 0;
struct counted_double_op {
  static constexpr const char* name = "counted_double";
  static constexpr bool elementwise = false;
  static constexpr std::size_t arity = 1;
  static auto forward(const auto& x) {
    ++doubled_forward;
    return xt::xarray<double>(2.0 * x);
  }
  static auto backward(const auto&, const auto&, const auto& g) {
    ++doubled_backward;
    return xt::xarray<double>(2.0 * g);
  }
};
}  // namespace

// Note [The loop's forward kept]: a gradient runs each step's forward once (the value comes from
// the run the reverse loop reads), and a value alone keeps nothing and runs it once too. The
// results against the loop written by hand and central differences, with a loop nested in the
// step (whose own run is not kept: it is part of the outer step's kept values).
TEST(StaticScan, AGradientRunsEachStepOnce) {
  constexpr int n = 7;
  const xt::xtensor<double, 1> t = {0.3, 0.5, -0.2}, x = {0.1, 0.05, -0.1};
  auto f = [](auto a, auto b) {
    const auto s = mg::repeat<n>(
        [&](const auto& s) { return s + 0.1 * sin(mg::apply<counted_double_op>(s)) * b; }, a);
    return sum(sin(s));  // (s * s would be two loops: Note [Slot identity])
  };
  auto by_hand = [](xt::xtensor<double, 1> s, const xt::xtensor<double, 1>& b) {
    for (int k = 0; k < n; ++k) s = s + 0.1 * xt::sin(2.0 * s) * b;
    return double(xt::sum(xt::sin(s))());
  };
  doubled_forward = doubled_backward = 0;
  const auto [value, g] = mg::value_and_grad(f)(t, x);
  EXPECT_EQ(doubled_forward, n);
  EXPECT_EQ(doubled_backward, n);
  EXPECT_NEAR(double(value), by_hand(t, x), 1e-14);
  for (std::size_t i = 0; i < t.size(); ++i) {
    auto plus = t, minus = t;
    plus(i) += 1e-6;
    minus(i) -= 1e-6;
    EXPECT_TRUE(
        mg_test::near_rel(std::get<0>(g)(i), (by_hand(plus, x) - by_hand(minus, x)) / 2e-6, 1e-7))
        << i;
  }
  mg_test::check_xt(f, t, x);
  doubled_forward = doubled_backward = 0;
  (void)mg::detail::evaluator<mg::detail::array_family>::value(f, t, x);
  EXPECT_EQ(doubled_forward, n);
  EXPECT_EQ(doubled_backward, 0);

  // nested: 3 outer steps of 4 inner ones. The outer loop's kept run runs each inner loop once,
  // not keeping it (its values are part of the outer step's); each inner loop's backward runs it
  // once more, keeping it: 2 x 3 x 4 (before the outer run was kept, 3 x 3 x 4).
  auto nested = [](auto a, auto b) {
    const auto s = mg::repeat<3>(
        [&](const auto& s) {
          return mg::repeat<4>(
              [&](const auto& u) { return u + 0.1 * sin(mg::apply<counted_double_op>(u)) * b; },
              s * 0.9);
        },
        a);
    return sum(s * b);
  };
  doubled_forward = 0;
  (void)mg::value_and_grad(nested)(t, x);
  EXPECT_EQ(doubled_forward, 2 * 3 * 4);
  mg_test::check_xt(nested, t, x);
}
