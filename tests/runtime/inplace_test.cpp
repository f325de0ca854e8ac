// In-place ops as torch records them (Note [In-place ops]): the result of the out-of-place op
// replaces the tensor's value and history, the version counter counts the writes, and the three
// misuses are errors (a leaf that requires grad, a saved tensor written before backward, a view
// written while recording).
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xadapt.hpp>

#include <metagrad/metagrad.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg_test::expect_error;
using mg_test::leaf;

namespace {
double at(const tensor& t, std::size_t i) { return t.to_xtensor<double>().flat(i); }
}  // namespace

TEST(InPlace, RecordedOnANonLeaf) {
  const tensor x = leaf({1.0, 2.0, 3.0});
  tensor y = x * 2.0;
  EXPECT_EQ(y.version(), 0u);
  y.add_(x).mul_(3.0);
  EXPECT_EQ(y.version(), 2u);
  EXPECT_EQ(at(y, 1), 18.0);
  EXPECT_STREQ(y.grad_fn()->name(), "mul");
  y.sum().backward();
  EXPECT_EQ(at(x.grad(), 0), 9.0);  // d/dx 3 (2x + x)
}

TEST(InPlace, BinaryWithAnOperandThatRequiresGrad) {
  const tensor x = leaf({1.0, -2.0}), w = leaf({3.0, 5.0});
  tensor a = x * 1.0;
  a.mul_(w);  // the mul node keeps a copy of a's old value (torch's original_self)
  a.div_(w * w).sub_(w);
  (a * a).sum().backward();
  // a = x / w - w; d/dx = 2 a / w, d/dw = 2 a (-x / w^2 - 1)
  for (std::size_t i = 0; i < 2; ++i) {
    const double xi = at(x, i), wi = at(w, i), ai = xi / wi - wi;
    EXPECT_NEAR(at(x.grad(), i), 2 * ai / wi, 1e-14);
    EXPECT_NEAR(at(w.grad(), i), 2 * ai * (-xi / (wi * wi) - 1), 1e-14);
  }
}

TEST(InPlace, UnaryFormsAndSecondOrder) {
  const tensor x = leaf({0.5, -1.0});
  tensor y = x * 1.0;
  y.exp_();
  const auto g = mg::autograd::grad({y.sum()}, {x}, {}, {.create_graph = true});
  EXPECT_NEAR(at(g[0], 1), std::exp(-1.0), 1e-15);
  g[0].sum().backward();
  EXPECT_NEAR(at(x.grad(), 0), std::exp(0.5), 1e-15);  // d2/dx2 exp = exp

  tensor z = x * 1.0;
  z.sigmoid_().relu_().clamp_(0.0, 0.5).sqrt_();
  const double s = 1 / (1 + std::exp(1.0));
  EXPECT_NEAR(at(z, 1), std::sqrt(s), 1e-15);
  EXPECT_NEAR(at(z, 0), std::sqrt(0.5), 1e-15);  // sigmoid(0.5) > 0.5: clamped
  tensor u = x * 1.0;
  u.neg_().abs_().pow_(3.0).log_().tanh_().sin_().cos_();
  EXPECT_NEAR(at(u, 0), std::cos(std::sin(std::tanh(std::log(0.125)))), 1e-15);
}

TEST(InPlace, WritesThroughViewsAreRecorded) {
  // torch's CopySlices: the base gets the old value outside the view, the result inside
  const tensor x = leaf({1.0, 2.0});
  tensor h = x * 1.0;
  tensor first = h[0];
  first.mul_(3.0);
  EXPECT_EQ(at(h, 0), 3.0);
  EXPECT_STREQ(h.grad_fn()->name(), "copy_slices");
  const auto g = mg::autograd::grad({(h * h).sum()}, {x}, {}, {.create_graph = true});
  EXPECT_EQ(at(g[0], 0), 18.0);  // d/dx0 (3 x0)^2
  EXPECT_EQ(at(g[0], 1), 4.0);
  (g[0] * g[0]).sum().backward();  // d/dx0 (18 x0)^2 = 648 x0
  EXPECT_EQ(at(x.grad(), 0), 648.0);
  EXPECT_EQ(first.item<double>(), 3.0);

  // filling a buffer row by row
  tensor buf = mg::zeros({2, 2}, {.dtype = mg::f64});
  buf[0].copy_(x);
  buf[1].copy_(x * x);
  EXPECT_TRUE(buf.requires_grad());
  const tensor y = leaf({1.0, 2.0});
  const auto gy = mg::autograd::grad({(buf * y).sum()}, {x});
  EXPECT_EQ(at(gy[0], 1), 2.0 + 2 * 2.0 * 2.0);  // y1 + 2 x1 y1
  // the view read after the write sees the new history
  tensor c = x * 1.0;
  tensor col = c.unsqueeze(1).select(1, 0);
  col.add_(x);
  const auto gc = mg::autograd::grad({(col * col).sum()}, {x});
  EXPECT_EQ(at(gc[0], 1), 2 * 4.0 * 2.0);  // d/dx (2x)^2 = 8x
}

