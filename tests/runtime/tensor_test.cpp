// mg::tensor as an array: construction, factories, read-back, xtensor round trip, views.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <xtensor/xadapt.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg_test::expect_error;

TEST(RuntimeTensor, NestedListsAndScalars) {
  const tensor m({{1., 2.}, {3., 4.}}, mg::f64);
  EXPECT_EQ(m.shape(), (mg::shape_t{2, 2}));
  EXPECT_EQ(m.dtype(), mg::f64);
  EXPECT_EQ(m.device(), mg::device::cpu);
  EXPECT_EQ(m.dim(), 2);
  EXPECT_EQ(m.numel(), 4);
  EXPECT_EQ(m.strides(), (mg::shape_t{2, 1}));
  EXPECT_EQ(m.to_xtensor<double>(), (xt::xarray<double>{{1., 2.}, {3., 4.}}));
  const tensor v{1.f, 2.f, 3.f};
  EXPECT_EQ(v.shape(), (mg::shape_t{3}));
  EXPECT_EQ(v.dtype(), mg::f32);
  const tensor c({{{1., 2.}}, {{3., 4.}}, {{5., 6.}}}, mg::f64);
  EXPECT_EQ(c.shape(), (mg::shape_t{3, 1, 2}));
  EXPECT_DOUBLE_EQ(c.to_xtensor<double>()(2, 0, 1), 6.0);
  const tensor s(2.5, mg::f64);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_DOUBLE_EQ(s.item<double>(), 2.5);
  EXPECT_EQ(tensor({2.5}, mg::f64).dim(), 1);  // braces: a 1-D list of one element
  EXPECT_FLOAT_EQ(tensor(1.5f).item<float>(), 1.5f);
  EXPECT_FALSE(tensor{}.defined());
  expect_error([] { tensor bad{{1., 2.}, {3.}}; }, {"ragged"});
}

TEST(RuntimeTensor, Factories) {
  const tensor z = mg::zeros({2, 3});
  EXPECT_EQ(z.dtype(), mg::f32);  // the default dtype, as in torch
  EXPECT_EQ(z.to_xtensor<float>(), xt::xarray<float>(xt::zeros<float>({2, 3})));
  const tensor o = mg::ones({4}, {.dtype = mg::f64, .requires_grad = true});
  EXPECT_TRUE(o.requires_grad());
  EXPECT_TRUE(o.is_leaf());
  EXPECT_DOUBLE_EQ(o.sum().item<double>(), 4.0);
  const tensor f = mg::full({2, 2}, -1.5, {.dtype = mg::f64});
  EXPECT_EQ(f.to_xtensor<double>(),
            xt::xarray<double>(xt::full_like(xt::xarray<double>({{0., 0.}, {0., 0.}}), -1.5)));
  EXPECT_EQ(mg::zeros({0, 3}).numel(), 0);
  EXPECT_DOUBLE_EQ(mg::zeros({0, 3}).sum().item<double>(), 0.0);
}

TEST(RuntimeTensor, RandnIsSeedableAndNormal) {
  mg::manual_seed(42);
  const auto a = mg::randn({1000}, {.dtype = mg::f64}).to_xtensor<double>();
  mg::manual_seed(42);
  const auto b = mg::randn({1000}, {.dtype = mg::f64}).to_xtensor<double>();
  EXPECT_EQ(a, b);
  const auto c = mg::randn({1000}, {.dtype = mg::f64}).to_xtensor<double>();
  EXPECT_NE(a, c);
  double mean = 0, var = 0;
  for (double v : a) mean += v / 1000;
  for (double v : a) var += (v - mean) * (v - mean) / 999;
  EXPECT_NEAR(mean, 0.0, 0.15);
  EXPECT_NEAR(var, 1.0, 0.2);
  const tensor w = mg::randn({3, 3}, {.requires_grad = true});
  EXPECT_EQ(w.dtype(), mg::f32);
  EXPECT_TRUE(w.requires_grad());
}

