// Compile-fail pair: a ctx-free op without backward reaching mg::apply<F> with tensors is
// rejected in one sentence (detail::diagnose_static_op). The well-formed twin must build and run.
#include <metagrad/function.hpp>

struct square {
  static auto forward(const auto& x) { return x * x; }
  // d/dx x^2 = 2x
  static auto backward(const auto& x, const auto&, const auto& g) { return g * (2 * x); }
};

#ifdef MG_COMPILE_FAIL
struct square_without_backward {
  static auto forward(const auto& x) { return x * x; }
};
using op = square_without_backward;
#else
using op = square;
#endif

int main() {
  mg::tensor x = mg::tensor(3.0, mg::f64).requires_grad_();
  mg::apply<op>(x).backward();
  return x.grad().item<double>() == 6.0 ? 0 : 1;
}
