// The runtime engine at scale: chains of recorded ops on a one-element tensor,
// where the cost is the engine's own (recording, the graph task, allocation), not arithmetic.
//   - BM_chain_*_1e6: a chain of 1,000,000 ops, forward, backward and freeing timed apart
//     (counters forward_s, backward_s, free_s), and the peak RSS of a whole program that runs it
//     once (peak_rss_MiB: VmHWM of a fresh process, `bench_runtime_chain --peak-rss OP N`).
//   - BM_per_op_*: a 1000-op chain forward and backward, repeated; per_op is the time per op.
//   - BM_*_hand_written: the same chains as a plain double loop with a hand-written tape and
//     reverse pass, the floor of any tape-based engine.
// See docs/performance.md ("Runtime engine at scale") for the figures.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <benchmark/benchmark.h>

#include <metagrad/metagrad.hpp>

namespace {

using clock_type = std::chrono::steady_clock;
constexpr double factor = 1.0000001;

double seconds(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A field of /proc/self/status in kB ("VmHWM:", "VmRSS:"), or -1.
long status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::strlen(key)));
  return -1;
}

enum class op { mul, sin, mul_tensor, sin_add };

op parse_op(std::string_view s) {
  return s == "sin"          ? op::sin
         : s == "mul_tensor" ? op::mul_tensor
         : s == "sin_add"    ? op::sin_add
                             : op::mul;
}
const char* op_name(op o) {
  return o == op::sin          ? "sin"
         : o == op::mul_tensor ? "mul_tensor"
         : o == op::sin_add    ? "sin_add"
                               : "mul";
}
// The nodes one step records.
long nodes_per_step(op o) { return o == op::sin_add ? 2 : 1; }

// y = y * 1.0000001 (a number operand), y = sin(y), y = y * w (w a 0-d tensor without grad), or
// y = sin(y) + 0.5 (two nodes).
mg::tensor step(op o, const mg::tensor& y, const mg::tensor& w) {
  switch (o) {
    case op::sin:
      return mg::sin(y);
    case op::mul_tensor:
      return y * w;
    case op::sin_add:
      return mg::sin(y) + 0.5;
    default:
      return y * factor;
  }
}

struct chain_times {
  double forward = 0, backward = 0, free = 0, grad = 0;
};

// A chain of n recorded nodes.
chain_times run_chain(op o, long n) {
  chain_times t;
  const mg::tensor x = mg::tensor(0.5, mg::f64).requires_grad_();
  const mg::tensor w(factor, mg::f64);
  const auto t0 = clock_type::now();
  mg::tensor y = x;
  for (long i = 0; i < n / nodes_per_step(o); ++i) y = step(o, y, w);
  const auto t1 = clock_type::now();
  y.backward();
  const auto t2 = clock_type::now();
  y = mg::tensor{};
  const auto t3 = clock_type::now();
  t.forward = seconds(t0, t1);
  t.backward = seconds(t1, t2);
  t.free = seconds(t2, t3);
  t.grad = x.grad().item<double>();
  return t;
}

// The whole-program peak RSS of one chain of n ops, in MiB, measured in a fresh process.
double peak_rss_mib(op o, long n) {
  // this program, by its path: under the shell of popen, /proc/self/exe is the shell
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string cmd =
      "'" + self + "' --peak-rss " + std::string(op_name(o)) + " " + std::to_string(n);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  double mb = -1;
  if (std::fscanf(p, "%lf", &mb) != 1) mb = -1;
  pclose(p);
  return mb;
}

void BM_chain_1e6(benchmark::State& state, op o) {
  constexpr long n = 1'000'000;
  chain_times sum;
  for (auto _ : state) {
    const chain_times t = run_chain(o, n);
    state.SetIterationTime(t.forward + t.backward + t.free);
    sum.forward += t.forward;
    sum.backward += t.backward;
    sum.free += t.free;
    benchmark::DoNotOptimize(t.grad);
  }
  const auto avg = benchmark::Counter::kAvgIterations;
  state.counters["forward_s"] = benchmark::Counter(sum.forward, avg);
  state.counters["backward_s"] = benchmark::Counter(sum.backward, avg);
  state.counters["free_s"] = benchmark::Counter(sum.free, avg);
  state.counters["peak_rss_MiB"] = peak_rss_mib(o, n);
}
void BM_chain_mul_1e6(benchmark::State& state) { BM_chain_1e6(state, op::mul); }
void BM_chain_sin_1e6(benchmark::State& state) { BM_chain_1e6(state, op::sin); }
void BM_chain_mul_tensor_1e6(benchmark::State& state) { BM_chain_1e6(state, op::mul_tensor); }
void BM_chain_sin_add_1e6(benchmark::State& state) { BM_chain_1e6(state, op::sin_add); }