TEST(InPlace, CopyFillZero) {
  const tensor x = leaf({1.0, 2.0});
  tensor a = mg::zeros({2, 2}, {.dtype = mg::f64});
  a.copy_(x);  // broadcast into a, recorded: a now depends on x
  EXPECT_TRUE(a.requires_grad());
  (a * a).sum().backward();
  EXPECT_EQ(at(x.grad(), 1), 8.0);  // two rows of 2 x
  a.detach().fill_(7.0);
  EXPECT_EQ(at(a, 3), 7.0);
  tensor b = mg::ones({3});
  b.zero_();
  EXPECT_EQ(b.sum().item<double>(), 0.0);
  EXPECT_EQ(b.version(), 1u);
}

TEST(InPlace, IntegerTensors) {
  tensor i = tensor({1.0, 2.0}, mg::f64).to(mg::i64);
  i.add_(2.0).mul_(3.0);
  EXPECT_EQ(i.dtype(), mg::i64);
  EXPECT_EQ(i.to_xtensor<double>()(1), 12.0);
  expect_error([&] { i.add_(0.5); }, {"add_", "i64", "f32"});
  expect_error([&] { i.div_(2.0); }, {"div_", "i64", "f32"});  // true division, as torch
  expect_error([&] { i.exp_(); }, {"exp_", "i64"});
}

TEST(InPlace, Errors) {
  tensor x = leaf({1.0, 2.0});
  expect_error([&] { x.add_(1.0); }, {"add_", "leaf", "requires grad", "no_grad_guard"});
  {
    mg::no_grad_guard ng;
    x.sub_(1.0);  // an optimiser step
  }
  EXPECT_EQ(x.version(), 1u);
  EXPECT_EQ(at(x, 1), 1.0);

  tensor y = mg::exp(x);  // exp saves its output
  y.add_(1.0);
  expect_error([&] { y.sum().backward(); },
               {"modified by an in-place operation", "exp", "version 1", "expected version 0"});

  tensor first = x[0];  // a view of a leaf that requires grad
  expect_error([&] { first.mul_(2.0); }, {"mul_", "view", "leaf", "requires grad"});
  tensor quiet;
  {
    mg::no_grad_guard ng;
    quiet = x[1];  // taken without recording, still a view of the leaf
  }
  expect_error([&] { quiet.fill_(0.0); }, {"fill_", "view", "leaf"});
  tensor small = x * 1.0;
  expect_error([&] { small.add_(mg::ones({3, 2}, {.dtype = mg::f64})); }, {"add_", "[3,2]", "[2]"});
}

TEST(InPlace, CopyOfALeafAndMixedDtypes) {
  const tensor x = leaf({1.0, 2.0, 3.0}), w = leaf({4.0, 5.0, 6.0});
  tensor a = mg::zeros({3}, {.dtype = mg::f64});
  a.copy_(x);  // same shape and dtype: the history still points to x
  (a * w).sum().backward();
  EXPECT_EQ(at(x.grad(), 2), 6.0);

  const tensor f = tensor{1.0f, 2.0f}.requires_grad_();
  tensor h = f * 1.0f;
  h.mul_(tensor({3.0, 4.0},
                mg::f64));  // an f64 operand: the result is converted back to f32, recorded
  EXPECT_EQ(h.dtype(), mg::f32);
  h.sum().backward();
  EXPECT_EQ(f.grad().dtype(), mg::f32);
  EXPECT_EQ(at(f.grad(), 1), 4.0);
}

