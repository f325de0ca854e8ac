// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   forward AD: the loss's tangent <v, J u> is -nan, reverse mode's <J^T v, u> is 0
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {-0.94475375527795769});
//   auto v1 = v0 + v0;
//   v1.relu_();
//   auto v2 = mg::pow(v1, 0.0);
//   auto loss = mg::sum(v2 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, ForwardAdPowZeroExponentAtZero) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {-0.94475375527795769}});
  p.code.push_back({mg_fuzz::op::add, {0, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::relu_, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::pow_scalar, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {2};
  p.weights = {{0.86308172718897747}};
  mg_fuzz::expect_passes(p);
}
