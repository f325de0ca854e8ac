// mg::Function and forward-mode AD, as docs/runtime.md shows them (the snippets are cut from
// here and checked verbatim by ctest).
#include <cmath>
#include <cstdio>
#include <tuple>

#include <metagrad/metagrad.hpp>

// example-begin function
// x * y * k with a number k: typed state, a jvp for forward mode, two outputs
struct scaled_product {
  struct state {
    double k = 1;
  };
  static std::tuple<mg::tensor, mg::tensor> forward(mg::context_with<state>& ctx,
                                                    const mg::tensor& x, const mg::tensor& y,
                                                    double k) {
    ctx.save_for_backward(x, y);
    ctx.save_for_forward(x, y);
    ctx.state.k = k;
    mg::tensor sign = mg::where(x * y > 0.0, 1.0, -1.0);
    ctx.mark_non_differentiable(sign);
    return {x * y * k, sign};
  }
  static mg::tensor_list backward(mg::context_with<state>& ctx, const mg::tensor_list& g) {
    auto [x, y] = ctx.saved_tensors<2>();  // version-checked
    const double k = ctx.state.k;
    return {g[0] * y * k, g[0] * x * k};  // one per tensor input (the number has none)
  }
  static mg::tensor_list jvp(mg::context_with<state>& ctx, const mg::tensor_list& t) {
    auto [x, y] = ctx.saved_for_forward<2>();
    return {(t[0] * y + x * t[1]) * ctx.state.k, mg::zeros_like(x)};
  }
};

void custom_function_example() {
  mg::tensor x = mg::tensor({1.0, -2.0}, mg::f64).requires_grad_(),
             y = mg::tensor({3.0, 4.0}, mg::f64);
  auto [p, sign] = mg::apply<scaled_product>(x, y, 0.5);  // p = 0.5 x y
  mg::sum(p).backward();                                  // x.grad() = 0.5 y = {1.5, 2}
  {
    namespace fw = mg::forward_ad;
    fw::dual_level level;  // tangents live while it does
    auto [q, unused] = mg::apply<scaled_product>(fw::make_dual(x, mg::ones({2})), y, 0.5);
    auto [value, tangent] = fw::unpack_dual(mg::sin(q));  // tangent = cos(q) * 0.5 y
  }
}
// example-end function

int main() {
  custom_function_example();
  namespace fw = mg::forward_ad;
  mg::tensor x = mg::tensor({1.0, -2.0}, mg::f64).requires_grad_(),
             y = mg::tensor({3.0, 4.0}, mg::f64);
  auto [p, sign] = mg::apply<scaled_product>(x, y, 0.5);
  mg::sum(p).backward();
  fw::dual_level level;
  auto [q, unused] = mg::apply<scaled_product>(fw::make_dual(x, mg::ones({2})), y, 0.5);
  auto [value, tangent] = fw::unpack_dual(mg::sin(q));
  const auto g = x.grad().to_xtensor<double>();
  const auto t = tangent.to_xtensor<double>();
  const bool ok = g(0) == 1.5 && g(1) == 2.0 && !sign.requires_grad() &&
                  std::fabs(t(0) - std::cos(1.5) * 1.5) < 1e-12 &&
                  std::fabs(t(1) - std::cos(-4.0) * 2.0) < 1e-12;
  std::printf("custom function: %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
