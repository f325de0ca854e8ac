// Note [Per-step inputs] (static/scan_rows.hpp): mg::repeat<N>(step, init, xs) reads row k of xs
// at step k, as jax.lax.scan reads its xs. Its value is a hand-written loop's; its gradients
// match central differences on numbers (one state value and a pair, rows from an xtensor array
// and a std::vector) and on arrays (a 2-D xs, a state vector), traced as one node or unrolled.
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xtensor.hpp>

#include <metagrad/xtensor.hpp>

#include "support/harness.hpp"
#include "support/harness_xtensor.hpp"

namespace {
// example-begin rnn
// A recurrent cell over a sequence: h <- tanh(w h + u x_k) for the 8 inputs x_k of xs, from
// h = 0. The step reads its input through its second parameter; the weights are captured.
const xt::xtensor<double, 1> xs = {0.5, -1.0, 0.25, 2.0, -0.5, 1.5, 0.0, -2.0};
auto rnn = [](auto w, auto u) {
  return mg::repeat<8>([&](const auto& h, const auto& x) { return tanh(w * h + u * x); }, 0.0, xs);
};
// example-end rnn

double rnn_by_hand(double w, double u) {
  double h = 0;
  for (const double x : xs) h = std::tanh(w * h + u * x);
  return h;
}

// A pair state over a std::vector of rows: several state values take the loop node's one-sweep
// path for the vector-Jacobian product on numbers.
const std::vector<double> rows = {0.3, -0.7, 1.1, 0.4, -0.2};
auto cell = [](auto w, auto u) {
  auto step = [&](const auto& s, const auto& x) {
    const auto& [h, c] = s;
    return std::pair{tanh(w * h + u * x + c), 0.5 * c + h * x};
  };
  return mg::repeat<5>(step, std::pair{0.1, 0.0}, rows).first;
};
double cell_by_hand(double w, double u) {
  double h = 0.1, c = 0;
  for (const double x : rows) {
    const double h2 = std::tanh(w * h + u * x + c), c2 = 0.5 * c + h * x;
    h = h2;
    c = c2;
  }
  return h;
}
}  // namespace

TEST(StaticScanRows, OneValueOverAnXtensorArray) {
  const auto at = std::tuple{0.7, -0.4};
  EXPECT_NEAR(rnn(0.7, -0.4), rnn_by_hand(0.7, -0.4), 1e-15);  // the plain loop, on numbers
  const auto [v, g] = mg::value_and_grad(rnn)(0.7, -0.4);      // traced: one loop node
  EXPECT_NEAR(v, rnn_by_hand(0.7, -0.4), 1e-15);
  const auto [dw, du] = g;
  EXPECT_TRUE(mg_test::near_rel(dw, mg_test::central_difference<0>(rnn_by_hand, at), 1e-7));
  EXPECT_TRUE(mg_test::near_rel(du, mg_test::central_difference<1>(rnn_by_hand, at), 1e-7));
  // forward mode through the node: the tangent along (1, 0) is d/dw
  EXPECT_NEAR(double(mg::jvp(rnn, std::tuple{0.7, -0.4}, std::tuple{1.0, 0.0}).second), dw, 1e-14);
  using E = mg::detail::traced_t<decltype(rnn), 2>;
  static_assert(mg::detail::plan_v<E>.nslots == 4);  // w, u, the start 0.0 and the loop
}

TEST(StaticScanRows, UnrolledAgreesWithTheNode) {
  auto unrolled = [](auto w, auto u) {
    return mg::repeat<8, mg::unroll::always>(
        [&](const auto& h, const auto& x) { return tanh(w * h + u * x); }, 0.0, xs);
  };
  const auto [dw, du] = mg::grad(rnn)(0.7, -0.4);
  const auto [uw, uu] = mg::grad(unrolled)(0.7, -0.4);
  EXPECT_NEAR(dw, uw, 1e-14);
  EXPECT_NEAR(du, uu, 1e-14);
  // unrolled, second order is available (a short loop: its Hessian is traced through every step)
  const std::array<double, 3> three = {0.5, -1.0, 0.25};
  auto short_loop = [&three](auto w, auto u) {
    return mg::repeat<3, mg::unroll::always>(
        [&](const auto& h, const auto& x) { return tanh(w * h + u * x); }, 0.3, three);
  };
  const auto gw = [&](double w) { return mg::grad<0>(short_loop)(w, -0.4); };
  EXPECT_TRUE(mg_test::near_rel(mg::hessian<0>(short_loop)(0.7, -0.4),
                                (gw(0.7 + 1e-5) - gw(0.7 - 1e-5)) / 2e-5, 1e-7));
}

