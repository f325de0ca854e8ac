// Anomaly detection (mg::autograd::detect_anomaly_guard): a NaN or infinity produced by a node in
// backward, and any mg::error thrown while a node runs, name the file and line of the forward
// call that recorded the node (Note [Anomaly detection], Note [Call sites]). Each test takes the
// line with __LINE__ on the line of the call, and looks for "<this file>:<line> " in the message.
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/autograd.hpp>
#include <metagrad/function.hpp>
#include <metagrad/fuse.hpp>
#include <metagrad/static.hpp>
#include <metagrad/tensor.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg::tensor_list;
using mg_test::error_of;
using mg_test::leaf;
using mg_test::values;

namespace {

const double inf = std::numeric_limits<double>::infinity();

// "file:line " of a line of this file, as the messages write a call site.
std::string here(int line) { return std::string(__FILE__) + ":" + std::to_string(line) + " "; }

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

// The call site is free where nobody reads it: the functions stay constexpr on numbers, and a
// site is one pointer.
static_assert(mg::square(3.0) == 9.0 && mg::maximum(1.0, 2.0) == 2.0);
#if defined(__cpp_lib_source_location)
static_assert(sizeof(mg::call_site) == sizeof(void*));
#endif

TEST(Anomaly, FunctionOpNamesItsLine) {
  for (int which = 0; which < 2; ++which) {
    tensor x = leaf({0.0, 1.0});
    // sqrt and log at 0: d/dx sqrt(x) = 1/(2 sqrt(x)) and d/dx log(x) = 1/x are infinite
    const auto [y, line] =
        which == 0 ? std::pair(mg::sqrt(x), __LINE__) : std::pair(mg::log(x), __LINE__);
    mg::autograd::detect_anomaly_guard anomaly;
    const std::string msg = error_of([&] { y.sum().backward(); });
    const char* name = which == 0 ? "sqrt" : "log";
    EXPECT_TRUE(contains(msg, std::string("the backward of ") + name +
                                  " returned NaN or infinite values in its gradient for input 0"))
        << msg;
    EXPECT_TRUE(
        contains(msg, std::string("the forward of ") + name + " was called at " + here(line)))
        << msg;
  }
}

TEST(Anomaly, OperatorNamesItsLine) {
  tensor a = leaf({1.0, 2.0}), b = leaf({0.0, 1.0});
  const auto [y, line] = std::pair(a / b, __LINE__);  // d/da (a/b) = 1/b: infinite at b = 0
  mg::autograd::detect_anomaly_guard anomaly;
  const std::string msg = error_of([&] { y.sum().backward(); });
  EXPECT_TRUE(contains(msg, "the forward of div was called at " + here(line))) << msg;
}

TEST(Anomaly, OperatorsOnEitherSideAndUnaryMinusNameTheirLines) {
  tensor a = leaf({1.0, 2.0});
  const auto [p, lp] = std::pair(a * 2.0, __LINE__);
  const auto [q, lq] = std::pair(2.0 - a, __LINE__);
  const auto [r, lr] = std::pair(-a, __LINE__);
  const auto [s, ls] = std::pair(a > 1.5, __LINE__);  // not recorded: no gradient
  EXPECT_EQ(p.grad_fn()->site.line(), static_cast<unsigned>(lp));
  EXPECT_EQ(q.grad_fn()->site.line(), static_cast<unsigned>(lq));
  EXPECT_EQ(r.grad_fn()->site.line(), static_cast<unsigned>(lr));
  EXPECT_EQ(s.grad_fn(), nullptr);
  EXPECT_EQ(std::string(p.grad_fn()->site.file_name()), __FILE__);
  (void)ls;
}

TEST(Anomaly, MemberOpNamesItsLine) {
  tensor x = leaf({1.0, 2.0});
  const auto [s, line] = std::pair(x.sum(), __LINE__);
  mg::autograd::detect_anomaly_guard anomaly;
  // an infinite gradient arriving at sum: its backward spreads it over x
  const std::string msg = error_of([&] { s.backward(tensor(inf, mg::f64)); });
  EXPECT_TRUE(contains(msg, "the backward of sum returned NaN or infinite values")) << msg;
  EXPECT_TRUE(contains(msg, "the forward of sum was called at " + here(line))) << msg;

  const auto [e, eline] = std::pair(x[1], __LINE__);  // operator[] (select)
  const std::string msg2 = error_of([&] { e.backward(tensor(inf, mg::f64)); });
  EXPECT_TRUE(contains(msg2, "the forward of select was called at " + here(eline))) << msg2;
}

TEST(Anomaly, InPlaceMemberNamesItsLine) {
  tensor x = leaf({0.0, 4.0});
  tensor y = x * 1.0;
  const int line = (y.sqrt_(), __LINE__);  // in place: the node is sqrt's, recorded here
  EXPECT_EQ(y.grad_fn()->site.line(), static_cast<unsigned>(line));
  mg::autograd::detect_anomaly_guard anomaly;
  const std::string msg = error_of([&] { y.sum().backward(); });
  EXPECT_TRUE(contains(msg, "the forward of sqrt was called at " + here(line))) << msg;
}

// A public function that calls others (mse_loss: sub, square, mean; cat; softmax is one op,
// recorded once) records all its nodes at the caller's line, not at lines of the library.
TEST(Anomaly, CompositeOpsRecordTheOutermostCall) {
  tensor x = leaf({1.0, 2.0, 3.0}), t = tensor({0.0, 1.0, 0.0}, mg::f64);
  const auto [s, ls] = std::pair(mg::softmax(x, 0), __LINE__);
  const auto [m, lm] = std::pair(mg::mse_loss(x, t), __LINE__);
  const auto [c, lc] = std::pair(mg::cat({x, x}, 0), __LINE__);
  const auto [v, lv] = std::pair(x.flatten().t().reshape({3, 1}), __LINE__);
  for (const auto& [y, line] : {std::pair(s, ls), std::pair(m, lm), std::pair(c, lc)}) {
    std::vector<const mg::autograd::node*> stack{y.grad_fn().get()};
    while (!stack.empty()) {  // every node down to the leaf
      const auto* n = stack.back();
      stack.pop_back();
      if (n->name() == std::string("accumulate_grad")) continue;
      EXPECT_EQ(n->site.line(), static_cast<unsigned>(line)) << n->name();
      for (const auto& e : n->next_functions())
        if (e) stack.push_back(e.function.get());
    }
  }
  EXPECT_EQ(v.grad_fn()->site.line(), static_cast<unsigned>(lv));
}

namespace {
// y = 2x, whose backward returns NaN.
struct nan_backward {
  static tensor forward(mg::context&, const tensor& x) { return x * 2.0; }
  static tensor_list backward(mg::context&, const tensor_list& g) {
    return {g[0] * std::numeric_limits<double>::quiet_NaN()};
  }
};
// Its backward throws mg::error.
struct throwing_backward {
  static tensor forward(mg::context&, const tensor& x) { return x * 2.0; }
  static tensor_list backward(mg::context&, const tensor_list&) {
    mg::detail::fail("throwing_backward: no gradient today");
  }
};
// Its backward returns a gradient of the wrong shape.
struct misshapen_backward {
  static tensor forward(mg::context&, const tensor& x) { return x * 2.0; }
  static tensor_list backward(mg::context&, const tensor_list&) { return {mg::ones({5})}; }
};
}  // namespace

TEST(Anomaly, CustomFunctionNamesTheApplyLine) {
  tensor x = leaf({1.0, 2.0});
  const auto [y, line] = std::pair(mg::apply<nan_backward>(x), __LINE__);
  mg::autograd::detect_anomaly_guard anomaly;
  const std::string msg = error_of([&] { y.sum().backward(); });
  EXPECT_TRUE(contains(msg, "returned NaN or infinite values")) << msg;
  EXPECT_TRUE(contains(msg, "was called at " + here(line))) << msg;
}

// Double backward: the nodes that pow's backward records (pow(x, 0.5) for 1.5 x^0.5) name, in a
// second line, the node whose backward recorded them and its forward's line. At x = 0 the first
// derivative is finite and the second, 0.75 x^-0.5, is not.
TEST(Anomaly, DoubleBackwardNamesTheParentsLine) {
  tensor x = leaf({0.0, 1.0});
  const auto [y, line] = std::pair(mg::pow(x, 1.5), __LINE__);
  mg::autograd::detect_anomaly_guard anomaly;
  const auto dx = mg::autograd::grad({y.sum()}, {x}, {}, {.create_graph = true});
  EXPECT_EQ(values(dx[0]), (std::vector<double>{0.0, 1.5}));
  const std::string msg = error_of([&] { dx[0].sum().backward(); });
  EXPECT_TRUE(contains(msg, "the backward of pow returned NaN or infinite values")) << msg;
  EXPECT_TRUE(contains(
      msg, "it was recorded by the backward of pow, whose forward was called at " + here(line)))
      << msg;
}

TEST(Anomaly, FusedNodeNamesItsLine) {
  tensor x = leaf({1.0, 2.0});
  const auto fused = mg::fuse([](auto v) { return v * v; });
  const auto [y, line] = std::pair(fused(x), __LINE__);
  EXPECT_EQ(y.grad_fn()->site.line(), static_cast<unsigned>(line));
}

// example-begin call-site
// A function of yours can take the call site and pass it on: its node names your caller's line.
mg::tensor soft_threshold(const mg::tensor& x, mg::call_site site = {}) {
  return mg::relu(x, site);
}
// example-end call-site

TEST(Anomaly, UserFunctionsPassTheirCallersSiteOn) {
  tensor x = leaf({-1.0, 2.0});
  const auto [y, line] = std::pair(soft_threshold(x), __LINE__);
  EXPECT_EQ(y.grad_fn()->site.line(), static_cast<unsigned>(line));
}

// The example of docs/runtime.md.
TEST(Anomaly, DocsExample) {
  std::string message;
  // example-begin anomaly-guard
  mg::tensor x = mg::tensor({0.0, 1.0}, mg::f64).requires_grad_();
  mg::tensor y = mg::sqrt(x);  // d/dx sqrt(x) = 1/(2 sqrt(x)): infinite at 0
  mg::autograd::detect_anomaly_guard anomaly;
  try {
    y.sum().backward();
  } catch (const mg::error& e) {
    message = e.what();  // names sqrt, and this file and the line of mg::sqrt(x)
  }
  // example-end anomaly-guard
  EXPECT_TRUE(contains(message, "the backward of sqrt returned NaN or infinite values")) << message;
  EXPECT_TRUE(contains(message, "the forward of sqrt was called at " +
                                    here(static_cast<int>(y.grad_fn()->site.line()))))
      << message;
}

TEST(Anomaly, OffNoErrorAndTheNonFiniteGradientPropagates) {
  ASSERT_FALSE(mg::autograd::is_anomaly_enabled());
  tensor x = leaf({0.0, 1.0});
  mg::sqrt(x).sum().backward();
  EXPECT_TRUE(std::isinf(values(x.grad())[0]));
  tensor a = leaf({1.0, 2.0}), b = leaf({0.0, 1.0});
  (a / b).sum().backward();
  EXPECT_TRUE(std::isinf(values(a.grad())[0]));
  EXPECT_TRUE(std::isinf(values(b.grad())[0]));  // -(g/b) y = -inf inf
  tensor c = leaf({1.0});
  mg::apply<nan_backward>(c).sum().backward();
  EXPECT_TRUE(std::isnan(values(c.grad())[0]));
}

// Errors thrown while a node runs carry its forward's line under anomaly mode, and only then.
TEST(Anomaly, ErrorsInBackwardCarryTheTrace) {
  for (const bool on : {false, true}) {
    mg::autograd::detect_anomaly_guard anomaly(on);
    const std::string where = "was called at ";
    {  // a custom Function's backward throwing
      tensor x = leaf({1.0, 2.0});
      const auto [y, line] = std::pair(mg::apply<throwing_backward>(x), __LINE__);
      const std::string msg = error_of([&] { y.sum().backward(); });
      EXPECT_TRUE(contains(msg, "no gradient today")) << msg;
      EXPECT_EQ(contains(msg, where + here(line)), on) << msg;
    }
    {  // a gradient of the wrong shape
      tensor x = leaf({1.0, 2.0});
      const auto [y, line] = std::pair(mg::apply<misshapen_backward>(x), __LINE__);
      const std::string msg = error_of([&] { y.sum().backward(); });
      EXPECT_TRUE(contains(msg, "backward returned a gradient of shape [5]")) << msg;
      EXPECT_EQ(contains(msg, where + here(line)), on) << msg;
    }
    {  // a saved tensor modified in place (exp saves its output)
      tensor x = leaf({1.0, 2.0});
      auto [y, line] = std::pair(mg::exp(x), __LINE__);
      y.add_(1.0);
      const std::string msg = error_of([&] { y.sum().backward(); });
      EXPECT_TRUE(contains(msg, "has been modified by an in-place operation")) << msg;
      EXPECT_EQ(contains(msg, "the forward of exp " + where + here(line)), on) << msg;
    }
  }
}

TEST(Anomaly, GuardRestoresTheMode) {
  EXPECT_FALSE(mg::autograd::is_anomaly_enabled());
  {
    mg::autograd::detect_anomaly_guard on;
    EXPECT_TRUE(mg::autograd::is_anomaly_enabled());
    {
      mg::autograd::detect_anomaly_guard off(false);
      EXPECT_FALSE(mg::autograd::is_anomaly_enabled());
    }
    EXPECT_TRUE(mg::autograd::is_anomaly_enabled());
  }
  EXPECT_FALSE(mg::autograd::is_anomaly_enabled());
}

// test_anomaly_mode_no_check_nan: check_nan = false lets a NaN gradient through (and the mode and
// the flag are restored by the guard), while other errors still name the forward's line.
TEST(Anomaly, CheckNanOff) {
  tensor x = leaf({1.0, 2.0});
  tensor y = mg::apply<nan_backward>(x);
  {
    mg::autograd::detect_anomaly_guard anomaly(true, /*check_nan=*/false);
    EXPECT_TRUE(mg::autograd::is_anomaly_enabled());
    EXPECT_FALSE(mg::autograd::is_anomaly_check_nan_enabled());
    y.sum().backward();
    const auto g = values(x.grad());
    ASSERT_EQ(g.size(), 2u);
    EXPECT_TRUE(std::isnan(g[0]) && std::isnan(g[1]));
    tensor z = leaf({1.0, 2.0});
    const auto [w, line] = std::pair(mg::apply<misshapen_backward>(z), __LINE__);
    const std::string msg = error_of([&] { w.sum().backward(); });
    EXPECT_TRUE(contains(msg, "was called at " + here(line))) << msg;
  }
  EXPECT_FALSE(mg::autograd::is_anomaly_enabled());
  EXPECT_TRUE(mg::autograd::is_anomaly_check_nan_enabled());
  mg::autograd::set_detect_anomaly(true, false);
  EXPECT_FALSE(mg::autograd::is_anomaly_check_nan_enabled());
  mg::autograd::set_detect_anomaly(false);
  EXPECT_TRUE(mg::autograd::is_anomaly_check_nan_enabled());
}
