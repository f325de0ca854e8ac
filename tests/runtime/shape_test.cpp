// Semantics of the shape, indexing and linear-algebra ops on known values (torch 1.13's): views
// share storage and version counter, indices accumulate, matmul's shapes, and the errors.
#include <gtest/gtest.h>

#include <metagrad/metagrad.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;

namespace {
tensor iota(const mg::shape_t& shape) {
  std::int64_t n = 1;
  for (auto e : shape) n *= e;
  return tensor(xt::xarray<double>(xt::arange<double>(static_cast<double>(n)))).reshape(shape);
}
}  // namespace

TEST(ShapeSemantics, TransposeSwapsTheLastTwoDimensions) {
  const tensor t = mg::transpose(iota({2, 3, 4}));
  EXPECT_EQ(t.shape(), (mg::shape_t{2, 4, 3}));
  EXPECT_EQ(t.to_xtensor<double>()(1, 3, 2), 23.0);
}

TEST(ShapeSemantics, ViewsShareStorageAndVersion) {
  tensor x = iota({2, 3});
  const tensor r = x.reshape({3, 2}), s = mg::slice(x, 1, 1), row = x[1], p = x.permute({1, 0}),
               q = x.unsqueeze(0).squeeze(0), f = x.flatten(), e = x.expand({4, 2, 3});
  for (const tensor& v : {r, s, row, p, q, f, e}) {
    EXPECT_EQ(v.impl()->store, x.impl()->store);
  }
  EXPECT_EQ(row.to_xtensor<double>()(2), 5.0);
  EXPECT_EQ(s.to_xtensor<double>()(1, 0), 4.0);
  x.add_(1.0);
  EXPECT_EQ(row.version(), 1u);
  EXPECT_EQ(row.to_xtensor<double>()(2), 6.0);  // the view sees the write
  // reshape of a non-contiguous tensor copies; view refuses
  const tensor c = p.reshape({6});
  EXPECT_NE(c.impl()->store, x.impl()->store);
  EXPECT_EQ(c.to_xtensor<double>()(1), 4.0);
  EXPECT_THROW(p.view({6}), mg::error);
}

TEST(ShapeSemantics, SliceAndSelectValues) {
  const tensor x = iota({4, 5});
  const auto s = mg::slice(x, 1, 1, 5, 2).to_xtensor<double>();  // columns 1, 3
  EXPECT_EQ(s.shape()[1], 2u);
  EXPECT_EQ(s(2, 1), 13.0);
  EXPECT_EQ(mg::slice(x, 0, -10, 100).shape(), (mg::shape_t{4, 5}));  // clamped as in torch
  EXPECT_EQ(mg::slice(x, 0, 3, 1).shape(), (mg::shape_t{0, 5}));
  EXPECT_EQ(mg::select(x, 1, -1).to_xtensor<double>()(3), 19.0);
  EXPECT_EQ(x[2][3].item<double>(), 13.0);
}

TEST(ShapeSemantics, IndexSelectAccumulatesRepeatedIndices) {
  const tensor x = iota({3, 2}).requires_grad_();
  const tensor idx = tensor(xt::xarray<double>{2, 0, 2}).to(mg::i64);
  const tensor y = mg::index_select(x, 0, idx);
  EXPECT_EQ(y.to_xtensor<double>()(0, 1), 5.0);
  y.sum().backward();
  const auto g = x.grad().to_xtensor<double>();
  EXPECT_EQ(g(0, 0), 1.0);
  EXPECT_EQ(g(1, 0), 0.0);
  EXPECT_EQ(g(2, 1), 2.0);
  EXPECT_THROW(mg::index_select(x, 0, std::vector<std::int64_t>{3}), mg::error);
  EXPECT_THROW(mg::index_select(x, 0, tensor{0.0}), mg::error);  // not i64
}