// The floor: y *= c with the tape of multipliers, then the reverse pass g *= c.
void BM_chain_mul_1e6_hand_written(benchmark::State& state) {
  constexpr long n = 1'000'000;
  for (auto _ : state) {
    std::vector<double> tape;
    double y = 0.5;
    for (long i = 0; i < n; ++i) {
      tape.push_back(factor);
      y *= tape.back();
    }
    double g = 1;
    for (long i = n; i-- > 0;) g *= tape[static_cast<std::size_t>(i)];
    benchmark::DoNotOptimize(y);
    benchmark::DoNotOptimize(g);
  }
}

// Per op: a 1000-op chain forward and backward on a one-element f64 tensor (and freed).
constexpr long short_chain = 1000;

void BM_per_op(benchmark::State& state, op o) {
  for (auto _ : state) benchmark::DoNotOptimize(run_chain(o, short_chain).grad);
  state.counters["per_op"] = benchmark::Counter(
      static_cast<double>(short_chain),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
void BM_per_op_mul(benchmark::State& state) { BM_per_op(state, op::mul); }
void BM_per_op_mul_tensor(benchmark::State& state) { BM_per_op(state, op::mul_tensor); }
void BM_per_op_sin(benchmark::State& state) { BM_per_op(state, op::sin); }

template <bool Sin>
void BM_per_op_hand_written(benchmark::State& state) {
  std::vector<double> tape;
  for (auto _ : state) {
    tape.clear();
    double y = 0.5;
    for (long i = 0; i < short_chain; ++i) {
      tape.push_back(Sin ? std::cos(y) : factor);  // the local derivative
      y = Sin ? std::sin(y) : y * factor;
    }
    double g = 1;
    for (long i = short_chain; i-- > 0;) g *= tape[static_cast<std::size_t>(i)];
    benchmark::DoNotOptimize(y);
    benchmark::DoNotOptimize(g);
  }
  state.counters["per_op"] = benchmark::Counter(
      static_cast<double>(short_chain),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
void BM_per_op_mul_hand_written(benchmark::State& state) { BM_per_op_hand_written<false>(state); }
void BM_per_op_sin_hand_written(benchmark::State& state) { BM_per_op_hand_written<true>(state); }

BENCHMARK(BM_chain_mul_1e6)
    ->UseManualTime()
    ->Iterations(1)
    ->Repetitions(5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_chain_sin_1e6)
    ->UseManualTime()
    ->Iterations(1)
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_chain_mul_tensor_1e6)
    ->UseManualTime()
    ->Iterations(1)
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_chain_sin_add_1e6)
    ->UseManualTime()
    ->Iterations(1)
    ->Repetitions(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_chain_mul_1e6_hand_written)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_per_op_mul)->Repetitions(5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_per_op_mul_tensor)->Repetitions(5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_per_op_sin)->Repetitions(5)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_per_op_mul_hand_written)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_per_op_sin_hand_written)->Unit(benchmark::kMicrosecond);

}  // namespace

// `bench_runtime_chain --peak-rss mul|sin|mul_tensor|sin_add N` runs one chain of N nodes (forward,
// backward, free) and prints the peak RSS of the whole program in MiB; `--chain OP N` prints the
// phases' times too (and runs under callgrind or massif without Google Benchmark).
int main(int argc, char** argv) {
  if (argc == 4 &&
      (std::string_view(argv[1]) == "--peak-rss" || std::string_view(argv[1]) == "--chain")) {
    const chain_times t = run_chain(parse_op(argv[2]), std::atol(argv[3]));
    const double mb = static_cast<double>(status_kb("VmHWM:")) / 1024.0;
    if (std::string_view(argv[1]) == "--peak-rss")
      std::printf("%.1f\n", mb);
    else
      std::printf("forward %.3f s  backward %.3f s  free %.3f s  peak RSS %.1f MiB  grad %.9g\n",
                  t.forward, t.backward, t.free, mb, t.grad);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
