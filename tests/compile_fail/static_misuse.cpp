// Compile-fail cases: the mistakes a new user makes in a function for the static engine, each
// rejected in one sentence that names the fix (Note [Misuse in one sentence] in
// <metagrad/expr.hpp>). MG_COMPILE_FAIL picks the case; without it, the well-formed twin of each
// builds and runs, checked against closed forms.
#include <cmath>
#include <cstdio>
#include <iostream>

#include <metagrad/static.hpp>

// d/dx of x * x (or of the case's well-formed twin) at x = 1.5, against its closed form.
template <class F>
bool check(F f, double expected) {
  const double d = mg::grad(f)(1.5);
  const bool ok = std::abs(d - expected) < 1e-12;
  if (!ok) std::printf("got %.17g, expected %.17g\n", d, expected);
  return ok;
}

struct arctan {  // the fix for a function metagrad lacks: a custom op
  static auto forward(const auto& x) {
    using std::atan;
    return atan(x);
  }
  // d/dx atan(x) = 1 / (1 + x^2)
  static auto backward(const auto& x, const auto&, const auto& g) { return g / (1 + x * x); }
};

struct with_context {  // the shape of an mg::Function: forward takes a context first
  static auto forward(auto&, const auto& x) { return x * x; }
};
struct square {  // the fix: a ctx-free op
  static auto forward(const auto& x) { return x * x; }
  // d/dx x^2 = 2x
  static auto backward(const auto& x, const auto&, const auto& g) { return g * (2 * x); }
};

int main() {
  bool ok = true;
#if MG_COMPILE_FAIL == 1  // a branch on a symbolic value (one type in both branches, so that
                          // the branch itself is the error)
  ok = check(
      [](auto x) {
        if (x > 0) return x * x;
        return x * x;
      },
      3.0);
#elif MG_COMPILE_FAIL == 2   // std::sin instead of sin
  ok = check([](auto x) { return std::sin(x); }, std::cos(1.5));
#elif MG_COMPILE_FAIL == 3   // a function metagrad does not have (::atan(double) is found)
  ok = check([](auto x) { return atan(x); }, 1 / (1 + 1.5 * 1.5));
#elif MG_COMPILE_FAIL == 4   // a loop that reassigns an expression
  ok = check(
      [](auto x) {
        auto t = x;
        for (int k = 0; k < 3; ++k) t = t * x;
        return t;
      },
      4 * 1.5 * 1.5 * 1.5);
#elif MG_COMPILE_FAIL == 5   // printing a symbolic value
  ok = check(
      [](auto x) {
        std::cout << x << '\n';
        return x;
      },
      1.0);
#elif MG_COMPILE_FAIL == 6   // an mg::Function (with a context) in the static engine
  ok = check([](auto x) { return mg::apply<with_context>(x); }, 3.0);
#elif MG_COMPILE_FAIL == 7   // indices (max along a dim with its index) in the static engine
  ok = check([](auto x) { return mg::max(x, 0).values; }, 1.0);
#elif MG_COMPILE_FAIL == 8   // a branch whose two returns differ in type: still the sentence first
  ok = check(
      [](auto x) {
        if (x > 0) return x * x;
        return -x;
      },
      3.0);
#elif MG_COMPILE_FAIL == 9   // the same as ?:
  ok = check([](auto x) { return x > 0 ? x * x : -x; }, 3.0);
#elif MG_COMPILE_FAIL == 10  // a shaped op the static engine cannot trace
  ok = check([](auto x) { return mg::cross_entropy(x * 2.0, {0}); }, 0.0);
#else
  // the twins: mg::where for the branch, sin, a custom op for atan, mg::repeat for the loop,
  // mg::to_string for printing, a ctx-free op for the Function, amax for max with indices
  ok = ok && check([](auto x) { return mg::where(x > 0, x * x, -x); }, 3.0);
  ok = ok && check([](auto x) { return sin(x); }, std::cos(1.5));
  ok = ok && check([](auto x) { return mg::apply<arctan>(x); }, 1 / (1 + 1.5 * 1.5));
  ok = ok && check([](auto x) { return mg::apply<square>(x); }, 3.0);
  ok = ok && check([](auto x) { return mg::amax(x * x, 0); }, 3.0);
  ok = ok && check([](auto x) { return mg::repeat<3>([&](auto t) { return t * x; }, x); },
                   4 * 1.5 * 1.5 * 1.5);
  const std::string text = mg::to_string(mg::trace<1>([](auto x) { return sin(x) * x + 1; }));
  ok = ok && text == "sin(x0) * x0 + 1";
  if (!ok) std::printf("%s\n", text.c_str());
#endif
  return ok ? 0 : 1;
}
