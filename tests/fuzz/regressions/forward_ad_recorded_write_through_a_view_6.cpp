// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   forward AD: the loss's tangent <v, J u> is 0.24981446748469, reverse mode's <J^T v, u> is 0.350754381228151
//   (the write's tangent had a graph, the primals requiring grad, and a view without a
//   tangent of its own took it as its own instead of writing it into its base's tangent)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {1.2330112231079613});
//   auto v1 = mg_fuzz::input({1}, mg::f64, false, {-0.70621627001771192});
//   auto v2 = mg::expand(v0, {});
//   auto v3 = -v1;
//   auto v4 = v1 + v3;
//   auto v5 = mg::log_softmax(v3, 0);
//   auto v6 = mg::tan(v1);
//   auto v7 = v3.flatten(0, -1);
//   auto v8 = mg::cos(v7);
//   v7.div_(v2);
//   auto v9 = mg::log1p(v3);
//   auto loss = mg::sum(v7 * w0) + mg::sum(v9 * w1);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, ForwardAdRecordedWriteThroughAView6) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {1.2330112231079613}});
  p.inputs.push_back({{1}, mg::f64, false, {-0.70621627001771192}});
  p.code.push_back({mg_fuzz::op::expand, {0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::neg, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {1, 3}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::log_softmax, {3}, {0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::tan, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::flatten, {3}, {0, -1}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::cos, {7}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::div_, {7, 2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::log1p, {3}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {7, 9};
  p.weights = {{0.96187155845636907}, {0.61125743765718066}};
  mg_fuzz::expect_passes(p);
}
