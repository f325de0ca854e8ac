// Host code of the CUDA consumer (see cuda_backend.cu): a gradient on mg::device::cuda.
#include <cstdio>

#include <metagrad/metagrad.hpp>

int main() {
  mg::tensor x = mg::tensor(2.0).to(mg::device::cuda).requires_grad_();
  (x * x * x).backward();
  const double g = x.grad().to(mg::device::cpu).item<double>();
  std::printf("metagrad on cuda: %.3f\n", g);
  return g == 12.0 ? 0 : 1;
}