TEST(InPlace, OverlapExpandedViewsAndStaleViews) {
  tensor m({{1.0, 2.0}, {3.0, 4.0}}, mg::f64);
  m.copy_(m.t());  // the source is copied first
  EXPECT_EQ(m.to_xtensor<double>(), (xt::xarray<double>{{1.0, 3.0}, {2.0, 4.0}}));
  tensor e = mg::zeros({3}).expand({2, 3});
  expect_error([&] { e.add_(1.0); }, {"add_", "expanded view", "clone()"});
  // a view used after its base was written in place reads the base's new history (torch
  // regenerates views), so the gradient is 2, not the stale 1
  const tensor x = leaf({1.0, 2.0});
  tensor h = x * 1.0;
  const tensor v = h.unsqueeze(0), row = h.reshape({1, 2})[0];
  h.mul_(2.0);
  (v.sum() + row.sum()).backward();
  EXPECT_EQ(at(x.grad(), 1), 4.0);
  // ... and so does an expanded view (expand of as_strided)
  tensor k = x * 1.0;
  const tensor ke = k.expand({3, 2});
  k.mul_(2.0);
  ke.sum().backward();
  EXPECT_EQ(at(x.grad(), 1), 4.0 + 6.0);  // 4 from above, then 3 rows of 2 x
}

// torch: fill_ (and copy_ of a value that needs no grad) on a tensor that requires grad is
// recorded (FillBackward, CopyBackwards): the tensor still requires grad, its old value gets a
// zero gradient, and a view made before the write reads the new history (as_strided of it), so
// its gradient is 0, not the old history's.
TEST(InPlace, FillAndCopyOfATensorThatRequiresGradAreRecorded) {
  const double x0 = 0.27853384955004801;
  const tensor x = tensor(x0, mg::f64).requires_grad_();
  tensor v1 = x + x;
  const tensor v2 = v1.reshape({1}), v3 = v1.unsqueeze(0);
  v1.fill_(0.0);
  EXPECT_TRUE(v1.requires_grad());
  EXPECT_STREQ(v1.grad_fn()->name(), "fill");
  EXPECT_TRUE(v2.requires_grad());
  EXPECT_STREQ(v2.grad_fn()->name(), "as_strided");
  (mg::sum(v2 * 0.6885) + mg::sum(v3 * 0.3)).backward();
  ASSERT_TRUE(x.grad().defined());  // zeros, as torch's FillBackward gives
  EXPECT_EQ(x.grad().item<double>(), 0.0);

  // a constant written through a view, then filled: the view's history is the fill's
  const tensor y = tensor(x0, mg::f64).requires_grad_();
  tensor c(1.0328, mg::f64);
  tensor w = c.reshape({1});
  w.add_(y);
  EXPECT_TRUE(c.requires_grad());
  c.fill_(0.0);
  EXPECT_TRUE(c.requires_grad());
  mg::sum(w * 0.6885).backward();
  EXPECT_EQ(y.grad().item<double>(), 0.0);

  // copy_ of a constant: CopyBackwards; second order through create_graph: the filled value 2
  // times x^2 is the only term (d/dx 2 x^2 = 4 x, d2/dx2 = 4)
  const tensor z = tensor(x0, mg::f64).requires_grad_();
  tensor h = z * z;
  const tensor hv = h.unsqueeze(0);
  h.copy_(tensor(2.0, mg::f64));
  EXPECT_STREQ(h.grad_fn()->name(), "copy");
  const auto g = mg::autograd::grad({mg::sum(hv * z * z)}, {z}, {}, {.create_graph = true});
  EXPECT_DOUBLE_EQ(g[0].item<double>(), 4 * x0);
  g[0].backward();
  EXPECT_EQ(z.grad().item<double>(), 4.0);
}

