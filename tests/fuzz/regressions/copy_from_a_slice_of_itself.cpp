// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   version counter: backward failed where torch's rule says it succeeds: metagrad: one of the tensors needed for gradient computation has been modified by an in-place operation: a tensor of shape [1] saved by expand is at version 1; expected version 0; make a copy before modifying it in place, or modify it out of place
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.27853384955004801});
//   auto v1 = mg_fuzz::input({2}, mg::f64, true, {1.032797232769795, 1.0738368599694894});
//   auto v2 = mg::index_select(v1, 0, {0, 1, 0});
//   auto v3 = mg::slice(v2, 0, 0, 1, 1);
//   auto v4 = v3 + v3;
//   v2.copy_(v3);
//   auto loss = mg::sum(v0 * w0) + mg::sum(v2 * w1) + mg::sum(v4 * w2);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, CopyFromASliceOfItself) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.27853384955004801}});
  p.inputs.push_back({{2}, mg::f64, true, {1.032797232769795, 1.0738368599694894}});
  p.code.push_back({mg_fuzz::op::index_select, {1}, {0, 0, 1, 0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::slice, {2}, {0, 0, 1, 1}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {3, 3}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::copy_, {2, 3}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {0, 2, 4};
  p.weights = {{0.69450347476866248}, {0.24712739299221664, -0.23123658325248675, -0.40493078928553161}, {-0.88657404813367269}};
  mg_fuzz::expect_passes(p);
}
