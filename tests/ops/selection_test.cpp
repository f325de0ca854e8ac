// argmax, argmin, max and min along a dim with indices, topk (ops/selection.hpp): positions
// against known answers, torch's tie and NaN rules (Note [Selection order]), the same answers on
// xtensor arrays, and the values' gradients against central differences, first and second
// order.
#include <cmath>
#include <limits>
#include <vector>

#include <metagrad/tensor_xtensor.hpp>
#include <metagrad/xtensor.hpp>
#include "support/expect_ad.hpp"

using mg::tensor;

MG_TEST_ON_EACH_DEVICE(SelectionSemantics);

namespace {
// the elements of an i64 tensor, row-major
std::vector<std::int64_t> ints(const tensor& t) {
  EXPECT_EQ(t.dtype(), mg::i64);
  const auto a = t.to_xtensor<std::int64_t>();
  return {a.begin(), a.end()};
}
using iv = std::vector<std::int64_t>;
}  // namespace

TEST_P(SelectionSemantics, ArgmaxAndArgminPickTheFirstExtreme) {
  const mg::device dev = GetParam();
  const tensor x = tensor({{1.0, 5.0, 5.0, -2.0}, {7.0, 0.0, 7.0, -2.0}}, mg::f64).to(dev);
  EXPECT_EQ(mg::argmax(x).dim(), 0);
  EXPECT_EQ(mg::argmax(x).item<std::int64_t>(), 4);  // the first 7, flat
  EXPECT_EQ(mg::argmin(x).item<std::int64_t>(), 3);  // the first -2
  EXPECT_EQ(ints(mg::argmax(x, 1)), (iv{1, 0}));
  EXPECT_EQ(ints(mg::argmin(x, 1)), (iv{3, 3}));
  EXPECT_EQ(ints(mg::argmax(x, 0)), (iv{1, 0, 1, 0}));
  EXPECT_EQ(ints(mg::argmax(x, -1, true)), (iv{1, 0}));
  EXPECT_EQ(mg::argmax(x, -1, true).shape(), (mg::shape_t{2, 1}));
  EXPECT_EQ(mg::argmax(x, 0).device(), dev);
  // a transposed view reads its own order
  EXPECT_EQ(ints(mg::argmax(x.t(), 0)), (iv{1, 0}));
  // i64 and f32 inputs
  EXPECT_EQ(mg::argmax(tensor({3, 9, 9, 1}).to(dev)).item<std::int64_t>(), 1);
  EXPECT_EQ(mg::argmin(tensor({3.0f, -1.0f, 4.0f}).to(dev)).item<std::int64_t>(), 1);
  // 0-d: index 0
  EXPECT_EQ(mg::argmax(tensor(2.5).to(dev)).item<std::int64_t>(), 0);
}

TEST_P(SelectionSemantics, NaNIsPickedByArgmaxAndArgmin) {
  const mg::device dev = GetParam();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const tensor x = tensor({{1.0, nan, 3.0, nan}, {2.0, -1.0, 0.0, 4.0}}, mg::f64).to(dev);
  EXPECT_EQ(ints(mg::argmax(x, 1)), (iv{1, 3}));
  EXPECT_EQ(ints(mg::argmin(x, 1)), (iv{1, 1}));
  const auto [v, i] = mg::max(x, 1);
  EXPECT_TRUE(std::isnan(v.to_xtensor<double>()(0)));  // the value is NaN, the index points at it
  EXPECT_EQ(ints(i), (iv{1, 3}));
}

// Rows long enough for the packed search (several packs and a tail, every extreme and NaN
// position), ties between 0 and -0 included: the first extreme, a NaN first, as a plain loop.
TEST_P(SelectionSemantics, LongRowsPickAsAPlainLoop) {
  const mg::device dev = GetParam();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const mg::dtype dt : {mg::f32, mg::f64}) {
    for (const std::size_t n : {1u, 7u, 33u, 70u}) {
      xt::xarray<double> a = xt::zeros<double>({3 * n, n});
      for (std::size_t r = 0; r < 3 * n; ++r)
        for (std::size_t j = 0; j < n; ++j) {
          const double c = std::cos(static_cast<double>(r * 31 + j));
          a(r, j) = r < 2 * n ? c : 1.0 + std::abs(c);  // the last n rows: positive
        }
      for (std::size_t r = 0; r < n; ++r) {
        a(r, r) = 5.0;                          // row r < n: the largest at r,
        a(r, (r * 7) % n) = 5.0;                // and maybe tied later or earlier
        a(n + r, r) = nan;                      // rows n..2n: a NaN at r
        a(2 * n + r, r) = r % 2 ? -0.0 : -7.0;  // rows 2n..3n: the smallest, or a signed zero
        a(2 * n + r, n - 1 - r) = r % 2 ? 0.0 : -7.0;
      }
      const tensor x = tensor(a).to(dt).to(dev);
      const auto plain = [&](bool largest) {
        iv out;
        for (std::size_t r = 0; r < a.shape(0); ++r) {
          std::size_t best = 0;
          for (std::size_t j = 0; j < n; ++j) {
            const auto in = [&](double e) {  // the element as the tensor holds it
              return dt == mg::f32 ? static_cast<double>(static_cast<float>(e)) : e;
            };
            const double v = in(a(r, j)), b = in(a(r, best));
            if (std::isnan(b)) break;
            if (std::isnan(v) || (largest ? v > b : v < b)) best = j;
          }
          out.push_back(static_cast<std::int64_t>(best));
        }
        return out;
      };
      SCOPED_TRACE(testing::Message() << (dt == mg::f32 ? "f32" : "f64") << ", n = " << n);
      EXPECT_EQ(ints(mg::argmax(x, 1)), plain(true));
      EXPECT_EQ(ints(mg::argmin(x, 1)), plain(false));
      EXPECT_EQ(ints(mg::max(x, 1).indices), plain(true));
      EXPECT_EQ(ints(mg::topk(x, 1, 1).indices), plain(true));
    }
  }
}

