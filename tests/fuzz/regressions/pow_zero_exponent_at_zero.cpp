// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   first order: the gradient along a random direction is -nan, a central difference gives 0
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.27853384955004801});
//   auto v1 = v0 - v0;
//   auto v2 = mg::pow(v1, 0.0);
//   auto loss = mg::sum(v2 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, PowZeroExponentAtZero) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.27853384955004801}});
  p.code.push_back({mg_fuzz::op::sub, {0, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::pow_scalar, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {2};
  p.weights = {{0.68853148851319657}};
  mg_fuzz::expect_passes(p);
}
