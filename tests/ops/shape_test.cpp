// The shape, indexing and linear-algebra families through the one harness (arrays only: a
// reshaped number is not meaningful), then their semantics on known values: views share storage
// and version counter, indices accumulate, errors name the op and the valid range.
#include <metagrad/tensor_xtensor.hpp>
#include "support/expect_ad.hpp"

using mg::tensor;
using mg_test::expect_ad;

const mg_test::ad_options arrays{.scalar = false};

TEST(Shape, Expand) {
  expect_ad(
      [](auto x) {
        return mg::expand(x, {4, 2, 3}) * 2;
      },
      {.shapes = {{2, 1}}, .scalar = false});
}
TEST(Shape, SumTo) {
  expect_ad([](auto x) { return mg::sum_to(x * x, {1, 3}); }, arrays);
}
TEST(Shape, Unsqueeze) {
  expect_ad([](auto x) { return mg::unsqueeze(x, 1) * x; }, arrays);
}
TEST(Shape, Transpose) {
  expect_ad([](auto x) { return mg::transpose(x) * 2; }, {.shapes = {{2, 3, 4}}, .scalar = false});
}
TEST(Shape, TransposeDims) {
  expect_ad([](auto x) { return mg::transpose(x * x, 0, 2); },
            {.shapes = {{2, 3, 4}}, .scalar = false});
}
TEST(Shape, Permute) {
  expect_ad(
      [](auto x) {
        return mg::permute(x * x, {2, 0, 1});
      },
      {.shapes = {{2, 3, 4}}, .scalar = false});
}
TEST(Shape, Reshape) {
  expect_ad([](auto x) { return mg::reshape(x * x, {3, -1}) * 2; }, arrays);
}
TEST(Shape, ReshapeOfTransposeCopies) {
  expect_ad([](auto x) { return mg::reshape(mg::transpose(x), {-1}) * mg::reshape(x, {6}); },
            arrays);
}
TEST(Shape, View) {
  expect_ad([](auto x) { return mg::view(x * x, {6}); }, arrays);
}
TEST(Shape, Flatten) {
  expect_ad([](auto x) { return mg::flatten(x * x, 1); }, {.shapes = {{2, 3, 2}}, .scalar = false});
}
TEST(Shape, Squeeze) {
  expect_ad([](auto x) { return mg::squeeze(x * x) + mg::squeeze(x, 1); },
            {.shapes = {{3, 1}}, .scalar = false});
}
TEST(Indexing, Slice) {
  expect_ad([](auto x) { return mg::slice(x * x, 1, 1, 6, 2); },
            {.shapes = {{2, 5}}, .scalar = false});
}
TEST(Indexing, SliceNegative) {
  expect_ad([](auto x) { return mg::slice(x * x, 0, -2) * 2; },
            {.shapes = {{3, 2}}, .scalar = false});
}
TEST(Indexing, Select) {
  expect_ad([](auto x) { return mg::select(x * x, 1, -1) * 3; }, arrays);
}
// Note [Fixed indices]: the dimension and bounds as template arguments
TEST(Indexing, FixedSlice) {
  expect_ad([](auto x) { return mg::slice<1, 1, 4>(x * x) * 2; },
            {.shapes = {{2, 5}}, .scalar = false});
}
TEST(Indexing, FixedSelect) {
  expect_ad([](auto x) { return mg::select<1, -1>(x * x) * 3; }, arrays);
}
TEST(Indexing, IndexSelectRepeats) {
  expect_ad([](auto x) { return mg::index_select(x * x, 1, {2, 0, 2, 2}); }, arrays);
}
TEST(Indexing, Cat) {
  expect_ad([](auto a, auto b) { return mg::cat(std::tuple{a * b, b}, 0); }, arrays);
}
TEST(Indexing, CatAlongLastDim) {
  expect_ad(
      [](auto a, auto b) {
        return mg::cat(std::tuple{a, a * b}, -1);
      },
      {.shapes = {{2, 3}, {2, 1}}, .scalar = false});
}
TEST(Indexing, Stack) {
  expect_ad([](auto a, auto b) { return mg::stack(std::tuple{a, a * b}, 1); }, arrays);
}
TEST(Linalg, Matmul) {
  expect_ad([](auto a, auto b) { return mg::matmul(a, b); },
            {.shapes = {{2, 3}, {3, 4}}, .scalar = false, .device = false});
}
TEST(Linalg, MatmulVectorMatrix) {
  expect_ad([](auto a, auto b) { return mg::matmul(a, b); },
            {.shapes = {{3}, {3, 4}}, .scalar = false, .device = false});
}
TEST(Linalg, MatmulMatrixVector) {
  expect_ad([](auto a, auto b) { return mg::matmul(a, b); },
            {.shapes = {{2, 3}, {3}}, .scalar = false, .device = false});
}
TEST(Linalg, MatmulVectors) {
  expect_ad([](auto a, auto b) { return mg::matmul(a, b); },
            {.shapes = {{3}, {3}}, .scalar = false, .device = false});
}
TEST(Linalg, MatmulBatchedBroadcast) {
  expect_ad([](auto a, auto b) { return mg::matmul(a, b); },
            {.shapes = {{2, 1, 2, 3}, {3, 3, 2}}, .scalar = false, .device = false});
}
// The static engine reads a batched operand in place: a transposed view as BLAS's 'T', one
// matrix shared by every batch (stride 0), each batch of a 4-D operand a constant stride apart.
TEST(Linalg, MatmulBatchedTransposedAndShared) {
  expect_ad([](auto a, auto b) { return mg::matmul(a, mg::transpose(b, 1, 2)); },
            {.shapes = {{2, 2, 3}, {2, 4, 3}}, .scalar = false, .device = false});
  expect_ad([](auto a, auto b) { return mg::matmul(mg::transpose(a, 1, 2), b); },
            {.shapes = {{4, 3, 2}, {1, 3, 2}}, .scalar = false, .device = false});
  expect_ad([](auto a, auto b) { return mg::matmul(a, b); },
            {.shapes = {{2, 3, 2, 3}, {2, 3, 3, 2}}, .scalar = false, .device = false});
}
TEST(Linalg, MatmulBatchedVector) {
  expect_ad([](auto a, auto b) { return mg::matmul(a, b); },
            {.shapes = {{3}, {2, 3, 2}}, .scalar = false, .device = false});
}
TEST(Linalg, Dot) {
  expect_ad([](auto a, auto b) { return mg::dot(a, b); },
            {.shapes = {{4}, {4}}, .scalar = false, .device = false});
}
TEST(Linalg, Outer) {
  expect_ad([](auto a, auto b) { return mg::outer(a, b); },
            {.shapes = {{3}, {2}}, .scalar = false, .device = false});
}

