// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   forward AD: the loss's tangent <v, J u> is 5.32847575628462, reverse mode's <J^T v, u> is 10.6569515125693
//   (the write's tangent had a graph, the primals requiring grad, and a view without a
//   tangent of its own took it as its own instead of writing it into its base's tangent)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.27853384955004801});
//   auto v1 = mg_fuzz::input({1}, mg::f64, false, {1.032797232769795});
//   auto v2 = v1.select(0, 0);
//   v2.div_(v0);
//   auto v3 = v1 + v2;
//   auto loss = mg::sum(v3 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, ForwardAdRecordedWriteThroughAView1) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.27853384955004801}});
  p.inputs.push_back({{1}, mg::f64, false, {1.032797232769795}});
  p.code.push_back({mg_fuzz::op::select, {1}, {0, 0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::div_, {2, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {1, 2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {3};
  p.weights = {{0.71589123997965975}};
  mg_fuzz::expect_passes(p);
}
