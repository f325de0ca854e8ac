// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   first order: the gradient along a random direction is 0.24505764277, a central difference gives 0
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.27853384955004801});
//   auto v1 = mg_fuzz::input({}, mg::f64, false, {1.032797232769795});
//   auto v2 = v1.reshape({1});
//   v2.add_(v0);
//   v1.fill_(0.0);
//   auto loss = mg::sum(v2 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, ViewOfBaseWrittenThenFilled) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.27853384955004801}});
  p.inputs.push_back({{}, mg::f64, false, {1.032797232769795}});
  p.code.push_back({mg_fuzz::op::reshape, {1}, {1}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add_, {2, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::fill_, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {2};
  p.weights = {{0.71589123997965975}};
  mg_fuzz::expect_passes(p);
}