TEST(StaticScanRows, APairStateOverAVector) {
  const auto at = std::tuple{0.9, 0.6};
  EXPECT_NEAR(cell(0.9, 0.6), cell_by_hand(0.9, 0.6), 1e-15);
  const auto [dw, du] = mg::grad(cell)(0.9, 0.6);
  EXPECT_TRUE(mg_test::near_rel(dw, mg_test::central_difference<0>(cell_by_hand, at), 1e-7));
  EXPECT_TRUE(mg_test::near_rel(du, mg_test::central_difference<1>(cell_by_hand, at), 1e-7));
  // a std::array of rows reads the same
  const std::array<double, 5> fixed = {0.3, -0.7, 1.1, 0.4, -0.2};
  auto cell_fixed = [&fixed](auto w, auto u) {
    auto step = [&](const auto& s, const auto& x) {
      const auto& [h, c] = s;
      return std::pair{tanh(w * h + u * x + c), 0.5 * c + h * x};
    };
    return mg::repeat<5>(step, std::pair{0.1, 0.0}, fixed).first;
  };
  const auto [fw, fu] = mg::grad(cell_fixed)(0.9, 0.6);
  EXPECT_DOUBLE_EQ(fw, dw);
  EXPECT_DOUBLE_EQ(fu, du);
}

TEST(StaticScanRows, ArrayRowsAndAnArrayState) {
  // h <- tanh(w * h + s * x_k) elementwise, over the 5 rows of a 5x3 xs, from a fixed h0
  const xt::xtensor<double, 2> seq = {
      {0.5, -1.0, 0.25}, {2.0, -0.5, 1.5}, {0.0, -2.0, 0.75}, {1.0, 0.5, -0.25}, {-1.5, 0.3, 0.6}};
  const xt::xtensor<double, 1> h0 = {0.1, -0.2, 0.3};
  auto f = [&](auto w, auto s) {
    return mg::sum(
        mg::repeat<5>([&](const auto& h, const auto& x) { return tanh(w * h + s * x); }, h0, seq));
  };
  const xt::xtensor<double, 1> w = {0.8, -0.6, 1.2};
  mg_test::check_xt(f, w, 0.4);
  // against a hand-written loop
  double by_hand = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    double h = h0(i);
    for (std::size_t k = 0; k < 5; ++k) h = std::tanh(w(i) * h + 0.4 * seq(k, i));
    by_hand += h;
  }
  EXPECT_NEAR(double(mg::value_and_grad(f)(w, 0.4).first), by_hand, 1e-14);
}

