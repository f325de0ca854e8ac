// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   first order: the gradient along a random direction is 2366.62738655, a central difference gives
//   2366.65916999 (the harness, not the library: a central difference at one step was off by its
//   O(h^2) error; the check combines steps h and h/2)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {1.1453343982896174});
//   auto v1 = mg::pow(4.6875, v0);
//   auto v2 = mg::expm1(v1);
//   auto v3 = v2 + v2;
//   auto v4 = mg::tan(v3);
//   auto loss = mg::sum(v4 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, FirstOrderWithALargeThirdDerivative1) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {1.1453343982896174}});
  p.code.push_back(
      {mg_fuzz::op::number_pow, {0}, {}, 4.6875, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::expm1, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {2, 2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::tan, {3}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {4};
  p.weights = {{0.31220082488645495}};
  mg_fuzz::expect_passes(p);
}
