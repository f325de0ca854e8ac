// A program the fuzzer found (scripts/fuzz.sh). What failed:
//   float32 on device cuda against float32 on the cpu: gradient 0 element 0 is -159.0260162,
//   expected -159.0454102 (the harness: float32 sums in another order differ by 1.2e-4 relative
//   here; the check allows 1e-3)
//
// The program, as mg code:
//   auto v0 = mg_fuzz::input({}, mg::f64, true, {-0.248755916783717});
//   auto v1 = mg_fuzz::input({2, 4}, mg::f32, false, {0.2536479981370241,
//   -0.67873532078735632, 1.1702718614310896, -1.3902928438825195, 1.2563411783111267,
//   -0.34578086678304332, 1.0891026545328502, -1.2010814873940276}); auto v2 = mg_fuzz::input({},
//   mg::f64, true, {0.92150230175515224}); auto v3 = mg::atan2(v1, v0); auto v4 = v3 + v3; auto v5
//   = v4 + v4; auto v6 = v5 + v5; auto v7 = mg::prod(v3); auto v8 = mg::cos(v7); auto loss =
//   mg::sum(v2 * w0) + mg::sum(v6 * w1) + mg::sum(v8 * w2);  // wk: fixed weights of the output's
//   shape loss.backward();
#include "fuzz/reproduction.hpp"

TEST(FuzzRegression, Float32OnTheDeviceWithALargeGradient) {
  mg_fuzz::program p;
  p.inputs.push_back({{}, mg::f64, true, {-0.248755916783717}});
  p.inputs.push_back(
      {{2, 4},
       mg::f32,
       false,
       {0.2536479981370241, -0.67873532078735632, 1.1702718614310896, -1.3902928438825195,
        1.2563411783111267, -0.34578086678304332, 1.0891026545328502, -1.2010814873940276}});
  p.inputs.push_back({{}, mg::f64, true, {0.92150230175515224}});
  p.code.push_back(
      {mg_fuzz::op::atan2, {1, 0}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {3, 3}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {4, 4}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::add, {5, 5}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::prod, {3}, {0}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.code.push_back({mg_fuzz::op::cos, {7}, {}, 0.0, 0.0, false, false, mg_fuzz::comparison::gt});
  p.outputs = {2, 6, 8};
  p.weights = {
      {-0.71164302872431628},
      {0.53535676509360797, 0.26272020325442491, -0.94948618314240918, -0.2455333982157335,
       0.4520318094659066, 0.043537270028088271, -0.8588349975093772, -0.88398497741356563},
      {0.37112880167766682}};
  mg_fuzz::expect_passes(p);
}
