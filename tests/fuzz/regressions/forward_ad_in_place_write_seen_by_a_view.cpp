// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   forward AD: the loss's tangent <v, J u> is -1.22942567881767, reverse mode's <J^T v, u> is
//   -0.874848124983513 (the in-place write's tangent, recorded because the primals require
//   grad, replaced v1's tangent instead of writing into it, so v2's tangent went stale)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.27853384955004801});
//   auto v1 = v0 + v0;
//   auto v2 = v1.unsqueeze(0);
//   v1.mul_(v0);
//   auto loss = mg::sum(v1 * w0) + mg::sum(v2 * w1);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, ForwardAdInPlaceWriteSeenByAView) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.27853384955004801}});
  p.code.push_back({mg_fuzz::op::add, {0, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::unsqueeze, {1}, {0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::mul_, {1, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {1, 2};
  p.weights = {{0.68853148851319657}, {0.71589123997965975}};
  mg_fuzz::expect_passes(p);
}
