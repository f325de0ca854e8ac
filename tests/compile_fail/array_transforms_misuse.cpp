// Compile-fail cases of the transforms on arrays (Note [Dual arrays] in xt/dual_family.hpp, Note
// [Scalar results] in xt/array_family.hpp): what they do not support is rejected in one sentence.
// MG_COMPILE_FAIL picks the case; without it, the well-formed twins build and run, checked against
// closed forms.
#include <cmath>
#include <cstdio>
#include <tuple>

#include <xtensor/xtensor.hpp>

#include <metagrad/xtensor.hpp>

int main() {
  const xt::xtensor<double, 1> x = {0.5, -1.0, 2.0};
  const double s = 0.7;
  // f = sum(sin(x s)): d2f/ds2 = -sum(x^2 sin(x s)), d3f/ds3 = -sum(x^3 cos(x s))
  const auto f = [](auto x, auto s) { return mg::sum(mg::sin(x * s)); };
  double want2 = 0, want3 = 0;
  for (double xi : x) want2 -= xi * xi * std::sin(xi * s), want3 -= xi * xi * xi * std::cos(xi * s);
  bool ok = true;
#if MG_COMPILE_FAIL == 1  // third order on arrays: the tangent of a second derivative
  const auto d3 = mg::jvp(mg::grad<1>(mg::grad<1>(f)), std::tuple{x, s}, std::tuple{x * 0.0, 1.0});
  ok = std::abs(d3.second() - want3) < 1e-12;
#elif MG_COMPILE_FAIL == 2  // vjp of a function of arrays with two values
  const auto g = [](auto x) { return std::tuple{mg::sum(x), mg::sum(x * x)}; };
  const auto r = mg::vjp(g, std::tuple{x}, std::tuple{1.0, 1.0});
  ok = r.first.size() == 2;
#elif MG_COMPILE_FAIL == 3  // grad of a function whose value is an array: the reduction forgotten
  const auto g = mg::grad([](auto x) { return x * mg::sin(x); })(x);
  ok = g.size() == 3;
#else
  // the twins: second order by jvp of grad, and the vjp of each value
  const auto d2 =
      mg::jvp(mg::grad<1>(f), std::tuple{x, s}, std::tuple{xt::xtensor<double, 1>(x * 0.0), 1.0});
  ok = ok && std::abs(d2.second() - want2) < 1e-12;
  const auto [v, g] = mg::vjp([](auto x) { return mg::sum(x * x); }, std::tuple{x}, 2.0);
  for (std::size_t i = 0; i < 3; ++i) ok = ok && std::abs(g(i) - 4 * x(i)) < 1e-12;
  ok = ok && std::abs(v() - (0.25 + 1.0 + 4.0)) < 1e-12;
  // grad of the reduced function: d/dx_i sum(x sin x) = sin x_i + x_i cos x_i
  const auto gs = mg::grad([](auto x) { return mg::sum(x * mg::sin(x)); })(x);
  for (std::size_t i = 0; i < 3; ++i)
    ok = ok && std::abs(gs(i) - (std::sin(x(i)) + x(i) * std::cos(x(i)))) < 1e-12;
#endif
  if (!ok) std::printf("wrong value\n");
  return ok ? 0 : 1;
}
