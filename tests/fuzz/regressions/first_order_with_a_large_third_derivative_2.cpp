// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   first order: the gradient along a random direction is 3130.68779236, a central difference gives
//   3130.56797812 (the harness, not the library: a central difference at one step was off by its
//   O(h^2) error; the check combines steps h and h/2)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({2}, mg::f64, true, {-1.4964167468897231, 0.062035364318730579});
//   auto v1 = mg::pow(v0, -2.0);
//   auto v2 = mg::sin(v1);
//   auto v3 = mg::matmul(v2, v2);
//   auto loss = mg::sum(v3 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, FirstOrderWithALargeThirdDerivative2) {
  mg_fuzz::program p;
  p.inputs.push_back({{2}, mg::f64, true, {-1.4964167468897231, 0.062035364318730579}});
  p.code.push_back(
      {mg_fuzz::op::pow_scalar, {0}, {}, -2.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::sin, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back(
      {mg_fuzz::op::matmul, {2, 2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {3};
  p.weights = {{0.42445319957311023}};
  mg_fuzz::expect_passes(p);
}
