// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   forward AD raised an error: metagrad: forward-mode AD: the gradient for output 1 has shape [1] but the output has shape [1,1]; pass a gradient of the output's shape
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({1, 1, 1}, mg::f64, true, {0.27853384955004801});
//   auto v1 = mg_fuzz::input({1}, mg::f64, true, {1.032797232769795});
//   auto v2 = mg::matmul(v0, v1);
//   auto loss = mg::sum(v2 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, MatmulForwardAdBatchedVector) {
  mg_fuzz::program p;
  p.inputs.push_back({{1, 1, 1}, mg::f64, true, {0.27853384955004801}});
  p.inputs.push_back({{1}, mg::f64, true, {1.032797232769795}});
  p.code.push_back({mg_fuzz::op::matmul, {0, 1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {2};
  p.weights = {{0.71589123997965975}};
  mg_fuzz::expect_passes(p);
}