// torch: a view is regenerated after its base was written in place whatever op made it: an
// expand view (stride 0) made while the base needed no grad sees the base's new value and
// history (metagrad: expand of as_strided of the base). expand saves only its input's shape.
TEST(InPlace, ExpandViewsReadTheBasesNewHistory) {
  const double x0 = 0.27853384955004801;
  const tensor x = tensor(x0, mg::f64).requires_grad_();
  tensor c({1.0328}, mg::f64);
  const tensor v2 = x + c;
  const tensor v3 = mg::expand(c, {2});  // no grad yet: nothing saved
  c.add_(v2);                            // c = 2 c0 + x
  const double c1 = 1.0328 + (x0 + 1.0328);
  EXPECT_EQ(mg_test::values(v3), (std::vector<double>{c1, c1}));
  EXPECT_TRUE(v3.requires_grad());
  EXPECT_STREQ(v3.grad_fn()->name(), "expand");
  (mg::sum(c * tensor({0.5}, mg::f64)) + mg::sum(v3 * tensor({0.3, -0.2}, mg::f64))).backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 0.5 + 0.3 - 0.2);

  // expanded then transposed, of a base that requires grad; second order: k = x^3 after the
  // write, L = sum(W^T * k expanded) = sum_j s_j x_j^3 with s the column sums of W
  const tensor xs = leaf({0.5, -1.25});
  tensor k = xs * xs;
  const tensor kt = k.expand({3, 2}).t();  // [2, 3], strides [1, 0]
  k.mul_(xs);
  const tensor wt({{0.3, 0.1, -0.5}, {-0.2, 0.7, 0.4}}, mg::f64);
  const double s[2] = {0.3 + 0.1 - 0.5, -0.2 + 0.7 + 0.4};
  const auto g = mg::autograd::grad({mg::sum(kt * wt)}, {xs}, {}, {.create_graph = true});
  for (std::size_t j = 0; j < 2; ++j)
    EXPECT_DOUBLE_EQ(at(g[0], j), 3 * s[j] * at(xs, j) * at(xs, j));
  mg::sum(g[0]).backward();
  for (std::size_t j = 0; j < 2; ++j) EXPECT_DOUBLE_EQ(at(xs.grad(), j), 6 * s[j] * at(xs, j));
}

// torch: copy_ saves no tensor (CopyBackwards needs only the source's shape), so a source that
// is a view of the destination, broadcast or not, is no version error.
TEST(InPlace, CopyFromAViewOfItself) {
  const tensor x = leaf({0.27853384955004801});
  tensor v1 = x + x;
  const tensor v2 = v1.select(0, 0);  // 0-d: broadcast back into v1
  v1.copy_(v2);
  mg::sum(v1 * 0.5).backward();
  EXPECT_EQ(at(x.grad(), 0), 1.0);

  const tensor y = leaf({1.032797232769795, 1.0738368599694894});
  tensor u = mg::index_select(y, 0, {0, 1, 0});
  const tensor u0 = mg::slice(u, 0, 0, 1, 1);
  const tensor twice = u0 + u0;  // made before the write: 2 y0
  u.copy_(u0);                   // u = [y0, y0, y0]
  EXPECT_EQ(mg_test::values(u), (std::vector<double>{at(y, 0), at(y, 0), at(y, 0)}));
  (mg::sum(u * tensor({0.25, -0.23, -0.4}, mg::f64)) + mg::sum(twice * -0.88)).backward();
  EXPECT_DOUBLE_EQ(at(y.grad(), 0), 0.25 - 0.23 - 0.4 - 2 * 0.88);
  EXPECT_EQ(at(y.grad(), 1), 0.0);
}

// A view whose base no longer requires grad when it is used after a write of the base (detach_(),
// then the write) has no history: the gradient does not reach the old one.
TEST(InPlace, AViewOfABaseThatStoppedRequiringGradLosesItsHistory) {
  const tensor x = leaf({1.0, 2.0});
  tensor h = x * 3.0;
  const tensor v = h.unsqueeze(0);
  h.detach_();
  h.mul_(2.0);
  EXPECT_FALSE(v.requires_grad());
  EXPECT_EQ(v.grad_fn(), nullptr);
  (mg::sum(v) + mg::sum(x)).backward();
  EXPECT_EQ(mg_test::values(x.grad()), (std::vector<double>{1, 1}));
}

TEST(InPlace, MaxOfNaNSendsTheGradientToTheNaN) {
  const tensor x = leaf({1.0, std::nan(""), 3.0});
  mg::max(x).backward();
  EXPECT_EQ(at(x.grad(), 1), 1.0);
  EXPECT_EQ(at(x.grad(), 2), 0.0);
}

