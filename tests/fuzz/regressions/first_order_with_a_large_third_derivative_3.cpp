// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   first order: the gradient along a random direction is -3234.541891, a central difference gives
//   -3234.48699933 (the harness, not the library: a central difference at one step was off by its
//   O(h^2) error; the check combines steps h and h/2)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({3, 2}, mg::f64, true, {-0.10802972525360421,
//   -0.63214920426851329, 1.0028031907944821, -0.22521040535475922,
//   -0.051227237734349895, 1.3809308706629269}); auto v1 = mg::pow(v0, -2.0); auto v2 =
//   mg::sin(v1); auto loss = mg::sum(v2 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, FirstOrderWithALargeThirdDerivative3) {
  mg_fuzz::program p;
  p.inputs.push_back({{3, 2},
                      mg::f64,
                      true,
                      {-0.10802972525360421, -0.63214920426851329, 1.0028031907944821,
                       -0.22521040535475922, -0.051227237734349895, 1.3809308706629269}});
  p.code.push_back(
      {mg_fuzz::op::pow_scalar, {0}, {}, -2.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::sin, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {2};
  p.weights = {{0.21985347641657005, -0.60011825868642155, 0.47690824959243949, 0.62001500069950199,
                -0.50981789897029361, 0.54576871642713165}};
  mg_fuzz::expect_passes(p);
}
