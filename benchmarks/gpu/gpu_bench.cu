// The GPU workloads of docs/performance.md ("On the GPU"), timed with CUDA events: the median over
// rounds of the mean time of a call, float32, the device copy rate of the same run as the
// physical limit. Prints one JSON object per line (name, ms); benchmarks/gpu/compare.py runs the
// same workloads in PyTorch (eager and torch.compile) and prints the table.
//
// This file includes <metagrad/cuda.hpp>: it is the program's registration point of the Thrust
// backend. (nvcc compiles the runtime engine's headers, not the xtensor evaluator of
// <metagrad/metagrad.hpp>.) Built with -DMETAGRAD_GPU_BENCHMARKS=ON (nvcc, sm_90 by default).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <thrust/sequence.h>
#include <cub/block/block_reduce.cuh>

#include <metagrad/autograd.hpp>
#include <metagrad/cuda.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

namespace {

int rounds = 7;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// The median over `rounds` of the mean milliseconds of `reps` calls of f, after one warm-up call.
template <class F>
double median_ms(F&& f, int reps) {
  f();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  std::vector<double> t;
  for (int r = 0; r < rounds; ++r) {
    check(cudaEventRecord(a, 0), "record");
    for (int i = 0; i < reps; ++i) f();
    check(cudaEventRecord(b, 0), "record");
    check(cudaEventSynchronize(b), "synchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(static_cast<double>(ms) / reps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void report(const std::string& name, double ms, const char* extra = "") {
  std::printf("{\"name\": \"%s\", \"ms\": %.6f%s}\n", name.c_str(), ms, extra);
  std::fflush(stdout);
}

// The loss sum((sin(x) x + exp(-x^2))^2) and its gradient, written by hand: one pass, one
// partial sum per block added atomically.
constexpr int block = 256;
__global__ void hand_loss_grad(const float* x, float* g, float* loss, std::int64_t n) {
  float acc = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    float s, c;
    sincosf(v, &s, &c);
    const float e = expf(-v * v), u = s * v + e;
    acc += u * u;
    g[i] = 2 * u * (c * v + s - 2 * v * e);
  }
  using reduce = cub::BlockReduce<float, block>;
  __shared__ typename reduce::TempStorage temp;
  const float total = reduce(temp).Sum(acc);
  if (threadIdx.x == 0) atomicAdd(loss, total);
}

std::string size_name(std::int64_t n) { return n >= (1 << 26) ? "64M" : "1M"; }

void elementwise(std::int64_t n) {
  const std::string sz = size_name(n);
  const int reps = n > (1 << 20) ? 20 : 200;
  thrust::device_vector<float> x(n), g(n);
  thrust::sequence(x.begin(), x.end(), -1.0f, 2.0f / static_cast<float>(n));
  thrust::device_vector<float> total(1);
  // the physical limit: a device-to-device copy of the bytes the loss must move (x in, g out)
  const double copy = median_ms(
      [&] {
        check(
            cudaMemcpyAsync(thrust::raw_pointer_cast(g.data()), thrust::raw_pointer_cast(x.data()),
                            n * sizeof(float), cudaMemcpyDeviceToDevice, 0),
            "copy");
      },
      reps);
  char extra[96];
  std::snprintf(extra, sizeof extra, ", \"bytes\": %lld", static_cast<long long>(2 * n * 4));
  report("copy/" + sz, copy, extra);
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attribute");
  const int grid = static_cast<int>(std::min<std::int64_t>((n + block - 1) / block, sms * 8));
  report("hand_fused/" + sz,
         median_ms(
             [&] {
               check(cudaMemsetAsync(thrust::raw_pointer_cast(total.data()), 0, sizeof(float), 0),
                     "memset");
               hand_loss_grad<<<grid, block>>>(thrust::raw_pointer_cast(x.data()),
                                               thrust::raw_pointer_cast(g.data()),
                                               thrust::raw_pointer_cast(total.data()), n);
             },
             reps));
  const auto loss = [](auto v) {
    auto u = sin(v) * v + exp(-v * v);
    return mg::sum(u * u);
  };
  double sink = 0;
  // the loss transform, into a preallocated gradient: one pass, the loss summed on the device
  report("static_value_and_grad/" + sz,
         median_ms([&] { sink += mg::cuda::value_and_grad(loss).into(g)(x); }, reps));
  const auto f = [](auto v) {
    auto u = sin(v) * v + exp(-v * v);
    return u * u;
  };
  // the per-element form: values and gradients into new arrays, then a sum
  report("static_elementwise/" + sz, median_ms(
                                         [&] {
                                           auto [values, grad] =
                                               mg::cuda::elementwise_value_and_grad(f)(x);
                                           sink += mg::cuda::sum(values);
                                         },
                                         reps));
  // the runtime engine, eagerly: the same loss on a tensor
  mg::tensor t =
      mg::tensor(xt::xarray<float>(xt::linspace<float>(-1, 1, static_cast<std::size_t>(n))))
          .to(mg::device::cuda)
          .requires_grad_();
  report("eager_chain/" + sz, median_ms(
                                  [&] {
                                    const mg::tensor u = mg::sin(t) * t + mg::exp(-t * t);
                                    const mg::tensor l = mg::sum(u * u);
                                    (void)mg::autograd::grad({l}, {t});
                                  },
                                  n > (1 << 20) ? 5 : 50));
  if (sink == 12345.0) std::puts("");
}

void rows() {
  mg::manual_seed(0);
  const mg::tensor x =
      mg::randn({4096, 1024}, {.dtype = mg::f32, .device = mg::device::cuda}).requires_grad_();
  report("rows", median_ms(
                     [&] {
                       const mg::tensor l =
                           mg::mean(mg::logsumexp(x, 1)) + mg::sum(mg::softmax(x, 1) * x);
                       (void)mg::autograd::grad({l}, {x});
                     },
                     20));
}

void per_op() {
  const mg::tensor x =
      mg::full({1}, 0.5, {.dtype = mg::f32, .device = mg::device::cuda}).requires_grad_();
  report("per_op_100", median_ms(
                           [&] {
                             mg::tensor y = x;
                             for (int i = 0; i < 50; ++i) y = mg::sin(y) * 1.0001;
                             (void)mg::autograd::grad({mg::sum(y)}, {x});
                           },
                           20));
}

// The MLP 64x784 -> 128 -> 10 of the step workloads: its input, parameters and SGD update.
struct mlp_net {
  mg::tensor_options o{.dtype = mg::f32, .device = mg::device::cuda};
  mg::tensor x, w1, b1, w2, b2;
  mlp_net() {
    mg::manual_seed(0);
    x = mg::randn({64, 784}, o);
    w1 = (mg::randn({784, 128}, o) * 0.05).requires_grad_();
    b1 = mg::zeros({128}, o).requires_grad_();
    w2 = (mg::randn({128, 10}, o) * 0.1).requires_grad_();
    b2 = mg::zeros({10}, o).requires_grad_();
  }
  mg::tensor logits() const { return mg::matmul(mg::relu(mg::matmul(x, w1) + b1), w2) + b2; }
  void descend(const mg::tensor& loss) {
    const auto g = mg::autograd::grad({loss}, {w1, b1, w2, b2});
    mg::no_grad_guard no_grad;
    w1.sub_(g[0] * 0.01);
    b1.sub_(g[1] * 0.01);
    w2.sub_(g[2] * 0.01);
    b2.sub_(g[3] * 0.01);
  }
};

void mlp() {
  mlp_net net;
  std::vector<std::int64_t> labels(64);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 10);
  report("mlp_step", median_ms([&] { net.descend(mg::cross_entropy(net.logits(), labels)); }, 50));
}

// The same step captured in a CUDA graph (Note [CUDA graphs]): the cross-entropy written with a
// one-hot target on the device, since a step that copies its labels from the host cannot be
// captured.
void mlp_graph() {
  mlp_net net;
  xt::xarray<float> hot = xt::zeros<float>({64, 10});
  for (std::size_t i = 0; i < 64; ++i) hot(i, i % 10) = 1;
  const mg::tensor onehot = mg::tensor(hot).to(mg::device::cuda);
  const auto step = [&] {
    net.descend(-mg::sum(mg::log_softmax(net.logits(), 1) * onehot) / 64.0);
  };
  report("mlp_step_onehot", median_ms(step, 50));
  mg::cuda::graph graph;
  graph.capture(step);
  report("mlp_step_graph", median_ms([&] { graph.replay(); }, 50));
}

void matmul() {
  const std::int64_t n = 4096;
  mg::manual_seed(0);
  const mg::tensor a = mg::randn({n, n}, {.dtype = mg::f32, .device = mg::device::cuda}),
                   b = mg::randn({n, n}, {.dtype = mg::f32, .device = mg::device::cuda});
  report("matmul_4096", median_ms([&] { (void)mg::matmul(a, b); }, 10));
  thrust::device_vector<float> c(n * n);
  cublasHandle_t h;
  cublasCreate(&h);
  const float one = 1, zero = 0;
  const int m = static_cast<int>(n);
  const float* pa = a.impl()->data<float>();
  const float* pb = b.impl()->data<float>();
  report("cublas_sgemm_4096", median_ms(
                                  [&] {
                                    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, pb, m,
                                                pa, m, &zero, thrust::raw_pointer_cast(c.data()),
                                                m);
                                  },
                                  10));
  cublasDestroy(h);
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::puts("gpu_bench: no CUDA device");
    return 77;
  }
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) rounds = std::atoi(argv[i] + 9);
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, 0);
  std::printf("{\"device\": \"%s\"}\n", p.name);
  elementwise(std::int64_t{1} << 20);
  elementwise(std::int64_t{1} << 26);
  rows();
  per_op();
  mlp();
  mlp_graph();
  matmul();
}
