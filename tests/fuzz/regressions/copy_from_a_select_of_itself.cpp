// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   version counter: backward failed where torch's rule says it succeeds: metagrad: one of the tensors needed for gradient computation has been modified by an in-place operation: a tensor of shape [] saved by expand is at version 1; expected version 0; make a copy before modifying it in place, or modify it out of place
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({1}, mg::f64, true, {0.27853384955004801});
//   auto v1 = v0 + v0;
//   auto v2 = v1.select(0, 0);
//   v1.copy_(v2);
//   auto loss = mg::sum(v1 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, CopyFromASelectOfItself) {
  mg_fuzz::program p;
  p.inputs.push_back({{1}, mg::f64, true, {0.27853384955004801}});
  p.code.push_back({mg_fuzz::op::add, {0, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::select, {1}, {0, 0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::copy_, {1, 2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {1};
  p.weights = {{0.68853148851319657}};
  mg_fuzz::expect_passes(p);
}