// Note [Multi-output views]: the outputs of unbind, split and chunk (and views of them) cannot be
// written in place while the write is recorded, as in torch.
TEST(InPlace, MultiOutputViewsRefuseRecordedWrites) {
  const tensor x = leaf({1.0, 2.0, 3.0, 4.0, 5.0, 6.0});
  tensor y = x * 1.0;
  const tensor m = y.view({2, 3});
  auto rows = m.unbind();
  expect_error([&] { rows[1].mul_(2.0); },
               {"mul_", "output 1 of unbind", "[3]",
                "This view is the output of a function that returns multiple views", "out-of-place",
                "clone()"});
  auto pieces = mg::split(m, {1, 2}, 1);
  expect_error([&] { pieces[1].zero_(); }, {"fill_", "output 1 of split", "[2,2]"});
  auto halves = y.chunk(2);
  expect_error([&] { halves[0].copy_(mg::zeros({3}, {.dtype = mg::f64})); },
               {"copy_", "output 0 of chunk", "[3]"});
  // a view of an output inherits the rule
  expect_error([&] { rows[0].slice(0, 1).add_(1.0); }, {"add_", "output 0 of unbind", "[2]"});
  expect_error(
      [&] {
        tensor e = pieces[1][0];
        e.exp_();
      },
      {"exp_", "output 1 of split", "[2]"});
  // the outputs of a leaf that requires grad: this rule, not the view-of-a-leaf one, as torch
  auto leaf_rows = x.view({3, 2}).unbind();
  expect_error([&] { leaf_rows[2].neg_(); }, {"neg_", "output 2 of unbind"});
  // nothing was written
  EXPECT_EQ(y.version(), 0u);
  EXPECT_EQ(mg_test::values(y), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // a base that does not require grad, written with a value that does: recorded, so refused
  tensor z = mg::zeros({2, 2}, {.dtype = mg::f64});
  const tensor w = leaf({7.0, 8.0});
  auto zr = z.unbind(1);
  expect_error([&] { zr[1].copy_(w); }, {"copy_", "output 1 of unbind"});
  expect_error([&] { zr[0].mul_(w); }, {"mul_", "output 0 of unbind"});
  // the outputs themselves are usable, and so is a clone() of one
  tensor c = rows[1].clone();
  c.mul_(2.0);
  (c.sum() + halves[1].sum()).backward();
  EXPECT_EQ(mg_test::values(x.grad()), (std::vector<double>{0, 0, 0, 3, 3, 3}));
}

TEST(InPlace, EveryInPlaceOpChecksMultiOutputViews) {
  const tensor x = leaf({0.5, 0.25, 0.75, 0.125});
  const tensor other = mg::full({2}, 0.5, {.dtype = mg::f64});
  const std::vector<std::pair<const char*, std::function<void(tensor&)>>> ops = {
      {"add_", [&](tensor& t) { t.add_(other); }},   {"add_", [](tensor& t) { t.add_(1.0); }},
      {"sub_", [&](tensor& t) { t.sub_(other); }},   {"sub_", [](tensor& t) { t.sub_(1.0); }},
      {"mul_", [&](tensor& t) { t.mul_(other); }},   {"mul_", [](tensor& t) { t.mul_(2.0); }},
      {"div_", [&](tensor& t) { t.div_(other); }},   {"div_", [](tensor& t) { t.div_(2.0); }},
      {"pow_", [](tensor& t) { t.pow_(2.0); }},      {"copy_", [&](tensor& t) { t.copy_(other); }},
      {"fill_", [](tensor& t) { t.zero_(); }},       {"fill_", [](tensor& t) { t.fill_(1.0); }},
      {"clamp_", [](tensor& t) { t.clamp_(0, 1); }}, {"neg_", [](tensor& t) { t.neg_(); }},
      {"exp_", [](tensor& t) { t.exp_(); }},         {"log_", [](tensor& t) { t.log_(); }},
      {"sqrt_", [](tensor& t) { t.sqrt_(); }},       {"abs_", [](tensor& t) { t.abs_(); }},
      {"sin_", [](tensor& t) { t.sin_(); }},         {"cos_", [](tensor& t) { t.cos_(); }},
      {"tanh_", [](tensor& t) { t.tanh_(); }},       {"sigmoid_", [](tensor& t) { t.sigmoid_(); }},
      {"relu_", [](tensor& t) { t.relu_(); }}};
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    tensor y = x * 1.0;
    auto parts = y.split(2);
    expect_error([&] { op(parts[1]); }, {name, "output 1 of split"});
    EXPECT_EQ(y.version(), 0u);
    mg::no_grad_guard off;
    op(parts[1]);  // not recorded: allowed
    EXPECT_EQ(y.version(), 1u);
  }
}