// An LSTM-like state over array rows: each layer's (hidden, cell) pair nested before a running
// total, the step's row read as its second parameter and kept in the state. The loop node against
// the unrolled loop and a loop by hand; the text names the row.
TEST(StaticScanRows, ANestedStateOverArrayRows) {
  const xt::xtensor<double, 2> seq = {{1.0, 2.0, 3.0}, {0.3, -0.2, 0.1}, {-0.5, 0.4, 0.8}};
  const xt::xtensor<double, 1> h0 = {0.5, -1.0, 2.0};
  auto loop = [&]<mg::unroll U>(std::integral_constant<mg::unroll, U>) {
    return [&](auto w) {
      auto step = [&](const auto& s, const auto& r) {
        const auto& [hc, x, t] = s;
        const auto& [h, c] = hc;
        const auto h2 = tanh(h * w + c + x);
        return std::tuple{std::pair{h2, c * r}, r, t + mg::sum(h2)};
      };
      return std::get<2>(mg::repeat<3, U>(step, std::tuple{std::pair{h0, h0}, h0, 0.0}, seq));
    };
  };
  const auto node = loop(std::integral_constant<mg::unroll, mg::unroll::never>{});
  const auto unrolled = loop(std::integral_constant<mg::unroll, mg::unroll::always>{});
  const xt::xtensor<double, 1> w = {0.9, -0.4, 0.05};
  double by_hand = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    double h = h0(i), c = h0(i), x = h0(i);
    for (std::size_t k = 0; k < 3; ++k) {
      h = std::tanh(h * w(i) + c + x);
      c *= seq(k, i);
      x = seq(k, i);
      by_hand += h;
    }
  }
  const auto [v, g] = mg::value_and_grad(node)(w);
  EXPECT_NEAR(double(v), by_hand, 1e-14);
  const auto [uv, ug] = mg::value_and_grad(unrolled)(w);
  EXPECT_NEAR(double(uv), by_hand, 1e-14);
  EXPECT_LT(double(xt::amax(xt::abs(g - ug))()), 1e-14);
  mg_test::check_xt(node, w);
  EXPECT_EQ(
      mg::to_string(mg::trace<1>(node)),
      "repeat<3>((s0, s1, s2, s3), r0 -> (tanh(s0 * x0 + s1 + s2), s1 * r0, r0, s3 + "
      "sum(tanh(s0 * x0 + s1 + s2))); s0 = array[3], s1 = array[3], s2 = array[3], s3 = 0)[3]");
}

TEST(StaticScanRows, RowsMustBeOnePerStep) {
  const std::string e = mg_test::error_of([] {
    (void)mg::grad([](auto w) {
      return mg::repeat<5>([&](const auto& h, const auto& x) { return tanh(w * h + x); }, 0.0, xs);
    })(0.5);
  });
  EXPECT_NE(e.find("mg::repeat<5>: xs has 8 rows"), std::string::npos) << e;
}

// Note [Loop-invariant reads] (static/scan.hpp): the step's reads of the parameters alone (the
// slices of a weight row below) run once per call, before the loop. Four gates slice one row with
// run-time bounds: one type, four different values, so each occurrence is its own read. The same
// cell with fixed bounds (Note [Fixed indices]) reads each slice once. Both against the unrolled
// loop, a loop by hand and central differences.
namespace {
const xt::xtensor<double, 2> gate_seq = {
    {0.5, -1.0}, {2.0, -0.5}, {0.0, -2.0}, {1.0, 0.5}, {-1.5, 0.3}};
const xt::xtensor<double, 1> gate_h0 = {0.1, -0.2};

// example-begin fixed_slice
// The gates of an LSTM cell slice one parameter matrix p (row 0 the weights, row 1 the biases);
// with fixed bounds each slice is one value however often the step's state values read it.
template <std::int64_t g, class P, class V>
auto fixed_gate(const P& p, const V& v) {
  return v * mg::slice<0, 2 * g, 2 * g + 2>(mg::select<0, 0>(p)) +
         mg::slice<0, 2 * g, 2 * g + 2>(mg::select<0, 1>(p));
}
// example-end fixed_slice

// p: row 0 the gates' weights (4 x 2), row 1 their biases; the state (h, c) and a running total
template <bool Fixed>
auto gated_cell = [](auto p) {
  const auto gate = [&]<std::int64_t g>(std::integral_constant<std::int64_t, g>, const auto& v) {
    if constexpr (Fixed) {
      return fixed_gate<g>(p, v);
    } else {
      return v * mg::slice(mg::select(p, 0, 0), 0, 2 * g, 2 * g + 2) +
             mg::slice(mg::select(p, 0, 1), 0, 2 * g, 2 * g + 2);
    }
  };
  auto step = [&](const auto& s, const auto& x) {
    const auto& [hc, total] = s;
    const auto& [h, c] = hc;
    const auto f = mg::sigmoid(gate(std::integral_constant<std::int64_t, 0>{}, x));
    const auto i = mg::sigmoid(gate(std::integral_constant<std::int64_t, 1>{}, h));
    const auto o = mg::sigmoid(gate(std::integral_constant<std::int64_t, 2>{}, x));
    const auto u = mg::tanh(gate(std::integral_constant<std::int64_t, 3>{}, h));
    const auto cn = c * f + i * u;
    const auto hn = o * mg::tanh(cn);
    return std::tuple{std::pair{hn, cn}, total + mg::sum(hn * x)};
  };
  return std::get<1>(mg::repeat<5>(step, std::tuple{std::pair{gate_h0, gate_h0}, 0.0}, gate_seq));
};

double gated_by_hand(const xt::xtensor<double, 2>& p) {
  const auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  double total = 0;
  for (std::size_t j = 0; j < 2; ++j) {
    double h = gate_h0(j), c = gate_h0(j);
    const auto a = [&](std::size_t g, double v) { return v * p(0, 2 * g + j) + p(1, 2 * g + j); };
    for (std::size_t k = 0; k < 5; ++k) {
      const double x = gate_seq(k, j);
      const double cn = c * sig(a(0, x)) + sig(a(1, h)) * std::tanh(a(3, h));
      h = sig(a(2, x)) * std::tanh(cn);
      c = cn;
      total += h * x;
    }
  }
  return total;
}
}  // namespace