TEST(RuntimeTensor, XtensorRoundTrip) {
  const xt::xarray<double> a = {{1.5, -2.}, {3., 4.25}, {0., 7.}};
  const tensor t(a);
  EXPECT_EQ(t.shape(), (mg::shape_t{3, 2}));
  EXPECT_EQ(t.dtype(), mg::f64);
  EXPECT_EQ(t.to_xtensor<double>(), a);
  EXPECT_EQ(xt::xarray<double>(t), a);
  const xt::xtensor<float, 2> b = {{1.f, 2.f, 3.f}};
  const tensor u(b);
  EXPECT_EQ(u.dtype(), mg::f32);
  EXPECT_EQ(u.shape(), (mg::shape_t{1, 3}));
  EXPECT_EQ(u.to_xtensor<float>(), xt::xarray<float>(b));
  // an xtensor expression is evaluated
  const tensor e(a * 2.0 + 1.0);
  EXPECT_DOUBLE_EQ(e.to_xtensor<double>()(2, 1), 15.0);
  // a transposed view reads back in its own (logical) order
  EXPECT_EQ(mg::transpose(t).to_xtensor<double>(), xt::xarray<double>(xt::transpose(a)));
  // xtensor views: contiguous ones (at an offset) are read in place, the others element by
  // element, each in its logical order
  const xt::xarray<double> big = {{1., 2., 3.}, {4., 5., 6.}, {7., 8., 9.}};
  EXPECT_EQ(tensor(xt::view(big, xt::range(1, 3), xt::all())).to_xtensor<double>(),
            xt::xarray<double>({{4., 5., 6.}, {7., 8., 9.}}));
  EXPECT_EQ(tensor(xt::view(big, xt::all(), 1)).to_xtensor<double>(),
            xt::xarray<double>({2., 5., 8.}));
  EXPECT_EQ(tensor(xt::transpose(big)).to_xtensor<double>(),
            xt::xarray<double>(xt::transpose(big)));
  EXPECT_EQ(tensor(xt::view(big, 2, xt::range(0, 3, 2))).to_xtensor<double>(),
            xt::xarray<double>({7., 9.}));
  // to other element types, and from integer tensors
  EXPECT_EQ(t.to_xtensor<std::int64_t>()(1, 1), 4);
  EXPECT_EQ(t.to_xtensor<float>()(0, 0), 1.5f);
  const tensor ints({2, -3}, mg::i64);
  EXPECT_EQ(ints.to_xtensor<double>(), xt::xarray<double>({2., -3.}));
  EXPECT_EQ(ints.to_xtensor<std::int64_t>(), xt::xarray<std::int64_t>({2, -3}));
}

TEST(RuntimeTensor, ItemAndConversions) {
  EXPECT_DOUBLE_EQ(mg::ones({1, 1, 1}).item<double>(), 1.0);
  EXPECT_EQ(tensor(3.75, mg::f64).item<int>(), 3);
  EXPECT_EQ(tensor(2.0, mg::f64).to(mg::f32).dtype(), mg::f32);
  expect_error([] { (void)mg::ones({2}).item<double>(); }, {"item", "[2]", "2 elements"});
}

