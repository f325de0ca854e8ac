// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   identity tensor hooks on every value: raised an error: metagrad: register_hook: cannot register
//   a hook on a tensor that does not require grad (shape [1]); call requires_grad_() on the leaf
//   first (register_hook checked requires_grad before regenerating the view's history)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {-0.11936729371189037});
//   auto v1 = mg_fuzz::input({1}, mg::f64, false, {0.30286834289958042});
//   auto v2 = mg_fuzz::input({}, mg::f64, true, {0.64082689327416187});
//   auto v3 = v2 + v2;
//   auto v4 = v1.transpose(0, 0);
//   auto v5 = v4 + v4;
//   auto v6 = v5 + v5;
//   v1.add_(v3);
//   auto v7 = mg::logsumexp(v3);
//   auto v8 = v4.to(mg::f64);
//   auto loss = mg::sum(v0 * w0) + mg::sum(v1 * w1) + mg::sum(v7 * w2) + mg::sum(v8 * w3);  // wk:
//   fixed weights of the output's shape loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, HookOnAViewOfABaseWrittenSince2) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {-0.11936729371189037}});
  p.inputs.push_back({{1}, mg::f64, false, {0.30286834289958042}});
  p.inputs.push_back({{}, mg::f64, true, {0.64082689327416187}});
  p.code.push_back({mg_fuzz::op::add, {2, 2}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back(
      {mg_fuzz::op::transpose, {1}, {0, 0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {4, 4}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {5, 5}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back(
      {mg_fuzz::op::add_, {1, 3}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back(
      {mg_fuzz::op::logsumexp, {3}, {0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back(
      {mg_fuzz::op::to_dtype, {4}, {1}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {0, 1, 7, 8};
  p.weights = {
      {0.93266169612307848}, {-0.32843253143277695}, {0.71093921982081132}, {0.37382379048363301}};
  mg_fuzz::expect_passes(p);
}