TEST(StaticScanRows, GatesSlicedWithRunTimeBounds) {
  const xt::xtensor<double, 2> p = {{0.3, -0.8, 1.1, 0.4, -0.6, 0.9, 0.2, -1.3},
                                    {0.1, 0.5, -0.4, 0.7, 0.2, -0.3, 0.6, -0.1}};
  const auto [v, g] = mg::value_and_grad(gated_cell<false>)(p);
  EXPECT_NEAR(double(v), gated_by_hand(p), 1e-14);
  (void)g;
  mg_test::check_xt(gated_cell<false>, p);
}

TEST(StaticScanRows, GatesSlicedWithFixedBounds) {
  const xt::xtensor<double, 2> p = {{0.3, -0.8, 1.1, 0.4, -0.6, 0.9, 0.2, -1.3},
                                    {0.1, 0.5, -0.4, 0.7, 0.2, -0.3, 0.6, -0.1}};
  const auto [v, g] = mg::value_and_grad(gated_cell<true>)(p);
  EXPECT_NEAR(double(v), gated_by_hand(p), 1e-14);
  const auto [rv, rg] = mg::value_and_grad(gated_cell<false>)(p);
  EXPECT_NEAR(double(v), double(rv), 1e-15);
  EXPECT_LT(double(xt::amax(xt::abs(g - rg))()), 1e-15);
  mg_test::check_xt(gated_cell<true>, p);
}

// Invariants of other kinds: a parameter read bare, a function of one (exp(a), computed once), a
// parameter that only the invariants read, and a captured constant among them.
TEST(StaticScanRows, InvariantsReadBareOrThroughFunctions) {
  const xt::xtensor<double, 1> scale = {0.5, 2.0};
  auto f = [&](auto w, auto a) {
    auto step = [&](const auto& s, const auto& x) {
      const auto& [h, n] = s;
      return std::pair{tanh(w * h + mg::exp(a) * x + scale * a), n + mg::sum(h * w)};
    };
    return mg::repeat<5>(step, std::pair{gate_h0, 0.0}, gate_seq).second;
  };
  const xt::xtensor<double, 1> w = {0.7, -1.1}, a = {-0.3, 0.2};
  double by_hand = 0;
  for (std::size_t j = 0; j < 2; ++j) {
    double h = gate_h0(j);
    for (std::size_t k = 0; k < 5; ++k) {
      by_hand += h * w(j);
      h = std::tanh(w(j) * h + std::exp(a(j)) * gate_seq(k, j) + scale(j) * a(j));
    }
  }
  EXPECT_NEAR(double(mg::value_and_grad(f)(w, a).first), by_hand, 1e-14);
  mg_test::check_xt(f, w, a);
}
