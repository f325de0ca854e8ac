// Note [View refresh]: a program of its own that applies no in-place op, so that only
// mg::autograd::increment_version can set the pointer through which a view whose base was
// written outside metagrad gets its as_strided history.
#include <gtest/gtest.h>

#include <metagrad/metagrad.hpp>

#include "support/harness_runtime.hpp"

TEST(ViewRefresh, IncrementVersionAloneRecordsTheViewsNewHistory) {
  EXPECT_EQ(mg::detail::view_refresher().load(), nullptr);  // no version has moved yet
  const mg::tensor x = mg::tensor({1., 2., 3., 4.}, mg::f64).requires_grad_();
  const mg::tensor base = x * 2.0;                   // a non-leaf base
  const mg::tensor view = mg::slice(base, 0, 1, 3);  // elements 1 and 2
  ASSERT_EQ(view.grad_fn()->name(), std::string("slice"));
  // as if base's memory had been written through a raw pointer
  mg::autograd::increment_version(base);
  EXPECT_NE(mg::detail::view_refresher().load(), nullptr);
  const mg::tensor y = (view * view).sum();  // the view is used: it reads base's new history
  EXPECT_EQ(view.grad_fn()->name(), std::string("as_strided"));
  y.backward();
  // y = sum over i in {1, 2} of (2 x_i)^2, so dy/dx_i = 8 x_i there and 0 elsewhere
  EXPECT_EQ(mg_test::values(x.grad()), (std::vector<double>{0, 16, 24, 0}));
}

// torch regenerates a view whatever op made it: an expanded view (stride 0) reads its base's new
// history as expand of as_strided of the base (as_strided alone cannot sum over the locations
// several elements share).
TEST(ViewRefresh, AnExpandedViewReadsTheBasesNewHistory) {
  const mg::tensor x = mg::tensor({1., 2.}, mg::f64).requires_grad_();
  const mg::tensor base = x * x;
  const mg::tensor view = base.expand({3, 2}).t();  // [2, 3], strides [1, 0]
  mg::autograd::increment_version(base);
  EXPECT_EQ(view.grad_fn()->name(), std::string("expand"));
  const mg::tensor w({{1., 2., 3.}, {4., 5., 6.}}, mg::f64);
  // y = sum_j x_j^2 s_j with s the row sums of w (6 and 15): dy/dx_j = 2 s_j x_j
  const auto g = mg::autograd::grad({(view * w).sum()}, {x}, {}, {.create_graph = true});
  EXPECT_EQ(mg_test::values(g[0]), (std::vector<double>{12, 60}));
  g[0].sum().backward();  // d/dx_j 2 s_j x_j = 2 s_j
  EXPECT_EQ(mg_test::values(x.grad()), (std::vector<double>{12, 30}));
}
