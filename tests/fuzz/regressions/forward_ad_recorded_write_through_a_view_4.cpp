// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   forward AD: the loss's tangent <v, J u> is -1.41865037391128, reverse mode's <J^T v, u> is -2.06813967494919
//   (the write's tangent had a graph, the primals requiring grad, and a view without a
//   tangent of its own took it as its own instead of writing it into its base's tangent)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.27853384955004801});
//   auto v1 = mg_fuzz::input({}, mg::f64, false, {1.032797232769795});
//   auto v2 = v1.reshape({1});
//   v1.add_(v0);
//   v2.pow_(2.0);
//   auto loss = mg::sum(v1 * w0) + mg::sum(v2 * w1);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, ForwardAdRecordedWriteThroughAView4) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.27853384955004801}});
  p.inputs.push_back({{}, mg::f64, false, {1.032797232769795}});
  p.code.push_back({mg_fuzz::op::reshape, {1}, {1}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add_, {1, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::pow_, {2}, {}, 2.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {1, 2};
  p.weights = {{0.71589123997965975}, {0.69450347476866248}};
  mg_fuzz::expect_passes(p);
}
