// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   identity tensor hooks on every value: raised an error: metagrad: register_hook: cannot register
//   a hook on a tensor that does not require grad (shape [2]); call requires_grad_() on the leaf
//   first (register_hook checked requires_grad before regenerating the view's history)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.27853384955004801});
//   auto v1 = mg_fuzz::input({}, mg::f64, false, {1.032797232769795});
//   auto v2 = mg::expand(v1, {2});
//   v1.add_(v0);
//   auto v3 = v2.to(mg::f32);
//   auto loss = mg::sum(v1 * w0) + mg::sum(v3 * w1);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, HookOnAViewOfABaseWrittenSince3) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.27853384955004801}});
  p.inputs.push_back({{}, mg::f64, false, {1.032797232769795}});
  p.code.push_back(
      {mg_fuzz::op::expand, {1}, {2}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back(
      {mg_fuzz::op::add_, {1, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back(
      {mg_fuzz::op::to_dtype, {2}, {0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {1, 3};
  p.weights = {{0.71589123997965975}, {0.69450347476866248, 0.24712739299221664}};
  mg_fuzz::expect_passes(p);
}
