// Compile-fail cases of mg::repeat's loop node (Note [Scan] in static/scan.hpp): what it does
// not support is rejected in one sentence. MG_COMPILE_FAIL picks the case; without it, the
// well-formed twins build and run, checked against central differences.
#include <cmath>
#include <cstdio>
#include <tuple>

#include <xtensor/xtensor.hpp>

#include <metagrad/xtensor.hpp>

namespace {
// t <- t + 0.5 sin(t) x, 6 times: the literal 0.5 makes the loop one node
auto relax(const auto& t0, const auto& x) {
  return mg::repeat<6>([&](const auto& t) { return t + 0.5 * sin(t) * x; }, t0);
}
// the same step as a recursive template: each step is its own type, and the literal's copies
// share their slots (Note [Constant origins])
template <int Steps>
auto relax_unrolled(const auto& t, const auto& x) {
  if constexpr (Steps == 0) {
    return t;
  } else {
    return relax_unrolled<Steps - 1>(t + 0.5 * sin(t) * x, x);
  }
}
// a step holding an op's attribute (pow's exponent) instead: planned once per occurrence
template <int Steps>
auto cube_unrolled(const auto& t, const auto& x) {
  if constexpr (Steps == 0) {
    return t;
  } else {
    return cube_unrolled<Steps - 1>(t + pow(sin(t), 3) * x, x);
  }
}
}  // namespace

int main() {
  const auto f = [](auto t, auto x) { return relax(t, x); };
  const double h = 1e-4;
  auto g = [&](double t) { return mg::grad<0>(f)(t, 0.7); };
  bool ok = true;
#if MG_COMPILE_FAIL == 1  // third order through the loop node
  const double d3 = mg::grad<0>(mg::grad<0>(mg::grad<0>(f)))(0.3, 0.7);
  ok = std::isfinite(d3);
#elif MG_COMPILE_FAIL == 2  // second order on arrays through the loop node
  const xt::xtensor<double, 1> t = {0.3, -0.2};
  const auto hess = mg::hessian<0>([](auto a) { return mg::sum(relax(a, a)); })(t);
  ok = hess.size() == 4;
#elif MG_COMPILE_FAIL == 3  // 16 steps holding an attribute, unrolled by hand: 2^16 occurrences
  auto deep = [](auto t, auto x) { return cube_unrolled<16>(t, x); };
  ok = std::isfinite(mg::grad<0>(deep)(0.3, 0.7));
#elif MG_COMPILE_FAIL == 4  // second order through a loop reading one row per step
  const xt::xtensor<double, 1> xs = {0.5, -1.0, 0.25};
  const auto rnn = [&xs](auto w) {
    return mg::repeat<3>([&](const auto& h, const auto& x) { return tanh(w * h + x); }, 0.0, xs);
  };
  ok = std::isfinite(mg::hessian(rnn)(0.7));
#elif MG_COMPILE_FAIL == 5  // xs given as a traced argument (rows are data)
  const auto g5 = mg::grad([](auto w, auto xs) {
    return mg::repeat<3>([&](const auto& h, const auto& x) { return tanh(w * h + x); }, 0.0, xs);
  });
  ok = std::isfinite(std::get<0>(g5(0.7, 0.5)));
#else
  // the twins: a few steps unrolled by hand, second order on numbers, and jvp on arrays
  auto few = [](auto t, auto x) { return relax_unrolled<6>(t, x); };
  ok = ok && std::abs(mg::grad<0>(few)(0.3, 0.7) - g(0.3)) < 1e-12;
  // 16 steps holding the literal: 2^16 occurrences, one slot per distinct subexpression
  auto deep = [](auto t, auto x) { return relax_unrolled<16>(t, x); };
  const double d16 = mg::grad<0>(deep)(0.3, 0.7);
  ok = ok && std::abs(d16 - (deep(0.3 + h, 0.7) - deep(0.3 - h, 0.7)) / (2 * h)) < 1e-6;
  const double d2 = mg::hessian<0>(f)(0.3, 0.7);
  ok = ok && std::abs(d2 - (g(0.3 + h) - g(0.3 - h)) / (2 * h)) < 1e-6;
  const xt::xtensor<double, 1> t = {0.3, -0.2}, v = {1.0, 0.5};
  const auto s = [](auto a) { return mg::sum(relax(a, a)); };
  const double ty = mg::jvp(s, std::tuple{t}, std::tuple{v}).second();
  const xt::xtensor<double, 1> tp = t + h * v, tm = t - h * v;
  ok = ok && std::abs(ty - (s(tp)() - s(tm)()) / (2 * h)) < 1e-6;
#endif
  if (!ok) std::printf("wrong value\n");
  return ok ? 0 : 1;
}
