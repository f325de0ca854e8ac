// An op that declares it saves only its inputs must not read its output in backward: the output
// reaches backward as mg::not_saved, so the mistake is a compile error, not a wrong gradient.
#include <metagrad/metagrad.hpp>

struct my_exp {
#if defined(MG_COMPILE_FAIL)
  static constexpr auto saves = mg::saved::inputs;  // wrong: backward reads y
#else
  static constexpr auto saves = mg::saved::output;
#endif
  static auto forward(const auto& x) {
    using std::exp;
    return exp(x);
  }
  static auto backward(const auto&, const auto& y, const auto& g) { return g * y; }
};

int main() {
  mg::tensor x = mg::tensor({0.5, 1.0}, mg::f64).requires_grad_();
  mg::sum(mg::apply<my_exp>(x)).backward();
  return x.grad().numel() == 2 ? 0 : 1;
}
