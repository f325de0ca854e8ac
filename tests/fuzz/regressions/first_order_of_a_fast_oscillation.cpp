// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   first order: the gradient along a random direction is -216.678994883, a central difference
//   gives -216.67664509 (the harness: the central differences at one step were off by their
//   truncation error; a second, smaller step decides)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.063239711473061178});
//   auto v1 = 9.625 / v0;
//   v1.cos_();
//   auto v2 = v1 * 11.625;
//   auto v3 = mg::erf(v2);
//   auto loss = mg::sum(v3 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, FirstOrderOfAFastOscillation) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.063239711473061178}});
  p.code.push_back(
      {mg_fuzz::op::number_div, {0}, {}, 9.625, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::cos_, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back(
      {mg_fuzz::op::mul_number, {1}, {}, 11.625, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::erf, {2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {3};
  p.weights = {{-0.91285951855959313}};
  mg_fuzz::expect_passes(p);
}
