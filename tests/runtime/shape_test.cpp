// Semantics of the shape, indexing and linear-algebra ops on known values (torch 1.13's): views
// share storage and version counter, indices accumulate, matmul's shapes, and the errors.
#include <cmath>
#include <set>
#include <string_view>
#include <vector>

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
  EXPECT_THROW(mg::index_select(x, 0, tensor({0.0}, mg::f64)), mg::error);  // not i64
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

namespace {
std::vector<mg::shape_t> shapes_of(const mg::tensor_list& l) {
  std::vector<mg::shape_t> s;
  for (const tensor& t : l) s.push_back(t.shape());
  return s;
}
}  // namespace

TEST(SplitSemantics, UnbindGivesSelectViews) {
  tensor x = iota({2, 3});
  const mg::tensor_list rows = mg::unbind(x), cols = x.unbind(-1);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(rows[1].shape(), (mg::shape_t{3}));
  EXPECT_EQ(mg_test::values(rows[1]), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(mg_test::values(cols[2]), (std::vector<double>{2, 5}));
  for (const tensor& v : cols) EXPECT_EQ(v.impl()->store, x.impl()->store);
  x.add_(10.0);  // the views see the write and share the version counter
  EXPECT_EQ(cols[0].version(), 1u);
  EXPECT_EQ(mg_test::values(cols[0]), (std::vector<double>{10, 13}));
  EXPECT_TRUE(mg::unbind(iota({0, 2})).empty());
  EXPECT_EQ(shapes_of(mg::unbind(iota({2, 0}), 1)), std::vector<mg::shape_t>{});
}

TEST(SplitSemantics, ChunkFollowsTorchsSizes) {
  const tensor x = iota({5, 2});
  // ceil(5 / 3) = 2: pieces 2, 2, 1
  EXPECT_EQ(shapes_of(mg::chunk(x, 3)), (std::vector<mg::shape_t>{{2, 2}, {2, 2}, {1, 2}}));
  // ceil(6 / 4) = 2: three pieces, fewer than asked
  EXPECT_EQ(shapes_of(iota({6}).chunk(4)), (std::vector<mg::shape_t>{{2}, {2}, {2}}));
  // more chunks than elements: pieces of 1
  EXPECT_EQ(mg::chunk(x, 10, 0).size(), 5u);
  EXPECT_EQ(shapes_of(mg::chunk(x, 2, -1)), (std::vector<mg::shape_t>{{5, 1}, {5, 1}}));
  // an empty dimension gives `chunks` empty pieces
  EXPECT_EQ(shapes_of(iota({0, 3}).chunk(3)), (std::vector<mg::shape_t>{{0, 3}, {0, 3}, {0, 3}}));
  const auto c = mg::chunk(x, 3);
  EXPECT_EQ(mg_test::values(c[2]), (std::vector<double>{8, 9}));
  EXPECT_EQ(c[1].impl()->store, x.impl()->store);
  EXPECT_EQ(c[1].impl()->offset, 4);
}

TEST(SplitSemantics, SplitBySizeAndBySizes) {
  const tensor x = iota({2, 5});
  EXPECT_EQ(shapes_of(mg::split(x, 2, 1)), (std::vector<mg::shape_t>{{2, 2}, {2, 2}, {2, 1}}));
  EXPECT_EQ(shapes_of(x.split(7, 1)), (std::vector<mg::shape_t>{{2, 5}}));  // one piece
  EXPECT_EQ(shapes_of(x.split(1)), (std::vector<mg::shape_t>{{1, 5}, {1, 5}}));
  const auto s = mg::split(x, {1, 0, 4}, -1);
  EXPECT_EQ(shapes_of(s), (std::vector<mg::shape_t>{{2, 1}, {2, 0}, {2, 4}}));
  EXPECT_EQ(mg_test::values(s[0]), (std::vector<double>{0, 5}));
  EXPECT_EQ(mg_test::values(s[2]), (std::vector<double>{1, 2, 3, 4, 6, 7, 8, 9}));
  EXPECT_EQ(s[2].impl()->store, x.impl()->store);
  EXPECT_EQ(shapes_of(x.split(std::vector<std::int64_t>{2}, 0)),
            (std::vector<mg::shape_t>{{2, 5}}));
  // an empty dimension: split_size 0 is allowed there (one empty piece), sizes may be empty
  const tensor e = iota({3, 0});
  EXPECT_EQ(shapes_of(e.split(0, 1)), (std::vector<mg::shape_t>{{3, 0}}));
  EXPECT_EQ(shapes_of(e.split(4, 1)), (std::vector<mg::shape_t>{{3, 0}}));
  EXPECT_TRUE(e.split(std::vector<std::int64_t>{}, 1).empty());
}

TEST(SplitErrors, NameTheOpTheShapeAndTheFix) {
  const tensor x = iota({2, 5});
  mg_test::expect_error([&] { (void)mg::unbind(tensor(1.0, mg::f64)); },
                        {"unbind", "0-d", "reshape"});
  mg_test::expect_error([&] { (void)x.unbind(2); }, {"unbind", "dim 2", "[2,5]", "-2 to 1"});
  mg_test::expect_error([&] { (void)x.chunk(0); }, {"chunk", "got 0", "[2,5]", "1 or more"});
  mg_test::expect_error([&] { (void)x.chunk(-2, 1); }, {"chunk", "got -2"});
  mg_test::expect_error([&] { (void)x.chunk(2, -3); }, {"chunk", "dim -3", "[2,5]"});
  mg_test::expect_error([&] { (void)x.split(0, 1); },
                        {"split", "split_size 0", "size 5", "[2,5]", "at least 1"});
  mg_test::expect_error([&] { (void)x.split(-1); }, {"split", "split_size -1"});
  mg_test::expect_error(
      [&] {
        (void)mg::split(x, {1, 2}, 1);
      },
      {"split", "[1,2]", "sum to 3", "[2,5]", "size 5", "sum to 5"});
  mg_test::expect_error([&] { (void)mg::split(x, {6, -1}, 1); }, {"split", "[6,-1]", "negative"});
  mg_test::expect_error([&] { (void)mg::split(tensor(1.0, mg::f64), 1); }, {"split", "0-d"});
}

TEST(SplitGradients, ASubsetOfTheOutputsReachesItsPositions) {
  const tensor x = iota({3, 4}).requires_grad_();
  const auto rows = x.unbind();
  (rows[1] * rows[1]).sum().backward();  // 2 x at row 1, zeros elsewhere
  const auto g = x.grad().to_xtensor<double>();
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      EXPECT_EQ(g(i, j), i == 1 ? 2.0 * static_cast<double>(4 * i + j) : 0.0) << i << "," << j;

  const tensor y = iota({3, 4}).requires_grad_();
  const auto cols = mg::split(y, {1, 2, 1}, 1);
  (cols[2] * 3.0).sum().backward();
  (cols[0] * 5.0).sum().backward();  // the second backward accumulates into other positions
  const auto gy = y.grad().to_xtensor<double>();
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      EXPECT_EQ(gy(i, j), j == 3 ? 3.0 : j == 0 ? 5.0 : 0.0) << i << "," << j;
  EXPECT_STREQ(cols[1].grad_fn()->name(), "slice");
  EXPECT_STREQ(rows[0].grad_fn()->name(), "select");
}

TEST(SplitGradients, AgainstCentralDifferencesToSecondOrder) {
  // f64 gradients of every element against central differences, and Hessian-vector products;
  // each f uses some of the outputs only, so the others' positions get zeros
  mg_test::check_arrays(
      [](const mg::tensor_list& t) {
        const auto r = mg::unbind(t[0], 1);  // 4 x 3 -> three of shape 4
        return mg::sin(r[0]) * r[2] + mg::exp(r[2]);
      },
      {{4, 3}});
  mg_test::check_arrays(
      [](const mg::tensor_list& t) {
        const auto c = t[0].chunk(3, -1);  // 2 x 5 -> 2x2, 2x2, 2x1
        return mg::tanh(c[1]) * c[0] + c[2] * c[2];
      },
      {{2, 5}});
  mg_test::check_arrays(
      [](const mg::tensor_list& t) {
        const auto s = mg::split(t[0], {2, 1, 2}, 0);  // 5 x 2 -> 2x2, 1x2, 2x2
        const auto u = t[1].split(2);                  // 3 -> 2, 1
        return mg::cos(s[2]) * s[0] * u[0] + mg::exp(u[1]);
      },
      {{5, 2}, {3}});
  mg_test::check_arrays(
      [](const mg::tensor_list& t) {
        const auto s = t[0].split(2);  // 5 -> 2, 2, 1
        return mg::sin(s[1]) * s[1];
      },
      {{5}}, {.dtype = mg::f32});
}

TEST(SplitGradients, TangentsFollowTheViews) {
  const tensor x = iota({2, 3}), v = iota({2, 3}) * 0.5 + 1.0;
  mg::forward_ad::dual_level level;
  const tensor d = mg::forward_ad::make_dual(x, v);
  const auto rows = mg::unbind(d);
  const auto cols = mg::split(d * d, {2, 1}, 1);
  EXPECT_EQ(mg_test::values(mg::forward_ad::unpack_dual(rows[1]).tangent),
            (std::vector<double>{2.5, 3.0, 3.5}));
  EXPECT_EQ(mg_test::values(mg::forward_ad::unpack_dual(rows[0]).primal),
            (std::vector<double>{0, 1, 2}));
  // d(x^2) = 2 x v at column 2: x = 2, 5 and v = 2, 3.5
  EXPECT_EQ(mg_test::values(mg::forward_ad::unpack_dual(cols[1]).tangent),
            (std::vector<double>{8.0, 35.0}));
}

TEST(SplitGradients, GradcheckOfEveryOutput) {
  using mg::tensor_list;
  mg::manual_seed(5);
  const tensor x = mg::randn({3, 4}, {.dtype = mg::f64, .requires_grad = true});
  EXPECT_TRUE(
      mg::autograd::gradcheck([](const tensor_list& in) { return mg::unbind(in[0], 1); }, {x}));
  EXPECT_TRUE(mg::autograd::gradgradcheck(
      [](const tensor_list& in) {
        tensor_list out;
        for (const tensor& c : mg::chunk(in[0], 2)) out.push_back(mg::sin(c) * c);
        return out;
      },
      {x}));
  EXPECT_TRUE(mg::autograd::gradgradcheck(
      [](const tensor_list& in) {
        const auto s = mg::split(in[0], {1, 3}, 1);
        return tensor_list{mg::exp(s[1]), s[0] * s[0]};
      },
      {x}));
}

// sum_to of one broadcast value (every stride 0, as sum's gradient) is the value times the number
// of its copies: on f32 the same bits as summing a contiguous copy, on f64 within one rounding;
// other broadcast sources take the general sum. And the gradient of a broadcast operand of add,
// which receives sum's broadcast gradient as it is.
TEST(ShapeSemantics, SumToOfABroadcastSourceMatchesTheSum) {
  for (const mg::dtype d : {mg::f32, mg::f64}) {
    const tensor row = tensor({0.1, -2.5, 3.3}, d);
    const tensor scalar = tensor(0.7, d);
    struct check {
      tensor source;
      mg::shape_t to;
    };
    const std::vector<check> checks = {
        {mg::expand(scalar, {6, 7}), {}},          // one value, to 0-d
        {mg::expand(scalar, {6, 7}), {6, 1}},      // a kept broadcast dim
        {mg::expand(scalar, {5, 6, 7}), {7}},      // leading dims
        {mg::expand(scalar, {6, 7}).t(), {7, 1}},  // a transposed view
        {mg::expand(row, {4, 5, 3}), {3}},         // a row: the general sum
        {mg::expand(row, {4, 5, 3}), {5, 1}},
        {mg::expand(mg::unsqueeze(row, 0), {2, 3}).t(), {3, 1}},
    };
    for (const auto& c : checks) {
      SCOPED_TRACE(testing::Message() << "rank " << c.source.dim() << " to rank " << c.to.size());
      const tensor fast = mg::sum_to(c.source, c.to);
      const tensor plain = mg::sum_to(c.source.contiguous(), c.to);
      EXPECT_EQ(fast.shape(), c.to);
      EXPECT_EQ(fast.dtype(), d);
      const auto f = fast.to_xtensor<double>(), p = plain.to_xtensor<double>();
      if (d == mg::f32) {
        EXPECT_EQ(f, p);
      } else {
        for (std::size_t i = 0; i < f.size(); ++i)
          EXPECT_NEAR(f.data()[i], p.data()[i], 1e-15 * std::abs(p.data()[i]));
      }
    }
  }
  tensor x = mg::full({4, 3}, 0.5, {.dtype = mg::f64, .requires_grad = true});
  tensor b = tensor({1.0, 2.0, 3.0}, mg::f64).requires_grad_();
  (x + b).sum().backward();
  EXPECT_EQ(b.grad().to_xtensor<double>(), (xt::xarray<double>{4.0, 4.0, 4.0}));
  EXPECT_EQ(x.grad().to_xtensor<double>(), xt::ones<double>({4, 3}));
  EXPECT_EQ(x.grad().impl()->strides, (mg::shape_t{3, 1}));  // .grad is materialised
}

namespace {
// A parameter matrix read in parts many times, as a loop reads its weights: rows by select,
// pieces of a row by slice (steps 1 and 3), a column (strided), a block of columns. Each part's
// gradient goes to the buffer of the value it was cut from (Note [Gradients added where they
// land] in runtime/engine.hpp).
tensor read_in_parts(const mg::tensor_list& t) {
  const tensor& x = t[0];  // 3 x 8
  tensor total = mg::zeros({4}, {.dtype = x.dtype()});
  for (std::int64_t k = 0; k < 5; ++k) {
    const tensor w = mg::select(x, 0, k % 3);
    const tensor a = mg::slice(w, 0, 2, 6), b = mg::slice(w, 0, 1, 8, 3);
    const tensor c = mg::select(x, 1, k), d = mg::slice(x, 1, 4, 8);
    total = total + mg::sin(a) * mg::slice(w, 0, 0, 4) + mg::sum(b * b) * mg::cos(c[0]) +
            mg::sum(mg::exp(c)) + mg::sum(d * d * d, 0);
  }
  return total;
}
}  // namespace

TEST(SliceGradients, PartsOfOneValueAgainstCentralDifferences) {
  // without create_graph (the gradients added where they land), with it (the backward recorded,
  // and its derivative), and in float
  mg_test::check_arrays(read_in_parts, {{3, 8}}, {.second_order = false});
  mg_test::check_arrays(read_in_parts, {{3, 8}});
  mg_test::check_arrays(read_in_parts, {{3, 8}}, {.dtype = mg::f32, .second_order = false});
}

TEST(SliceGradients, HooksSeeTheWholeGradientAndTheSumIsTheSame) {
  // A post-hook on every slice and select node sees the gradient of the whole input (zeros
  // outside the part), as the node computes it; the gradients are the same as without hooks.
  const xt::xarray<double> x0 = {{0.3, -0.2, 0.9, 0.1, -0.7, 0.4, 0.8, -0.5},
                                 {0.6, 0.2, -0.3, -0.9, 0.5, 0.7, -0.1, 0.2},
                                 {-0.4, 0.1, 0.3, 0.6, -0.8, 0.9, 0.2, -0.6}};
  const auto gradient = [&](bool hooked, int& seen) {
    const tensor x = tensor(x0).requires_grad_();
    const tensor y = mg::sum(read_in_parts({x}));
    // every slice and select node reachable from y
    std::vector<mg::autograd::node*> stack{y.grad_fn().get()}, parts;
    std::set<mg::autograd::node*> visited;
    while (!stack.empty()) {
      mg::autograd::node* n = stack.back();
      stack.pop_back();
      if (!n || !visited.insert(n).second) continue;
      if (std::string_view(n->name()) == "slice" || std::string_view(n->name()) == "select")
        parts.push_back(n);
      for (const auto& e : n->next_functions()) stack.push_back(e.function.get());
    }
    EXPECT_GT(parts.size(), 20u);
    std::vector<mg::hook_handle> handles;
    if (hooked)
      for (mg::autograd::node* n : parts)
        handles.push_back(n->register_hook([&seen](const mg::tensor_list& gi,
                                                   const mg::tensor_list&) {
          // the input's shape: x, one of its rows or one of its columns
          const mg::shape_t s = gi[0].shape();
          EXPECT_TRUE(s == (mg::shape_t{3, 8}) || s == (mg::shape_t{8}) || s == (mg::shape_t{3}));
          ++seen;
        }));
    y.backward();
    return x.grad().to_xtensor<double>();
  };
  int seen = 0;
  const auto plain = gradient(false, seen);
  EXPECT_EQ(seen, 0);
  const auto hooked = gradient(true, seen);
  EXPECT_GT(seen, 20);
  EXPECT_EQ(plain, hooked);
}

TEST(SliceGradients, ALeafsGradientKeepsAddingInPlace) {
  // the buffer's sum becomes the leaf's .grad; a second backward adds into that same tensor
  const tensor x = mg::full({2, 6}, 0.5, {.dtype = mg::f64, .requires_grad = true});
  mg::sum(mg::slice(mg::select(x, 0, 1), 0, 1, 4) * 3.0).backward();
  const tensor g = x.grad();
  EXPECT_EQ(g.to_xtensor<double>(), (xt::xarray<double>{{0, 0, 0, 0, 0, 0}, {0, 3, 3, 3, 0, 0}}));
  mg::sum(mg::select(x, 1, 5) * 2.0 + mg::slice(mg::select(x, 0, 0), 0, 0, 2)).backward();
  EXPECT_EQ(x.grad().impl(), g.impl());
  EXPECT_EQ(g.to_xtensor<double>(), (xt::xarray<double>{{1, 1, 0, 0, 0, 2}, {0, 3, 3, 3, 0, 2}}));
}
