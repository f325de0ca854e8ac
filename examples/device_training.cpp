// A two-layer network trained on device cuda (docs/gpu.md): matrix products through the backend's
// gemm (cuBLAS on a GPU), the work enqueued on a stream of its own, timed with events, and the
// device memory the caching allocator holds. The backend comes from the prebuilt library
// metagrad::device (or, where it is not built, from device_backend.cpp), so this file is host
// code: it includes the stream API and <metagrad/device.hpp>, not <metagrad/cuda.hpp>. The check
// at the end trains the same network on the CPU and compares the losses.
#include <cmath>
#include <cstdio>
#include <vector>

#include <metagrad/cuda/stream.hpp>
#include <metagrad/device.hpp>
#include <metagrad/metagrad.hpp>

namespace {

std::vector<double> train(mg::device d, int steps) {
  mg::manual_seed(3);
  const mg::tensor_options f32{.dtype = mg::f32};
  mg::tensor x = mg::randn({64, 32}, f32).to(d), t = mg::randn({64, 4}, f32).to(d);
  mg::tensor w1 = (mg::randn({32, 16}, f32) * 0.2).to(d).requires_grad_();
  mg::tensor w2 = (mg::randn({16, 4}, f32) * 0.2).to(d).requires_grad_();
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    const mg::tensor y = mg::matmul(mg::tanh(mg::matmul(x, w1)), w2);
    const mg::tensor loss = mg::mean((y - t) * (y - t));
    loss.backward();
    {
      mg::no_grad_guard no_grad;
      for (mg::tensor* w : {&w1, &w2}) {
        w->sub_(w->grad() * 0.5);
        w->grad().zero_();
      }
    }
    losses.push_back(loss.item<double>());  // the host waits here, and only here
  }
  return losses;
}

}  // namespace

int main() {
  // example-begin gpu
  mg::cuda::stream s = mg::cuda::stream::create();
  mg::cuda::event start, end;
  std::vector<double> losses;
  {
    mg::cuda::stream_guard on_s(s);  // this thread's device work goes to s
    start.record();
    losses = train(mg::device::cuda, 20);
    end.record();
  }
  std::printf("20 steps in %.3f ms; %zu bytes of device memory held, %zu reserved\n",
              start.elapsed_ms(end), mg::cuda::memory_allocated(), mg::cuda::memory_reserved());
  // example-end gpu
  const std::vector<double> on_cpu = train(mg::device::cpu, 20);
  bool ok = losses.back() < 0.8 * losses.front();
  for (std::size_t i = 0; i < losses.size(); ++i)
    ok = ok && std::fabs(losses[i] - on_cpu[i]) <= 1e-4 * std::fabs(on_cpu[i]);
  std::printf("loss %.5f -> %.5f, as on the CPU: %s\n", losses.front(), losses.back(),
              ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
