// docs/static.md: the snippets below are cut from this file, which CI compiles and runs
// (examples/CMakeLists.txt); it checks each derivative against a closed form or a central
// difference and exits with 1 if one is off.
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>

#include <metagrad/static.hpp>

namespace {
int failures = 0;
void check(const char* what, double got, double expected) {
  const bool ok = std::abs(got - expected) <= 1e-6 * (1 + std::abs(expected));
  std::printf("%-28s %.10f (expected %.10f) %s\n", what, got, expected, ok ? "ok" : "WRONG");
  failures += ok ? 0 : 1;
}
}  // namespace

// example-begin recurrence
// One explicit Euler step of a damped oscillator x'' = -k x - c x'. Every step uses the
// previous state twice, so the expression tree doubles with each step while its DAG grows by a
// few nodes: the static engine plans the DAG.
template <int Steps>
auto simulate(const auto& x, const auto& v, const auto& k, const auto& c, const auto& h) {
  if constexpr (Steps == 0) {
    return x;
  } else {
    return simulate<Steps - 1>(x + h * v, v - h * (k * x + c * v), k, c, h);
  }
}
// example-end recurrence

int main() {
  // example-begin physics
  // Morse potential of a bond of length r: its force and its stiffness, generated at compile
  // time from the one formula.
  const double depth = 4.7, width = 1.9, r0 = 0.74;
  auto morse = [=](auto r) {
    auto e = 1 - exp(-width * (r - r0));
    return depth * e * e;
  };
  const double force = -mg::grad(morse)(0.9);
  const double stiffness = mg::hessian<0>(morse)(0.9);  // grad of grad
  // example-end physics
  const double e = std::exp(-width * (0.9 - r0));
  check("force", force, -2 * depth * width * e * (1 - e));
  check("stiffness", stiffness, 2 * depth * width * width * e * (2 * e - 1));
  check("stiffness at r0", mg::hessian<0>(morse)(r0), 2 * depth * width * width);

  // example-begin recurrence-grad
  // Where the oscillator is after 16 steps, and how that depends on stiffness and damping.
  // The start (x0, v0) and the step size h are arguments too, so the same gradient also gives
  // the derivatives with respect to them.
  auto final_x = [](auto k, auto c, auto x0, auto v0, auto h) {
    return simulate<16>(x0, v0, k, c, h);
  };
  auto [dk, dc] = mg::grad<0, 1>(final_x)(3.0, 0.4, 1.0, 0.0, 0.05);
  // example-end recurrence-grad
  const double step = 1e-6;
  auto at = [&](double k, double c) { return final_x(k, c, 1.0, 0.0, 0.05); };
  check("d x16 / d k", dk, (at(3.0 + step, 0.4) - at(3.0 - step, 0.4)) / (2 * step));
  check("d x16 / d c", dc, (at(3.0, 0.4 + step) - at(3.0, 0.4 - step)) / (2 * step));

  // example-begin repeat
  // The same 16 steps with mg::repeat: the state is a pair (x, v), and the step a lambda that
  // captures the parameters. A plain for loop cannot reassign the state: its type is its formula.
  auto final_x_repeat = [](auto k, auto c, auto x0, auto v0, auto h) {
    auto euler = [&](const auto& s) {
      const auto& [x, v] = s;
      return std::pair{x + h * v, v - h * (k * x + c * v)};
    };
    return mg::repeat<16>(euler, std::pair{x0, v0}).first;
  };
  auto [rk, rc] = mg::grad<0, 1>(final_x_repeat)(3.0, 0.4, 1.0, 0.0, 0.05);
  // example-end repeat
  check("repeat: d x16 / d k", rk, dk);
  check("repeat: d x16 / d c", rc, dc);

  // Written the natural way, with the step size 0.05 inside the step and the start as numbers:
  // the step holds a constant, so mg::repeat makes the loop one node (docs/static.md, "Steps
  // that hold constants"), and its second derivatives come with it.
  auto final_x_natural = [](auto k, auto c) {
    auto euler = [&](const auto& s) {
      const auto& [x, v] = s;
      return std::pair{x + 0.05 * v, v - 0.05 * (k * x + c * v)};
    };
    return mg::repeat<16>(euler, std::pair{1.0, 0.0}).first;
  };
  const auto [nk, nc] = mg::grad(final_x_natural)(3.0, 0.4);
  check("loop node: d x16 / d k", nk, dk);
  check("loop node: d x16 / d c", nc, dc);
  auto dk_at = [&](double k) { return mg::grad<0>(final_x_natural)(k, 0.4); };
  check("loop node: d2 x16 / d k2", mg::hessian<0>(final_x_natural)(3.0, 0.4),
        (dk_at(3.0 + 1e-5) - dk_at(3.0 - 1e-5)) / 2e-5);

  // example-begin transforms
  auto f2 = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
  auto [y, ty] = mg::jvp(f2, std::tuple{2.0, 3.0}, std::tuple{1.0, 0.0});              // ty = df/dx
  auto hv = mg::jvp(mg::grad(f2), std::tuple{2.0, 3.0}, std::tuple{1.0, 0.5}).second;  // H v
  auto polar = [](auto r, auto t) { return std::tuple{r * cos(t), r * sin(t)}; };
  auto [row_x, row_y] = mg::jacobian(polar)(2.0, 0.5);  // row_x = {cos t, -r sin t}
  // example-end transforms
  check("jvp: df/dx", ty, mg::grad<0>(f2)(2.0, 3.0));
  const auto [h_x, h_y] = mg::hessian(f2)(2.0, 3.0);
  check("jvp of grad: (H v)_x", std::get<0>(hv), std::get<0>(h_x) + 0.5 * std::get<1>(h_x));
  check("jvp of grad: (H v)_y", std::get<1>(hv), std::get<0>(h_y) + 0.5 * std::get<1>(h_y));
  check("jacobian: d(r cos t)/dt", std::get<1>(row_x), -2.0 * std::sin(0.5));
  check("jacobian: d(r sin t)/dr", std::get<0>(row_y), std::sin(0.5));
  (void)y;

  // example-begin to-string
  // The formula the static engine differentiates, traced with two symbolic arguments.
  auto f = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
  const std::string formula = mg::to_string(mg::trace<2>(f));
  // formula == "(sin(x0) * x1 + exp(x0 * x1)) / (1 + x0 * x0)"
  // example-end to-string
  if (formula != "(sin(x0) * x1 + exp(x0 * x1)) / (1 + x0 * x0)") {
    std::printf("to_string: %s\n", formula.c_str());
    ++failures;
  }
  return failures == 0 ? 0 : 1;
}
