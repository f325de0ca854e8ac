// mg::tensor on device cuda (docs/runtime.md, Devices). This file is host code: it includes no
// Thrust header. device_backend.cpp, the one file that includes <metagrad/cuda.hpp>, registers
// the Thrust backend; built with g++ it runs on Thrust's CPP device system, built with nvcc on a
// GPU. The check at the end compares the device gradient with the closed form on the CPU.
#include <cmath>
#include <cstdio>

#include <metagrad/metagrad.hpp>

int main() {
  mg::manual_seed(1);
  // example-begin device
  const mg::tensor_options on_gpu{.dtype = mg::f64, .device = mg::device::cuda};
  auto x = mg::randn({1024, 64}, on_gpu).requires_grad_();
  auto loss = mg::sum(tanh(x) * x);
  loss.backward();                 // x.grad() is on the device too
  double v = loss.item<double>();  // copied to the host
  // example-end device
  const auto xs = x.to_xtensor<double>(), g = x.grad().to_xtensor<double>();
  double expected = 0, worst = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double t = std::tanh(xs.data()[i]);
    expected += t * xs.data()[i];
    worst = std::fmax(worst, std::fabs(g.data()[i] - (t + xs.data()[i] * (1 - t * t))));
  }
  const bool ok =
      x.grad().device() == mg::device::cuda && std::fabs(v - expected) < 1e-9 && worst < 1e-12;
  std::printf("device example: loss %.6f on %s, gradient %s\n", v,
              x.grad().device() == mg::device::cuda ? "cuda" : "cpu", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
