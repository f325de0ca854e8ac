// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   forward AD: the loss's tangent <v, J u> is 0.905082048222437, reverse mode's <J^T v, u> is 1.24119978216642
//   (the write's tangent had a graph, the primals requiring grad, and a view without a
//   tangent of its own took it as its own instead of writing it into its base's tangent)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {0.23829608378052036});
//   auto v1 = mg_fuzz::input({2}, mg::f64, false, {-0.07986897731047149, 0.47171941601793321});
//   auto v2 = v0 + v0;
//   auto v3 = mg::slice(v1, 0, 0, 1, 1);
//   auto v4 = mg::prod(v0);
//   auto v5 = v4 + v4;
//   auto v6 = v1.squeeze();
//   v3.sub_(v4);
//   auto loss = mg::sum(v2 * w0) + mg::sum(v3 * w1) + mg::sum(v5 * w2) + mg::sum(v6 * w3);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, ForwardAdRecordedWriteThroughAView3) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {0.23829608378052036}});
  p.inputs.push_back({{2}, mg::f64, false, {-0.07986897731047149, 0.47171941601793321}});
  p.code.push_back({mg_fuzz::op::add, {0, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::slice, {1}, {0, 0, 1, 1}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::prod, {0}, {0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {4, 4}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::squeeze, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::sub_, {3, 4}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {2, 3, 5, 6};
  p.weights = {{-0.50945211376029809}, {0.75871549339779243}, {0.079413751891010298}, {0.60116623992116458, -0.78203201025143676}};
  mg_fuzz::expect_passes(p);
}