TEST_P(SelectionSemantics, MaxAndMinAlongADimGiveValuesAndIndices) {
  const mg::device dev = GetParam();
  const tensor x = tensor({{1.0, 3.0, 3.0}, {2.0, 2.0, 0.0}}, mg::f64).to(dev).requires_grad_();
  const auto [v, i] = mg::max(x, 1);
  EXPECT_EQ(v.to_xtensor<double>(), (xt::xarray<double>{3.0, 2.0}));
  EXPECT_EQ(ints(i), (iv{1, 0}));
  EXPECT_STREQ(v.grad_fn()->name(), "max");
  EXPECT_FALSE(i.requires_grad());
  // the gradient goes to the element the index names
  const tensor g = mg::autograd::grad({mg::sum(v)}, {x})[0];
  EXPECT_EQ(g.to_xtensor<double>(), (xt::xarray<double>{{0.0, 1.0, 0.0}, {1.0, 0.0, 0.0}}));
  const auto m = mg::min(x, 0, true);
  EXPECT_EQ(m.values.to_xtensor<double>(), (xt::xarray<double>{{1.0, 2.0, 0.0}}));
  EXPECT_EQ(ints(m.indices), (iv{0, 1, 1}));
  EXPECT_EQ(m.indices.shape(), (mg::shape_t{1, 3}));
}

TEST_P(SelectionSemantics, AmaxSplitsTiesEvenlyAlongADim) {
  const mg::device dev = GetParam();
  const tensor x = tensor({{1.0, 3.0, 3.0}, {2.0, 2.0, 2.0}}, mg::f64).to(dev).requires_grad_();
  const tensor y = mg::amax(x, 1);
  EXPECT_STREQ(y.grad_fn()->name(), "amax");
  EXPECT_EQ(y.to_xtensor<double>(), (xt::xarray<double>{3.0, 2.0}));
  const tensor g = mg::autograd::grad({mg::sum(y)}, {x})[0];
  const auto ga = g.to_xtensor<double>();
  EXPECT_EQ(ga(0, 0), 0.0);
  EXPECT_EQ(ga(0, 1), 0.5);
  EXPECT_EQ(ga(0, 2), 0.5);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(ga(1, j), 1.0 / 3.0, 1e-15);
  const tensor gm = mg::autograd::grad({mg::sum(mg::amin(x, 0))}, {x})[0];
  EXPECT_EQ(gm.to_xtensor<double>(), (xt::xarray<double>{{1.0, 0.0, 0.0}, {0.0, 1.0, 1.0}}));
}

TEST_P(SelectionSemantics, TopkOrdersByValueThenPosition) {
  const mg::device dev = GetParam();
  const tensor x = tensor({{4.0, 1.0, 4.0, 9.0, 1.0}, {0.0, 2.0, -3.0, 2.0, 8.0}}, mg::f64).to(dev);
  const auto [v, i] = mg::topk(x, 3);
  EXPECT_EQ(v.to_xtensor<double>(), (xt::xarray<double>{{9.0, 4.0, 4.0}, {8.0, 2.0, 2.0}}));
  EXPECT_EQ(ints(i), (iv{3, 0, 2, 4, 1, 3}));
  const auto low = mg::topk(x, 2, 1, false);
  EXPECT_EQ(low.values.to_xtensor<double>(), (xt::xarray<double>{{1.0, 1.0}, {-3.0, 0.0}}));
  EXPECT_EQ(ints(low.indices), (iv{1, 4, 2, 0}));
  const auto cols = mg::topk(x, 1, 0);
  EXPECT_EQ(cols.values.shape(), (mg::shape_t{1, 5}));
  EXPECT_EQ(ints(cols.indices), (iv{0, 1, 0, 0, 1}));
  EXPECT_EQ(mg::topk(x, 0).values.shape(), (mg::shape_t{2, 0}));
  EXPECT_EQ(mg::topk(x, 5).values.shape(), (mg::shape_t{2, 5}));
  // NaN: the largest for largest = true, last for largest = false
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const tensor n = tensor({1.0, nan, 3.0}, mg::f64).to(dev);
  EXPECT_EQ(ints(mg::topk(n, 2).indices), (iv{1, 2}));
  EXPECT_EQ(ints(mg::topk(n, 3, 0, false).indices), (iv{0, 2, 1}));
}