TEST(RuntimeTensor, TransposeIsAViewSharingStorage) {
  tensor m({{1., 2., 3.}, {4., 5., 6.}}, mg::f64);
  tensor t = m.t();
  EXPECT_EQ(t.shape(), (mg::shape_t{3, 2}));
  EXPECT_EQ(t.strides(), (mg::shape_t{1, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(t.contiguous().is_contiguous());
  m.add_(tensor(10.0, mg::f64));  // in place on m: visible through the view, version shared
  EXPECT_DOUBLE_EQ(t.to_xtensor<double>()(2, 1), 16.0);
  EXPECT_EQ(t.version(), m.version());
  EXPECT_EQ(mg::unsqueeze(m, 0).shape(), (mg::shape_t{1, 2, 3}));
  EXPECT_EQ(mg::unsqueeze(m, -1).shape(), (mg::shape_t{2, 3, 1}));
  // elementwise and reduction kernels read the strides
  EXPECT_EQ((t * 1.0).to_xtensor<double>(),
            (xt::xarray<double>{{11., 14.}, {12., 15.}, {13., 16.}}));
  EXPECT_EQ(t.sum(0).to_xtensor<double>(), (xt::xarray<double>{36., 45.}));
  EXPECT_EQ(exp(t).to_xtensor<double>()(1, 0), std::exp(12.0));
}

TEST(Tensor, Conveniences) {
  const mg::tensor x = mg::tensor({{1.0, 2.0}, {3.0, 4.0}}, mg::f64).requires_grad_();
  EXPECT_EQ(mg::zeros_like(x).to_xtensor<double>(), (xt::xarray<double>{{0, 0}, {0, 0}}));
  EXPECT_EQ(mg::ones_like(x).dtype(), mg::f64);
  EXPECT_FALSE(mg::ones_like(x).requires_grad());
  EXPECT_EQ(mg::full_like(x, 2.5).to_xtensor<double>()(1, 1), 2.5);
  EXPECT_EQ(mg::randn_like(x).shape(), x.shape());
  // clone: a copy of its own, recorded with the identity gradient
  mg::tensor c = mg::clone(x);
  EXPECT_NE(c.impl()->store, x.impl()->store);
  EXPECT_STREQ(c.grad_fn()->name(), "clone");
  (c * c).sum().backward();
  EXPECT_EQ(x.grad().to_xtensor<double>(), (xt::xarray<double>{{2, 4}, {6, 8}}));
  std::ostringstream os;
  os << c;
  // as torch prints: nested rows in one column width, the dtype when it is not the default
  EXPECT_EQ(os.str(),
            "tensor([[1., 2.],\n"
            "        [3., 4.]], dtype=f64, grad_fn=clone)");
  std::ostringstream big;
  big << mg::zeros({2000});
  EXPECT_EQ(big.str(), "tensor([0., 0., 0.,  ..., 0., 0., 0.])");
}

TEST(Tensor, NumbersTakeTheFloatingOperandsDtype) {
  const mg::tensor x{-1.0f, 2.0f};
  const mg::tensor w = mg::where(x > 0, 0.5, x);  // 0.5 is a float, not the condition's bool
  EXPECT_EQ(w.dtype(), mg::f32);
  EXPECT_EQ(w.to_xtensor<double>(), (xt::xarray<double>{-1.0, 0.5}));
  EXPECT_EQ(((x > 0) + 0.5).to_xtensor<double>(), (xt::xarray<double>{0.5, 1.5}));
  EXPECT_EQ((x > 0).dtype(), mg::b8);
  // an integer second argument of var is a dim, a bool is `unbiased`
  const mg::tensor m({{1.0, 2.0}, {3.0, 6.0}}, mg::f64);
  EXPECT_EQ(mg::var(m, 0).to_xtensor<double>(), (xt::xarray<double>{2.0, 8.0}));
  EXPECT_DOUBLE_EQ(mg::var(m, false).item<double>(), 3.5);
}

TEST(Tensor, TypePromotionFollowsTorch) {
  const mg::tensor f{1.0f, 2.0f}, d = mg::tensor(3.0, mg::f64),
                                  i = mg::tensor({1.0, 2.0}, mg::f64).to(mg::i64), b = f > 1.5f;
  EXPECT_EQ((f + d).dtype(), mg::f32);  // a 0-d tensor of the same category does not promote
  EXPECT_EQ((f + f.to(mg::f64)).dtype(), mg::f64);
  EXPECT_EQ((i + 2).dtype(), mg::i64);  // integers stay integers
  EXPECT_EQ((i * i).to_xtensor<double>(), (xt::xarray<double>{1.0, 4.0}));
  EXPECT_EQ(mg::maximum(i, b).dtype(), mg::i64);
  EXPECT_EQ((-i).dtype(), mg::i64);
  EXPECT_EQ((i + 2.5).dtype(), mg::f32);  // a floating number brings the default dtype
  EXPECT_EQ((i + 2.5).to_xtensor<double>(), (xt::xarray<double>{3.5, 4.5}));
  EXPECT_EQ((i / 2).dtype(), mg::f32);  // true division, as torch
  EXPECT_EQ((i / 2).to_xtensor<double>(), (xt::xarray<double>{0.5, 1.0}));
  EXPECT_EQ(mg::exp(i).dtype(), mg::f32);
  EXPECT_EQ((i > 1).dtype(), mg::b8);
  EXPECT_EQ((b + b).dtype(), mg::b8);
  EXPECT_EQ((i + f.to(mg::f64)).dtype(), mg::f64);
  EXPECT_EQ(mg::where(b, i, 0).dtype(), mg::i64);
  EXPECT_EQ((b + 0.5).dtype(), mg::f32);
  EXPECT_EQ(mg::pow(i, 2).dtype(), mg::i64);  // an integer exponent keeps integers
  EXPECT_EQ(mg::pow(i, 2).to_xtensor<double>(), (xt::xarray<double>{1.0, 4.0}));
  EXPECT_EQ(mg::pow(i, 2.0).dtype(), mg::f32);
  EXPECT_EQ(mg::sum(b).dtype(), mg::i64);  // bool sums count
  EXPECT_EQ(mg::sum(b).item<double>(), 1.0);
  EXPECT_EQ(mg::sum(i).dtype(), mg::i64);
  mg_test::expect_error([&] { (void)mg::mean(i); }, {"mean", "[2]", "floating"});
  mg::tensor j = i * 1;
  j.pow_(3.0);
  EXPECT_EQ(j.to_xtensor<double>()(1), 8.0);
}

// Note [Literal dtypes]: C++ literals follow libtorch's torch::tensor.
TEST(Tensor, LiteralsFollowLibtorch) {
  EXPECT_EQ(mg::tensor(2.0).dtype(), mg::f32);  // floating: the default dtype
  EXPECT_EQ((mg::tensor{1.0, 2.0}.dtype()), mg::f32);
  EXPECT_EQ((mg::tensor{{1.0, 2.0}, {3.0, 4.0}}.dtype()), mg::f32);
  EXPECT_EQ(mg::tensor{1.0f}.dtype(), mg::f32);
  EXPECT_EQ(mg::tensor({1, 2, 3}).dtype(), mg::i64);  // integers
  EXPECT_EQ(mg::tensor(7).dtype(), mg::i64);
  EXPECT_EQ(mg::tensor({true, false}).dtype(), mg::b8);  // bools
  // a dtype overrides it; the values are read exactly, then converted
  const mg::tensor d({0.1, 1e300}, mg::f64);
  EXPECT_EQ(d.dtype(), mg::f64);
  EXPECT_EQ(d[0].item<double>(), 0.1);
  EXPECT_EQ(d[1].item<double>(), 1e300);
  EXPECT_EQ(mg::tensor(0.1).item<double>(), static_cast<double>(0.1f));
  const mg::tensor i({{1, 2}, {3, 4}}, mg::f64);
  EXPECT_EQ(i.dtype(), mg::f64);
  EXPECT_EQ(i.shape(), (mg::shape_t{2, 2}));
  EXPECT_EQ(i[1][0].item<double>(), 3.0);
  EXPECT_EQ(mg::tensor(9007199254740993LL).item<std::int64_t>(), 9007199254740993LL);  // 2^53 + 1
  const mg::tensor b({1.5, 0.0}, mg::b8);
  EXPECT_TRUE(b[0].item<bool>());
  EXPECT_FALSE(b[1].item<bool>());
  EXPECT_EQ(mg::tensor({{{1.0}}, {{2.0}}}, mg::f64).shape(), (mg::shape_t{2, 1, 1}));
}

TEST(Tensor, PrintsAsTorchDoes) {
  const auto print = [](const mg::tensor& t) {
    std::ostringstream os;
    os << t;
    return os.str();
  };
  EXPECT_EQ(print(mg::tensor(3.5)), "tensor(3.5000)");
  EXPECT_EQ(print(mg::tensor({-1.5, 2.25})), "tensor([-1.5000,  2.2500])");
  EXPECT_EQ(print(mg::tensor({1e-5, 1.0, 3e5})), "tensor([1.0000e-05, 1.0000e+00, 3.0000e+05])");
  EXPECT_EQ(print(mg::tensor({true, false})), "tensor([ true, false])");
  EXPECT_EQ(print(mg::zeros({0, 3})), "tensor([], shape=[0,3])");
  EXPECT_EQ(print(mg::tensor(2.0, mg::f64).requires_grad_()),
            "tensor(2., dtype=f64, requires_grad=true)");
  std::vector<double> v(24);
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<double>(k);
  EXPECT_EQ(print(mg::tensor(xt::adapt(v, {2, 3, 4})).to(mg::f32)),
            "tensor([[[ 0.,  1.,  2.,  3.],\n"
            "         [ 4.,  5.,  6.,  7.],\n"
            "         [ 8.,  9., 10., 11.]],\n"
            "\n"
            "        [[12., 13., 14., 15.],\n"
            "         [16., 17., 18., 19.],\n"
            "         [20., 21., 22., 23.]]])");
  // more than 1000 elements: the first and last three of each dimension
  const std::string big = print(mg::zeros({40, 30}, {.dtype = mg::i64}));
  EXPECT_EQ(big.substr(0, 49), "tensor([[0, 0, 0,  ..., 0, 0, 0],\n        [0, 0, ");
  EXPECT_NE(big.find("        ...,\n"), std::string::npos) << big;
}

// mg::shape_t keeps six extents inline and moves longer shapes to the heap: every operation
// agrees with std::vector's, across the boundary in both directions.
TEST(TensorShape, BehavesAsAVectorInlineAndOnTheHeap) {
  std::mt19937_64 gen(11);
  for (int round = 0; round < 200; ++round) {
    mg::shape_t s;
    std::vector<std::int64_t> v;
    for (int step = 0; step < 40; ++step) {
      const auto pick = [&](std::size_t n) { return std::size_t(gen() % n); };
      const std::int64_t x = std::int64_t(gen() % 100) - 50;
      switch (pick(9)) {
        case 0:
        case 1:
          s.push_back(x), v.push_back(x);
          break;
        case 2:
          if (!v.empty()) s.pop_back(), v.pop_back();
          break;
        case 3: {
          const std::size_t at = pick(v.size() + 1), n = pick(4);
          s.insert(s.begin() + at, n, x), v.insert(v.begin() + std::ptrdiff_t(at), n, x);
          break;
        }
        case 4:
          if (!v.empty()) {
            const std::size_t at = pick(v.size()), n = pick(v.size() - at + 1);
            s.erase(s.begin() + at, s.begin() + at + n);
            v.erase(v.begin() + std::ptrdiff_t(at), v.begin() + std::ptrdiff_t(at + n));
          }
          break;
        case 5: {
          const std::size_t n = pick(10);
          s.resize(n, x), v.resize(n, x);
          break;
        }
        case 6: {  // insert a copy of part of itself
          const std::size_t at = pick(v.size() + 1), n = pick(v.size() + 1);
          s.insert(s.begin() + at, s.begin(), s.begin() + n);
          const std::vector<std::int64_t> part(v.begin(), v.begin() + std::ptrdiff_t(n));
          v.insert(v.begin() + std::ptrdiff_t(at), part.begin(), part.end());
          break;
        }
        case 7: {  // copies and moves keep the values
          mg::shape_t c = s;
          mg::shape_t m = std::move(c);
          s = m;
          mg::shape_t w;
          w = std::move(m);
          s.swap(w);
          break;
        }
        default:
          if (!v.empty()) {
            const std::size_t at = pick(v.size());
            s[at] += x, v[at] += x;
          }
      }
      ASSERT_EQ(s.size(), v.size());
      ASSERT_TRUE(std::equal(s.begin(), s.end(), v.begin(), v.end()));
      ASSERT_EQ(s, v);
      ASSERT_EQ(std::vector<std::int64_t>(s), v);
    }
  }
  const mg::shape_t a{2, 3}, b{2, 4}, c{2, 3, 1};
  EXPECT_LT(a, b);
  EXPECT_LT(a, c);
  EXPECT_NE(a, c);
  EXPECT_EQ(mg::shape_t(std::vector<std::int64_t>{2, 3}), a);
  EXPECT_EQ(mg::shape_t(3, 7), (mg::shape_t{7, 7, 7}));
}

// Tensors of more dimensions than a shape keeps inline: ops, views and their gradients.
TEST(TensorShape, TensorsOfManyDimensions) {
  const mg::shape_t eight{2, 1, 2, 1, 3, 1, 2, 2};
  const tensor x = mg::ones(eight, {.dtype = mg::f64});
  EXPECT_EQ(x.shape(), eight);
  EXPECT_EQ(x.strides(), (mg::shape_t{24, 24, 12, 12, 4, 4, 2, 1}));
  EXPECT_EQ(x.unsqueeze(0).shape(), (mg::shape_t{1, 2, 1, 2, 1, 3, 1, 2, 2}));
  EXPECT_EQ(x.squeeze().shape(), (mg::shape_t{2, 2, 3, 2, 2}));
  mg_test::check_arrays(
      [](const mg::tensor_list& t) {
        const tensor y = mg::sin(t[0] * t[1]);
        return y.permute({7, 6, 5, 4, 3, 2, 1, 0}).sum(4) * mg::cos(y.transpose(0, 7).sum(4));
      },
      {eight, {1, 1, 2, 1, 3, 1, 1, 2}});
}