TEST(InPlace, MultiOutputViewsAllowWritesThatAreNotRecorded) {
  // under no_grad: the write reaches the base, as an optimiser step does
  const tensor w = leaf({1.0, 2.0, 3.0, 4.0});
  auto rows = w.view({2, 2}).unbind();
  {
    mg::no_grad_guard off;
    rows[0].sub_(1.0);
    rows[0].mul_(10.0);  // twice: still allowed
  }
  EXPECT_EQ(mg_test::values(w), (std::vector<double>{0, 10, 3, 4}));
  EXPECT_EQ(w.version(), 2u);
  (w * w).sum().backward();  // the base itself carries on
  EXPECT_EQ(mg_test::values(w.grad()), (std::vector<double>{0, 20, 6, 8}));
  // nothing requires grad: allowed in grad mode too
  tensor z = mg::zeros({2, 3}, {.dtype = mg::f64});
  auto cols = mg::chunk(z, 3, 1);
  cols[2].fill_(5.0);
  cols[0][1].add_(2.0);
  EXPECT_EQ(mg_test::values(z), (std::vector<double>{0, 0, 5, 2, 0, 5}));
}

TEST(InPlace, MultiOutputViewsCannotFollowAWriteToTheirBase) {
  // torch's indirect case: the base (or another view of it) was written after the views were
  // made; using one of them in grad mode is an error
  const tensor x = leaf({1.0, 2.0, 3.0, 4.0});
  tensor y = x * 1.0;
  auto parts = y.chunk(2);
  y.mul_(2.0);
  expect_error([&] { (void)(parts[1] * 1.0); },
               {"chunk: output 1", "[2]", "has been modified inplace", "clone()"});
  // written under no_grad through one output: the other is refused in grad mode, and the
  // written one too (its history no longer matches its elements)
  tensor h = x * 1.0;
  auto rows = h.view({2, 2}).unbind();
  {
    mg::no_grad_guard off;
    rows[0].add_(1.0);
    EXPECT_EQ(mg_test::values(rows[1] * 1.0), (std::vector<double>{3, 4}));  // not recorded
  }
  expect_error([&] { (void)rows[1].sum(); }, {"unbind: output 1", "has been modified inplace"});
  expect_error([&] { (void)rows[0].grad_fn(); }, {"unbind: output 0", "has been modified inplace"});
  // clones taken before the write are unaffected
  tensor k = x * 1.0;
  const tensor kept = k.unbind()[3].clone();
  k.zero_();
  kept.backward();
  EXPECT_EQ(mg_test::values(x.grad()), (std::vector<double>{0, 0, 0, 1}));
}

// Note [Direct in-place writes]: with nothing to record, one kernel writes the tensor's own
// elements (a view's too): no temporary, the same storage, the version moved once.
TEST(InPlaceDirect, WritesAStridedViewWithNoTemporary) {
  mg::no_grad_guard off;
  tensor m = mg::zeros({512, 512}, {.dtype = mg::f64});
  m.fill_(1.0);
  tensor col = m.select(1, 3);  // strides [512]
  const void* data = m.impl()->store->data;
  const auto v0 = m.version();
  mg::cpu::reset_peak_memory_stats();
  const std::size_t held = mg::cpu::memory_allocated();
  col.mul_(3.0).add_(0.5);
  m.mul_(2.0);
  EXPECT_EQ(mg::cpu::max_memory_allocated(), held);  // no byte allocated on the way
  EXPECT_EQ(m.impl()->store->data, data);
  EXPECT_EQ(m.version(), v0 + 3);
  EXPECT_EQ(at(m, 3), 7.0);  // (1 * 3 + 0.5) * 2
  EXPECT_EQ(at(m, 4), 2.0);
  EXPECT_EQ(at(m, 512 + 3), 7.0);  // every row of the column
}

