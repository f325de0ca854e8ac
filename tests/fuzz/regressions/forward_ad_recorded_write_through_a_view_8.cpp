// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   forward AD: the loss's tangent <v, J u> is 0.202074887160466, reverse mode's <J^T v, u> is -0.0533350503536605
//   (the write's tangent had a graph, the primals requiring grad, and a view without a
//   tangent of its own took it as its own instead of writing it into its base's tangent)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {-0.60471984817522051});
//   auto v1 = mg_fuzz::input({1}, mg::f64, false, {1.4183097339903674});
//   auto v2 = mg_fuzz::input({}, mg::f64, false, {0.23498998198816468});
//   auto v3 = v1 + v2;
//   auto v4 = v3.chunk(1, 0)[0];
//   auto v5 = v4 + v1;
//   auto v6 = v1.to(mg::device::cuda).to(mg::device::cpu)  /* there and back */;
//   auto v7 = v6.squeeze();
//   v6.div_(6.375);
//   auto v8 = mg::tanh(v1);
//   v7.div_(v0);
//   auto loss = mg::sum(v6 * w0) + mg::sum(v7 * w1);  // wk: fixed weights of the output's shape
//   loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, ForwardAdRecordedWriteThroughAView8) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {-0.60471984817522051}});
  p.inputs.push_back({{1}, mg::f64, false, {1.4183097339903674}});
  p.inputs.push_back({{}, mg::f64, false, {0.23498998198816468}});
  p.code.push_back({mg_fuzz::op::add, {1, 2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::chunk, {3}, {0, 1, 0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {4, 1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::to_device, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::squeeze, {6}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::div_, {6}, {}, 6.375, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::tanh, {1}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::div_, {7, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {6, 7};
  p.weights = {{-0.75085918849886901}, {0.59406375204534068}};
  mg_fuzz::expect_passes(p);
}
