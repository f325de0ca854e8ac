// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   first order: the gradient along a random direction is 0.24505764277, a central difference gives 0.567388504846
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.27853384955004801});
//   auto v1 = mg_fuzz::input({1}, mg::f64, false, {1.032797232769795});
//   auto v2 = v0 + v1;
//   auto v3 = mg::expand(v1, {2});
//   v1.add_(v2);
//   auto loss = mg::sum(v1 * w0) + mg::sum(v3 * w1);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, ExpandViewOfBaseWrittenInPlace) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.27853384955004801}});
  p.inputs.push_back({{1}, mg::f64, false, {1.032797232769795}});
  p.code.push_back({mg_fuzz::op::add, {0, 1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::expand, {1}, {2}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add_, {1, 2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {1, 3};
  p.weights = {{0.71589123997965975}, {0.69450347476866248, 0.24712739299221664}};
  mg_fuzz::expect_passes(p);
}
