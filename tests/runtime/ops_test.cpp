// The runtime engine beyond the op table (tests/ops): compositions at scalar points against the
// static engine, and arrays against finite differences with broadcasting, non-contiguous views,
// f32 and mixed dtypes.
#include <cmath>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xrandom.hpp>
#include <xtensor/xview.hpp>

#include <metagrad/autograd.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg::tensor_list;
using mg_test::check_arrays;
using mg_test::check_runtime;

TEST(RuntimeScalar, TheDesignExample) {
  // the same generic lambda, with int and double literals on both sides
  check_runtime([](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); }, 2.0, 3.0);
  check_runtime([](auto x) { return 2.0 * x - 3 + x / 4.0 - 1 / x; }, 1.3);
}
TEST(RuntimeScalar, SharedSubexpressionsAndDeepComposition) {
  check_runtime(
      [](auto x, auto y) {
        auto t = x * y;
        return t + sin(t) * tanh(t / y) - exp(-t) / (2 + cos(x));
      },
      0.4, 1.1);
  check_runtime([](auto x, auto) { return x * x; }, 0.4, 1.1);  // an unused argument
}

// ---- arrays against finite differences -------------------------------------------------------
const mg::shape_t s23{2, 3};

TEST(RuntimeArrays, Broadcasting) {
  check_arrays([](const tensor_list& x) { return x[0] + x[1]; }, {{3, 1}, {1, 4}});
  check_arrays([](const tensor_list& x) { return x[0] * x[1]; }, {{2, 3}, {3}});
  check_arrays([](const tensor_list& x) { return x[0] / x[1]; }, {{2, 3}, {2, 1}},
               {.lo = 0.5, .hi = 2});
  check_arrays([](const tensor_list& x) { return x[0] - x[1]; }, {{}, {2, 3}});
  check_arrays([](const tensor_list& x) { return 2 * x[0] + x[0] / 3.0 - 1 / (2.5 + x[0]); },
               {s23});
  check_arrays([](const tensor_list& x) { return exp(x[0] * x[1]) * x[0]; }, {{4, 1, 2}, {3, 1}});
}

TEST(RuntimeArrays, Reductions) {
  check_arrays([](const tensor_list& x) { return mg::sum(x[0] * x[0]); }, {s23});
  check_arrays([](const tensor_list& x) { return x[0].sum(0) * x[0].sum(0); }, {s23});
  check_arrays([](const tensor_list& x) { return mg::sum(x[0] * x[0], 1); }, {s23});
  check_arrays([](const tensor_list& x) { return mg::sum(sin(x[0]), -1) * x[1]; },
               {{2, 3, 4}, {3}});
  check_arrays([](const tensor_list& x) { return mg::sum(x[0], -3); }, {{2, 3, 4}});
}

// A last dimension of 2 under one of 70: the elementwise kernels take rows along the 70 (Note
// [Long rows]), forward and backward, with broadcast operands on either side.
TEST(RuntimeArrays, ShortLastDimensionUnderALongOne) {
  check_arrays([](const tensor_list& x) { return square(x[0] - x[1]) * x[2]; },
               {{1, 70, 2}, {3, 1, 2}, {3, 70, 1}});
  check_arrays([](const tensor_list& x) { return exp(x[0] * 0.3) / (1 + x[1] * x[1]); },
               {{70, 2}, {1, 2}});
}