TEST(ShapeSemantics, CatAndStackLists) {
  const tensor a = iota({2, 3}).requires_grad_(), b = iota({1, 3}).requires_grad_();
  const tensor c = mg::cat({a, b}, 0);
  EXPECT_EQ(c.shape(), (mg::shape_t{3, 3}));
  EXPECT_EQ(c.to_xtensor<double>()(2, 1), 1.0);
  (c * iota({3, 3})).sum().backward();
  EXPECT_EQ(a.grad().to_xtensor<double>()(1, 2), 5.0);
  EXPECT_EQ(b.grad().to_xtensor<double>()(0, 0), 6.0);
  const tensor s = mg::stack({a, a}, 1);
  EXPECT_EQ(s.shape(), (mg::shape_t{2, 2, 3}));
  EXPECT_EQ(s.to_xtensor<double>()(1, 1, 2), 5.0);
  EXPECT_THROW(mg::cat({a, iota({2, 2})}, 0), mg::error);
  EXPECT_THROW(mg::stack({a, b}, 0), mg::error);
  EXPECT_THROW(mg::cat({a, b}, 2), mg::error);
  EXPECT_THROW(mg::cat(mg::tensor_list{}, 0), mg::error);
}

TEST(ShapeSemantics, MatmulShapes) {
  const tensor m = iota({2, 3}), v = iota({3}), b = iota({4, 3, 2});
  EXPECT_EQ(mg::matmul(m, v).shape(), (mg::shape_t{2}));
  EXPECT_EQ(mg::matmul(v, b).shape(), (mg::shape_t{4, 2}));
  EXPECT_EQ(mg::matmul(m, b).shape(), (mg::shape_t{4, 2, 2}));
  EXPECT_EQ(mg::matmul(v, v).shape(), (mg::shape_t{}));
  EXPECT_EQ(mg::matmul(v, v).item<double>(), 5.0);
  EXPECT_EQ(mg::dot(v, v).item<double>(), 5.0);
  EXPECT_EQ(mg::outer(v, v).to_xtensor<double>()(2, 1), 2.0);
  EXPECT_EQ(mg::matmul(m, b).to_xtensor<double>()(0, 1, 1), 3 * 1 + 4 * 3 + 5 * 5.0);
}

TEST(ShapeErrors, NameTheOpAndTheFix) {
  const tensor x = iota({2, 3});
  mg_test::expect_error([&] { (void)x.reshape({4, -1}); }, {"reshape", "[4,-1]", "6 elements"});
  mg_test::expect_error([&] { (void)x.reshape({-1, -1}); }, {"reshape", "one dimension"});
  mg_test::expect_error([&] { (void)x.permute({0, 0}); }, {"permute", "twice"});
  mg_test::expect_error([&] { (void)x.transpose(0, 2); }, {"transpose", "dim 2", "-2 to 1"});
  mg_test::expect_error([&] { (void)x[2]; }, {"select", "index 2", "-2 to 1"});
  mg_test::expect_error([&] { (void)mg::slice(x, 1, 0, 2, 0); }, {"slice", "step"});
  mg_test::expect_error([&] { (void)mg::matmul(x, x); }, {"matmul", "[2,3]", "inner"});
  mg_test::expect_error(
      [&] {
        (void)mg::matmul(iota({2, 2, 3}), iota({3, 3, 2}));
      },
      {"matmul", "batch"});
  mg_test::expect_error([&] { (void)mg::matmul(x, x.to(mg::f32)); }, {"matmul", "f64", "f32"});
  mg_test::expect_error([&] { (void)mg::dot(iota({3}), iota({4})); }, {"dot", "lengths 3 and 4"});
  mg_test::expect_error([&] { (void)mg::dot(x, x); }, {"dot", "1-D"});
  mg_test::expect_error([&] { (void)x.expand({3, 3}); }, {"expand", "[2,3]", "[3,3]"});
  mg_test::expect_error([&] { (void)x.flatten(1, 0); }, {"flatten", "start_dim"});
}
