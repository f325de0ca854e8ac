// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   version counter: backward succeeded, but torch's rule says it fails (the saved tensor of
//   pow_tensor was modified by an in-place operation): the model, not the library, was wrong:
//   the library keeps pow's result only when the exponent requires grad (Note [Lenient saves])
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.27853384955004801});
//   auto v1 = mg_fuzz::input({}, mg::f64, false, {1.032797232769795});
//   auto v2 = v1 + v1;
//   auto v3 = mg::pow(v0, v2);
//   v3.add_(v3);
//   auto loss = mg::sum(v3 * w0);  // w0: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, PowResultWrittenInPlace) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.27853384955004801}});
  p.inputs.push_back({{}, mg::f64, false, {1.032797232769795}});
  p.code.push_back({mg_fuzz::op::add, {1, 1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::pow_tensor, {0, 2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add_, {3, 3}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {3};
  p.weights = {{0.71589123997965975}};
  p.version_error_allowed = true;
  mg_fuzz::expect_passes(p);
}