// Reductions over short last dimensions (kept or reduced: two dimensions per step of the CPU
// kernel) and products small enough for a plain loop, or large enough for BLAS, against loops.
TEST(RuntimeArrays, ShortRowsAndSmallProductsMatchLoops) {
  xt::random::seed(71);
  for (const std::size_t m : {1, 2, 3, 4, 9}) {
    const xt::xarray<double> a = xt::random::randn<double>(std::vector<std::size_t>{5, 37, m});
    const tensor t(a);
    const auto over_n = t.sum(1).to_xtensor<double>(), over_m = t.sum(2).to_xtensor<double>();
    for (std::size_t k = 0; k < 5; ++k) {
      for (std::size_t i = 0; i < m; ++i) {
        double want = 0;
        for (std::size_t j = 0; j < 37; ++j) want += a(k, j, i);
        EXPECT_NEAR(over_n(k, i), want, 1e-13) << m;
      }
      for (std::size_t j = 0; j < 37; ++j) {
        double want = 0;
        for (std::size_t i = 0; i < m; ++i) want += a(k, j, i);
        EXPECT_NEAR(over_m(k, j), want, 1e-13) << m;
      }
    }
    const auto f = tensor(xt::xarray<float>(a)).sum(1).to_xtensor<float>();
    EXPECT_NEAR(f(4, m - 1), over_n(4, m - 1), 1e-4);
  }
  // [n, k] x [k, p], each operand also transposed: a plain loop below BLAS's threshold, BLAS above
  for (const auto& [n, k, p] :
       {std::tuple{300, 2, 3}, std::tuple{7, 5, 6}, std::tuple{70, 40, 30}}) {
    const xt::xarray<double> a =
        xt::random::randn<double>(std::vector<std::size_t>{std::size_t(n), std::size_t(k)});
    const xt::xarray<double> b =
        xt::random::randn<double>(std::vector<std::size_t>{std::size_t(k), std::size_t(p)});
    const xt::xarray<double> at = xt::transpose(a), bt = xt::transpose(b);
    xt::xarray<double> want = xt::zeros<double>({std::size_t(n), std::size_t(p)});
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < p; ++j)
        for (int q = 0; q < k; ++q) want(i, j) += a(i, q) * b(q, j);
    const tensor ta(a), tb(b), tat(at), tbt(bt);
    for (const auto& c : {mg::matmul(ta, tb), mg::matmul(tat.t(), tb), mg::matmul(ta, tbt.t()),
                          mg::matmul(tat.t(), tbt.t())}) {
      const auto r = c.to_xtensor<double>();
      ASSERT_EQ(r.shape(), want.shape());
      for (std::size_t i = 0; i < r.size(); ++i) EXPECT_NEAR(r.flat(i), want.flat(i), 1e-12);
    }
  }
}

TEST(RuntimeArrays, Matmul) {
  check_arrays([](const tensor_list& x) { return mg::matmul(x[0], x[1]); }, {{2, 3}, {3, 4}});
  check_arrays([](const tensor_list& x) { return tanh(mg::matmul(x[0], x[1])); }, {{2, 3}, {3, 4}});
  // transposed (non-contiguous) operands go to BLAS with op 'T'
  check_arrays([](const tensor_list& x) { return mg::matmul(mg::transpose(x[0]), x[1] * x[1]); },
               {{3, 2}, {3, 4}});
  check_arrays([](const tensor_list& x) { return mg::matmul(x[0], x[0].t()); }, {{1, 3}});
  check_arrays([](const tensor_list& x) { return mg::matmul(x[0], x[1]); }, {{1, 1}, {1, 5}});
}

TEST(RuntimeArrays, NonContiguousInputs) {
  check_arrays([](const tensor_list& x) { return exp(mg::transpose(x[0])) * x[1]; },
               {{3, 2}, {2, 3}});
  check_arrays([](const tensor_list& x) { return mg::sum(mg::transpose(x[0]) * x[0].t(), 0); },
               {{3, 2}});
  check_arrays([](const tensor_list& x) { return mg::unsqueeze(x[0], 1) * x[1]; }, {{3}, {3, 2}});
  check_arrays([](const tensor_list& x) { return mg::transpose(x[0]).contiguous() * 2; }, {{3, 2}});
}

TEST(RuntimeArrays, Float32) {
  const mg_test::array_options f32{.dtype = mg::f32};
  check_arrays([](const tensor_list& x) { return x[0] * x[1] + sin(x[0]); }, {{3, 1}, {1, 4}}, f32);
  check_arrays([](const tensor_list& x) { return exp(x[0]) / (1 + x[0] * x[0]); }, {s23}, f32);
  check_arrays([](const tensor_list& x) { return tanh(mg::matmul(x[0], x[1])); }, {{2, 3}, {3, 2}},
               f32);
  check_arrays([](const tensor_list& x) { return log(pow(x[0], 2.0) + 1).sum(1); }, {s23}, f32);
  check_arrays([](const tensor_list& x) { return cos(x[0]) - x[0].sum(); }, {s23}, f32);
}

