// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   forward AD: the loss's tangent <v, J u> is 0.189584245599665, reverse mode's <J^T v, u> is 0.214471873608147
//   (the write's tangent had a graph, the primals requiring grad, and a view without a
//   tangent of its own took it as its own instead of writing it into its base's tangent)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {-1.0887137312461597});
//   auto v1 = mg_fuzz::input({1}, mg::f64, true, {-1.2168472081426605});
//   auto v2 = mg_fuzz::input({}, mg::f64, false, {0.70236453217109807});
//   auto v3 = v1 + v2;
//   auto v4 = v3 + v3;
//   auto v5 = v2.unsqueeze(-1);
//   auto v6 = mg::dot(v1, v3);
//   auto v7 = v1.permute({0});
//   auto v8 = mg::expm1(v5);
//   v2.relu_();
//   auto v9 = mg::where(mg::le(v0, v3), v1, v4);
//   auto v10 = mg::pow(v9, 2.0);
//   v5.div_(v7);
//   auto loss = mg::sum(v2 * w0) + mg::sum(v5 * w1) + mg::sum(v6 * w2) + mg::sum(v10 * w3);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, ForwardAdRecordedWriteThroughAView7) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {-1.0887137312461597}});
  p.inputs.push_back({{1}, mg::f64, true, {-1.2168472081426605}});
  p.inputs.push_back({{}, mg::f64, false, {0.70236453217109807}});
  p.code.push_back({mg_fuzz::op::add, {1, 2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {3, 3}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::unsqueeze, {2}, {-1}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::dot, {1, 3}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::permute, {1}, {0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::expm1, {5}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::relu_, {2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::where, {0, 3, 1, 4}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::le});
  p.code.push_back({mg_fuzz::op::pow_scalar, {9}, {}, 2.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::div_, {5, 7}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {2, 5, 6, 10};
  p.weights = {{-0.62414594995754369}, {-0.74389679497564276}, {-0.85107861137286289}, {-0.17623210168836212}};
  mg_fuzz::expect_passes(p);
}