TEST_P(SelectionSemantics, TopkIsOneNodeWhoseGradientScattersBack) {
  const mg::device dev = GetParam();
  const tensor x = tensor({{4.0, 1.0, 5.0}, {0.0, 2.0, -3.0}}, mg::f64).to(dev).requires_grad_();
  const tensor v = mg::topk(x, 2).values;
  ASSERT_NE(v.grad_fn(), nullptr);
  EXPECT_STREQ(v.grad_fn()->name(), "topk");
  EXPECT_STREQ(v.grad_fn()->next_functions()[0].function->name(), "accumulate_grad");
  const tensor w = tensor({{1.0, 10.0}, {100.0, 1000.0}}, mg::f64).to(dev);
  const tensor g = mg::autograd::grad({mg::sum(v * w)}, {x})[0];
  EXPECT_EQ(g.to_xtensor<double>(), (xt::xarray<double>{{10.0, 0.0, 1.0}, {1000.0, 100.0, 0.0}}));
}

TEST_P(SelectionSemantics, MisuseNamesTheOpAndTheShape) {
  const mg::device dev = GetParam();
  const tensor x = mg::zeros({2, 3}, {.device = dev});
  mg_test::expect_error([&] { (void)mg::topk(x, 4); },
                        {"topk", "k = 4", "extent 3", "[2,3]", "0 to 3"});
  mg_test::expect_error([&] { (void)mg::topk(x, -1, 0); }, {"topk", "k = -1", "0 to 2"});
  mg_test::expect_error([&] { (void)mg::argmax(x, 2); }, {"argmax", "dim 2", "[2,3]"});
  mg_test::expect_error([&] { (void)mg::argmin(mg::zeros({0}, {.device = dev})); },
                        {"argmin", "[0]", "no elements"});
  mg_test::expect_error(
      [&] {
        (void)mg::max(mg::zeros({2, 0}, {.device = dev}), 1);
      },
      {"max", "dim 1", "[2,0]", "empty"});
}

// The values' gradients against central differences, first and second order (f64 and f32).
TEST_P(SelectionSemantics, ValuesGradientsMatchFiniteDifferences) {
  const mg::device dev = GetParam();
  for (const mg::dtype d : {mg::f64, mg::f32}) {
    const mg_test::array_options o{.dtype = d, .device = dev};
    mg_test::check_arrays(
        [](const mg::tensor_list& x) { return mg::max(x[0], 1, true).values * x[0]; }, {{3, 4}}, o);
    mg_test::check_arrays(
        [](const mg::tensor_list& x) { return mg::min(x[0] * x[0], 0, true).values; }, {{3, 4}}, o);
    mg_test::check_arrays(
        [](const mg::tensor_list& x) { return mg::topk(x[0], 2, 0).values * mg::sin(x[0][0]); },
        {{3, 4}}, o);
    mg_test::check_arrays(
        [](const mg::tensor_list& x) { return mg::square(mg::topk(x[0], 3, -1, false).values); },
        {{2, 5}}, o);
  }
}

// On xtensor arrays: the same answers, as xt::xarray<std::int64_t>.
TEST(Selection, OnArrays) {
  const xt::xarray<double> x = {{4.0, 1.0, 4.0, 9.0, 1.0}, {0.0, 2.0, -3.0, 2.0, 8.0}};
  EXPECT_EQ(mg::argmax(x)(), 3);
  const auto flat = [](const xt::xarray<std::int64_t>& a) { return iv(a.begin(), a.end()); };
  EXPECT_EQ(flat(mg::argmin(x, 1)), (iv{1, 2}));
  const auto [v, i] = mg::max(x, 0);
  EXPECT_EQ(v, (xt::xarray<double>{4.0, 2.0, 4.0, 9.0, 8.0}));
  EXPECT_EQ(flat(i), (iv{0, 1, 0, 0, 1}));
  const auto t = mg::topk(x, 3);
  EXPECT_EQ(t.values, (xt::xarray<double>{{9.0, 4.0, 4.0}, {8.0, 2.0, 2.0}}));
  EXPECT_EQ(flat(t.indices), (iv{3, 0, 2, 4, 1, 3}));
  EXPECT_EQ(t.indices.shape(0), 2u);
  EXPECT_EQ(mg::amax(x, 1), (xt::xarray<double>{9.0, 8.0}));
}
