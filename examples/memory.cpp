// The CPU's caching allocator seen from a program: its statistics around a few training steps,
// then the cache given back (docs/runtime.md, "Memory and in-place ops"); and the kernels' thread
// count, whose results do not depend on it ("Threads").
#include <cstdio>
#include <iostream>

#include <metagrad/autograd.hpp>
#include <metagrad/tensor.hpp>

namespace {
mg::tensor w = mg::randn({256, 64}, {.requires_grad = true});
const mg::tensor x = mg::randn({128, 256});

void train_one_epoch() {
  for (int step = 0; step < 10; ++step) {
    const mg::tensor loss = mg::tanh(mg::matmul(x, w)).sum();
    loss.backward();
    mg::no_grad_guard off;
    w.sub_(w.grad() * 0.01);  // written in place: no temporary beyond w.grad() * 0.01
    w.set_grad({});
  }
}
}  // namespace

int main() {
  train_one_epoch();  // the first steps fill the cache
  const std::size_t held = mg::cpu::memory_reserved();
  // example-begin memory
  mg::cpu::reset_peak_memory_stats();
  train_one_epoch();
  std::cout << mg::cpu::max_memory_allocated() << " bytes at the peak, "
            << mg::cpu::memory_reserved() << " held\n";
  mg::cpu::empty_cache();  // the cached blocks go back to the system
  // example-end memory
  const bool steady = mg::cpu::max_memory_allocated() <= held;
  std::printf("steady state: %s\n", steady ? "no new memory" : "it grew");
  const bool emptied = mg::cpu::memory_reserved() == mg::cpu::memory_allocated();

  const mg::tensor big = mg::randn({1000, 1000});
  // example-begin threads
  mg::set_num_threads(1);
  const float one = mg::sum(mg::exp(big)).item<float>();
  mg::set_num_threads(4);  // kernels over 65536 elements or more split across 4 threads
  const float four = mg::sum(mg::exp(big)).item<float>();  // the same bits as `one`
  // example-end threads
  std::printf("sum on 1 thread %.9g, on 4 threads %.9g\n", one, four);
  return steady && emptied && one == four ? 0 : 1;
}
