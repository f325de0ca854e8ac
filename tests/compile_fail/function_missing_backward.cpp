// Compile-fail pair: an mg::Function without backward is rejected in one sentence by apply.
// Built as is, the well-formed twin must compile and run.
#include <metagrad/function.hpp>

struct complete {
  static mg::tensor forward(mg::context&, const mg::tensor& x) { return x * 2.0; }
  static mg::tensor_list backward(mg::context&, const mg::tensor_list& g) { return {g[0] * 2.0}; }
};

#ifdef MG_COMPILE_FAIL
struct missing_backward {
  static mg::tensor forward(mg::context&, const mg::tensor& x) { return x * 2.0; }
};
using op = missing_backward;
#else
using op = complete;
#endif

int main() {
  mg::tensor x = mg::tensor(1.0, mg::f64).requires_grad_();
  mg::apply<op>(x).backward();
  return x.grad().item<double>() == 2.0 ? 0 : 1;
}
