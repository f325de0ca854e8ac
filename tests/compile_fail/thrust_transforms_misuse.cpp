// Compile-fail case of the Thrust loss transforms: mg::cuda::grad takes the callable mg::grad
// takes, which ends in a reduction; an elementwise function is rejected in one sentence that
// names the per-element form. Without MG_COMPILE_FAIL, the well-formed twin builds and runs,
// checked against the closed form. Built on Thrust's CPP or OMP device system.
#include <cmath>
#include <cstdio>

#include <thrust/device_vector.h>

#include <metagrad/cuda/transforms.hpp>

int main() {
  const thrust::device_vector<double> x(5, 0.5);
  bool ok = true;
#if MG_COMPILE_FAIL == 1  // an elementwise function, without the final reduction
  const auto g = mg::cuda::grad([](auto v) { return v * v; })(x);
  ok = g.size() == 5;
#else
  // the twin: the loss sum(v^2), gradient 2v, and its per-element form
  const auto [l, g] = mg::cuda::value_and_grad([](auto v) { return mg::sum(v * v); })(x);
  const thrust::device_vector<double> e =
      mg::cuda::elementwise_grad([](auto v) { return v * v; })(x);
  ok = std::abs(l - 1.25) < 1e-15;
  for (std::size_t i = 0; i < 5; ++i) ok = ok && g[i] == 1.0 && e[i] == 1.0;
#endif
  if (!ok) std::printf("wrong value\n");
  return ok ? 0 : 1;
}