TEST(RuntimeArrays, MixedDtypesPromoteAndGradientsKeepTheirDtype) {
  tensor a = mg::ones({2}, {.dtype = mg::f32, .requires_grad = true});
  tensor b = mg::full({2}, 3.0, {.dtype = mg::f64, .requires_grad = true});
  tensor y = a * b;
  EXPECT_EQ(y.dtype(), mg::f64);
  y.sum().backward();
  EXPECT_EQ(a.grad().dtype(), mg::f32);
  EXPECT_EQ(b.grad().dtype(), mg::f64);
  EXPECT_FLOAT_EQ(a.grad().to_xtensor<float>()(1), 3.0f);
  EXPECT_DOUBLE_EQ(b.grad().to_xtensor<double>()(0), 1.0);
  // a scalar keeps the tensor's dtype
  EXPECT_EQ((a * 2.0).dtype(), mg::f32);
}

TEST(RuntimeArrays, ValuesAreExact) {
  const tensor a({{1., 2.}, {3., 4.}}, mg::f64);
  const tensor b({10., 20.}, mg::f64);
  auto r = (a * b + 1).to_xtensor<double>();
  EXPECT_EQ(r, (xt::xarray<double>{{11., 41.}, {31., 81.}}));
  EXPECT_EQ(mg::matmul(a, a.t()).to_xtensor<double>(), (xt::xarray<double>{{5., 11.}, {11., 25.}}));
  EXPECT_EQ(mg::matmul(a.t(), a).to_xtensor<double>(),
            (xt::xarray<double>{{10., 14.}, {14., 20.}}));
  EXPECT_EQ(a.sum(0).to_xtensor<double>(), (xt::xarray<double>{4., 6.}));
  EXPECT_EQ(a.sum(-1).to_xtensor<double>(), (xt::xarray<double>{3., 7.}));
  EXPECT_DOUBLE_EQ(a.sum().item<double>(), 10.0);
  EXPECT_EQ(a.sum().dim(), 0);
  EXPECT_DOUBLE_EQ(exp(tensor(1.0, mg::f64)).item<double>(), std::exp(1.0));
  EXPECT_DOUBLE_EQ(pow(tensor(3.0, mg::f64), 2).item<double>(), 9.0);
  EXPECT_DOUBLE_EQ((1 - tensor(3.0, mg::f64)).item<double>(), -2.0);
  EXPECT_DOUBLE_EQ((1 / tensor(4.0, mg::f64)).item<double>(), 0.25);
}

// Note [Zero-d kernels]: 0-d operands on the CPU take a shorter path than one-element tensors of
// shape [1]; both evaluate the op struct's formulas on numbers, so values and gradients agree
// exactly, in both dtypes, with number operands on either side, and under create_graph.
TEST(RuntimeScalar, ZeroDPathMatchesTheGeneralKernels) {
  const auto fs = {
      +[](const tensor& x, const tensor& y) { return x * 1.5 + y / 3.0; },
      +[](const tensor& x, const tensor& y) { return 2.0 / x - mg::pow(0.7, y) * x; },
      +[](const tensor& x, const tensor& y) { return mg::atan2(x, 0.3) + mg::sin(x * y); },
      +[](const tensor& x, const tensor& y) { return mg::exp(-x) * mg::maximum(y, 0.6); },
      +[](const tensor& x, const tensor& y) { return mg::where(x > y, x * y, 1.0 - y); },
  };
  for (mg::dtype dt : {mg::f64, mg::f32})
    for (const auto& f : fs)
      for (bool create_graph : {false, true}) {
        tensor_list grads[2], values;
        for (const mg::shape_t& shape : {mg::shape_t{}, mg::shape_t{1}}) {
          const auto make = [&](double v) {
            return mg::full(shape, v, {.dtype = dt, .requires_grad = true});
          };
          const tensor x = make(0.8), y = make(0.45);
          const tensor z = f(x, y);
          values.push_back(z.reshape({}));
          const auto g = mg::autograd::grad({z.sum()}, {x, y}, {}, {.create_graph = create_graph});
          grads[shape.empty() ? 0 : 1] = {g[0].reshape({}), g[1].reshape({})};
        }
        EXPECT_EQ(values[0].dtype(), dt);
        EXPECT_EQ(values[0].item<double>(), values[1].item<double>());
        for (std::size_t i = 0; i < 2; ++i)
          EXPECT_EQ(grads[0][i].item<double>(), grads[1][i].item<double>()) << i;
      }
}
