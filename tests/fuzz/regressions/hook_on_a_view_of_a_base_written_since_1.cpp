// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   identity tensor hooks on every value: raised an error: metagrad: register_hook: cannot register
//   a hook on a tensor that does not require grad (shape [2]); call requires_grad_() on the leaf
//   first (register_hook checked requires_grad before regenerating the view's history)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.25840640967642714});
//   auto v1 = mg_fuzz::input({}, mg::f64, false, {-0.088129583442130954});
//   auto v2 = mg::expand(v1, {2});
//   v1.add_(v0);
//   auto v3 = v1 + v1;
//   auto v4 = mg::expand(v2, {2});
//   auto loss = mg::sum(v3 * w0) + mg::sum(v4 * w1);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, HookOnAViewOfABaseWrittenSince1) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.25840640967642714}});
  p.inputs.push_back({{}, mg::f64, false, {-0.088129583442130954}});
  p.code.push_back(
      {mg_fuzz::op::expand, {1}, {2}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back(
      {mg_fuzz::op::add_, {1, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {1, 1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back(
      {mg_fuzz::op::expand, {2}, {2}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {3, 4};
  p.weights = {{0.60563153464455732}, {0.63739199292169135, 0.082059368366045327}};
  mg_fuzz::expect_passes(p);
}
