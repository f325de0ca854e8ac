// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   version counter: backward failed where torch's rule says it succeeds: ... a tensor of shape
//   [] saved by div is at version 1; expected version 0 (div saved its quotient; torch's saves
//   the divisor, and the dividend only when the divisor requires grad)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.27853384955004801});
//   auto v1 = v0 / v0;
//   v1.add_(v1);
//   auto v2 = 1.0 / v0;
//   auto loss = mg::sum(v1 * w0) + mg::sum(v2 * w1);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, QuotientWrittenInPlace) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.27853384955004801}});
  p.code.push_back({mg_fuzz::op::div, {0, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add_, {1, 1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::number_div, {0}, {}, 1.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {1, 2};
  p.weights = {{0.68853148851319657}, {0.71589123997965975}};
  mg_fuzz::expect_passes(p);
}