TEST(InPlaceDirect, BroadcastOperandIntoATransposedView) {
  mg::no_grad_guard off;
  const tensor a = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, mg::f64);
  tensor b = a.clone();
  tensor bt = b.t();                       // [3, 2], strides [1, 3]
  bt.add_(tensor({10.0, 20.0}, mg::f32));  // an f32 row, converted to f64 and broadcast
  EXPECT_EQ(bt.dtype(), mg::f64);
  EXPECT_EQ(b.to_xtensor<double>(), (xt::xarray<double>{{11.0, 12.0, 13.0}, {24.0, 25.0, 26.0}}));
  tensor c = a.clone();
  c.mul_(c);  // the tensor itself, read at its own elements
  EXPECT_EQ(c.to_xtensor<double>(), (xt::xarray<double>{{1.0, 4.0, 9.0}, {16.0, 25.0, 36.0}}));
}

TEST(InPlaceDirect, OverlapDtypeAndDeviceTakeTheGeneralPath) {
  mg::no_grad_guard off;
  tensor s = tensor({{1.0, 2.0}, {3.0, 4.0}}, mg::f64);
  s.add_(s.t());  // overlapping other than element for element: the old values are read
  EXPECT_EQ(s.to_xtensor<double>(), (xt::xarray<double>{{2.0, 5.0}, {5.0, 8.0}}));
  tensor i = tensor({1, 2, 3});
  i.add_(2);  // an integer tensor stays one
  EXPECT_EQ(i.dtype(), mg::i64);
  EXPECT_EQ(i.to_xtensor<double>(), (xt::xarray<double>{3.0, 4.0, 5.0}));
  tensor f = tensor({1.0, 2.0});              // f32
  f.add_(tensor({1.0, 1.0 / 3.0}, mg::f64));  // computed in f64, then rounded, as torch does
  EXPECT_EQ(f.dtype(), mg::f32);
  EXPECT_EQ(f.to_xtensor<float>()(1), static_cast<float>(2.0 + 1.0 / 3.0));
  expect_error([&] { i.add_(tensor({0.5, 0.5, 0.5})); }, {"add_", "the result is f32"});
  tensor g = tensor({1.0, 2.0});
  g.mul_(tensor(2.5, mg::f64));  // a 0-d operand does not promote
  EXPECT_EQ(g.dtype(), mg::f32);
  EXPECT_EQ(at(g, 1), 5.0);
}

TEST(InPlaceDirect, CopyFillAndZeroInOnePass) {
  mg::no_grad_guard off;
  tensor m = mg::zeros({4, 6});
  tensor rows = m.slice(0, 1, 3);  // rows 1 and 2, contiguous at an offset
  rows.copy_(tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, mg::f64));  // converted and broadcast
  EXPECT_EQ(at(m, 6), 1.0);
  EXPECT_EQ(at(m, 17), 6.0);
  EXPECT_EQ(at(m, 18), 0.0);
  tensor cols = m.slice(1, 2, 4);  // strided
  cols.fill_(-1.0);
  EXPECT_EQ(at(m, 2), -1.0);
  EXPECT_EQ(at(m, 3), -1.0);
  EXPECT_EQ(at(m, 4), 0.0);
  EXPECT_EQ(at(m, 9), -1.0);
  rows.zero_();
  EXPECT_EQ(m.sum().item<double>(), -4.0);  // the four cells of rows 0 and 3 in the columns
  tensor flags = tensor({1, 0, 1});
  flags.fill_(7.9);  // converted as torch converts: truncated toward zero
  EXPECT_EQ(flags.to_xtensor<double>(), (xt::xarray<double>{7.0, 7.0, 7.0}));
}

TEST(InPlaceDirect, GradModeWithNothingToRecordWritesDirectly) {
  tensor w = mg::full({1000}, 1.0, {.requires_grad = true});
  tensor g = mg::full({1000}, 0.5);
  {
    mg::no_grad_guard off;  // an optimiser step: a leaf that requires grad, written directly
    w.sub_(g * 0.1);
  }
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(w.grad_fn(), nullptr);
  EXPECT_NEAR(at(w, 999), 0.95, 1e-7);
  tensor plain = mg::full({1000}, 2.0);  // grad mode on, nothing requires grad
  plain.mul_(g);
  EXPECT_EQ(plain.grad_fn(), nullptr);
  EXPECT_EQ(at(plain, 0), 1.0);
}