MG_TEST_ON_EACH_DEVICE(IndexingOnEveryBackend);

// The same semantics on every backend (this file is compiled into the Thrust binaries too): views
// share storage, index_select accumulates, cat joins, in-place ops are recorded, i64 and bool
// tensors keep their dtypes.
TEST_P(IndexingOnEveryBackend, ViewsIndicesAndDtypes) {
  const mg::device dev = GetParam();
  const tensor x =
      tensor(xt::xarray<double>{{0.0, 1.0, 2.0}, {3.0, 4.0, 5.0}}).to(dev).requires_grad_();
  const tensor row = x[1], col = mg::slice(x, 1, 1, {}, 1).permute({1, 0});
  EXPECT_EQ(row.impl()->store, x.impl()->store);
  EXPECT_EQ(row.device(), dev);
  EXPECT_EQ(col.to_xtensor<double>()(1, 0), 2.0);
  const tensor idx = tensor({1.0, 1.0, 0.0}, mg::f64).to(mg::i64).to(dev);
  const tensor picked = mg::index_select(x, 0, idx);
  EXPECT_EQ(picked.to_xtensor<double>()(1, 2), 5.0);
  const tensor joined = mg::cat({x, picked}, 0);
  EXPECT_EQ(joined.shape(), (mg::shape_t{5, 3}));
  tensor y = joined * 1.0;
  y.mul_(2.0).add_(1.0);  // recorded
  y.sum().backward();
  const auto g = x.grad().to_xtensor<double>();
  EXPECT_EQ(g(0, 0), 4.0);  // once in x, once picked: 2 + 2
  EXPECT_EQ(g(1, 1), 6.0);  // once in x, twice picked
  const tensor i = idx + 2;
  EXPECT_EQ(i.dtype(), mg::i64);
  EXPECT_EQ(i.device(), dev);
  EXPECT_EQ(i.to_xtensor<double>()(0), 3.0);
  const tensor b = i > 2;
  EXPECT_EQ(b.dtype(), mg::b8);
  EXPECT_EQ((b + b).dtype(), mg::b8);
  EXPECT_EQ(mg::where(b, i, 0).to_xtensor<double>()(2), 0.0);
}
