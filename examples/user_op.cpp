// docs/adding-an-op.md, "A user's op": the snippet below is cut from this file, which CI
// compiles and runs (it returns 0 when the values and gradients are the closed forms).
// example-begin user-op
#include <metagrad/metagrad.hpp>

struct my_cube {
  static constexpr auto saves = mg::saved::inputs;
  MG_HD static constexpr auto forward(const auto& x) { return x * x * x; }
  // d/dx x^3 = 3x^2
  MG_HD static constexpr auto backward(const auto& x, const auto&, const auto& g) {
    return g * 3 * x * x;
  }
};

int main() {
  double y = mg::apply<my_cube>(2.0);                                       // 8
  double dy = mg::grad([](auto x) { return mg::apply<my_cube>(x); })(2.0);  // 12
  mg::tensor x = mg::tensor({1.0, 2.0}, mg::f64).requires_grad_();
  mg::sum(mg::apply<my_cube>(x)).backward();  // x.grad(): 3, 12
  const auto g = x.grad().to_xtensor<double>();
  return y == 8 && dy == 12 && g(0) == 3 && g(1) == 12 ? 0 : 1;
}
// example-end user-op
