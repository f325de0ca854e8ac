// The static engine's value and gradient of scalar functions of 1 to 5 inputs with shared
// subexpressions, each against the gradient a careful person writes by hand (one forward and one
// reverse sweep, the shared values computed once). The goal is the hand-written code's
// instruction count (docs/performance.md, "Scalar functions").
//
//   bench_static_scalars                      Google Benchmark: every function, both versions
//   bench_static_scalars --check F N hand|mg  F's gradient N times, for callgrind
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <benchmark/benchmark.h>

#include <metagrad/static.hpp>

namespace {

template <std::size_t N>
struct result {
  double v;
  std::array<double, N> d;
};

template <std::size_t N>
double total(const result<N>& r) {
  double acc = r.v;
  for (double g : r.d) acc += g;
  return acc;
}

// ---- the functions --------------------------------------------------------------------------

// 1. A softplus-weighted quotient: w = softplus(x), f = w y / (w + z^2).
constexpr auto quotient = [](auto x, auto y, auto z) {
  const auto w = mg::softplus(x);
  return w * y / (w + z * z);
};
// 2. Nested tanh, the input read at every level.
constexpr auto nested_tanh = [](auto x) { return tanh(x + 0.5 * tanh(x + 0.5 * tanh(x))); };
// 3. A shared subexpression under exp: u = x y, f = exp(u) sin(u) + exp(u) / (1 + u^2).
constexpr auto shared_exp = [](auto x, auto y) {
  const auto u = x * y;
  const auto e = exp(u);
  return e * sin(u) + e / (1 + u * u);
};
// 4. Five inputs: u = a b + c, v = u d - e, f = u exp(-v^2) + log1p(u^2).
constexpr auto five = [](auto a, auto b, auto c, auto d, auto e) {
  const auto u = a * b + c;
  const auto v = u * d - e;
  return u * exp(-(v * v)) + log1p(u * u);
};
// 5. A radius: r = sqrt(x^2 + y^2), f = sin(r) / r + cos(r) x.
constexpr auto radial = [](auto x, auto y) {
  const auto r = sqrt(x * x + y * y);
  return sin(r) / r + cos(r) * x;
};
// 6. A logistic gate: s = sigmoid(x y + z), f = s (1 - s) x + s z.
constexpr auto gate = [](auto x, auto y, auto z) {
  const auto s = mg::sigmoid(x * y + z);
  return s * (1 - s) * x + s * z;
};

// ---- by hand --------------------------------------------------------------------------------

[[gnu::noinline]] result<3> quotient_hand(double x, double y, double z) {
  const double ex = std::exp(x), w = std::log1p(ex), sig = ex / (1 + ex);  // softplus' = sigmoid
  const double q = w + z * z, inv = 1 / q, v = w * y * inv;
  // dv/dw = y/q - w y/q^2 = y z^2 / q^2; dv/dz = -w y 2z / q^2
  const double dw = y * z * z * inv * inv;
  return {v, {dw * sig, w * inv, -2 * z * v * inv}};
}

[[gnu::noinline]] result<1> nested_tanh_hand(double x) {
  const double t1 = std::tanh(x), a2 = x + 0.5 * t1, t2 = std::tanh(a2), a3 = x + 0.5 * t2,
               t3 = std::tanh(a3);
  const double g3 = 1 - t3 * t3;               // d f / d a3
  const double g2 = g3 * 0.5 * (1 - t2 * t2);  // d f / d a2
  const double g1 = g2 * 0.5 * (1 - t1 * t1);  // d f / d x through t1
  return {t3, {g3 + g2 + g1}};
}

[[gnu::noinline]] result<2> shared_exp_hand(double x, double y) {
  const double u = x * y, e = std::exp(u), s = std::sin(u), c = std::cos(u);
  const double d = 1 + u * u, inv = 1 / d;
  const double v = e * s + e * inv;
  // df/du = e s + e c + e/d - e 2u/d^2
  const double du = e * (s + c) + e * inv - 2 * u * e * inv * inv;
  return {v, {du * y, du * x}};
}

[[gnu::noinline]] result<5> five_hand(double a, double b, double c, double d, double e) {
  const double u = a * b + c, v = u * d - e, ev = std::exp(-(v * v)), uu = u * u;
  const double f = u * ev + std::log1p(uu);
  const double dv = -2 * v * u * ev;                 // d f / d v
  const double du = ev + 2 * u / (1 + uu) + dv * d;  // d f / d u, through v too
  return {f, {du * b, du * a, du, dv * u, -dv}};
}

[[gnu::noinline]] result<2> radial_hand(double x, double y) {
  const double r = std::sqrt(x * x + y * y), s = std::sin(r), c = std::cos(r), inv = 1 / r;
  const double f = s * inv + c * x;
  const double dr = (c * inv - s * inv * inv) - s * x;  // d f / d r
  return {f, {dr * x * inv + c, dr * y * inv}};
}

[[gnu::noinline]] result<3> gate_hand(double x, double y, double z) {
  const double s = 1 / (1 + std::exp(-(x * y + z)));
  const double f = s * (1 - s) * x + s * z;
  const double ds = (1 - 2 * s) * x + z;  // d f / d s
  const double dl = ds * s * (1 - s);     // d f / d (x y + z)
  return {f, {dl * y + s * (1 - s), dl * x, dl + s}};
}

// ---- by the static engine -------------------------------------------------------------------

template <std::size_t N, class G>
result<N> as_result(double v, const G& g) {
  result<N> r{v, {}};
  if constexpr (N == 1) {
    r.d[0] = g;
  } else {
    [&]<std::size_t... i>(std::index_sequence<i...>) { ((r.d[i] = std::get<i>(g)), ...); }
    (std::make_index_sequence<N>{});
  }
  return r;
}

[[gnu::noinline]] result<3> quotient_mg(double x, double y, double z) {
  const auto [v, g] = mg::value_and_grad(quotient)(x, y, z);
  return as_result<3>(v, g);
}
[[gnu::noinline]] result<1> nested_tanh_mg(double x) {
  const auto [v, g] = mg::value_and_grad(nested_tanh)(x);
  return as_result<1>(v, g);
}
[[gnu::noinline]] result<2> shared_exp_mg(double x, double y) {
  const auto [v, g] = mg::value_and_grad(shared_exp)(x, y);
  return as_result<2>(v, g);
}
[[gnu::noinline]] result<5> five_mg(double a, double b, double c, double d, double e) {
  const auto [v, g] = mg::value_and_grad(five)(a, b, c, d, e);
  return as_result<5>(v, g);
}
[[gnu::noinline]] result<2> radial_mg(double x, double y) {
  const auto [v, g] = mg::value_and_grad(radial)(x, y);
  return as_result<2>(v, g);
}
[[gnu::noinline]] result<3> gate_mg(double x, double y, double z) {
  const auto [v, g] = mg::value_and_grad(gate)(x, y, z);
  return as_result<3>(v, g);
}

// Do the two versions agree, value and every partial?
template <std::size_t N>
bool agree(const result<N>& h, const result<N>& m) {
  const auto near = [](double a, double b) { return std::abs(a - b) <= 1e-12 * (1 + std::abs(a)); };
  bool ok = near(h.v, m.v);
  for (std::size_t i = 0; i < N; ++i) ok = ok && near(h.d[i], m.d[i]);
  return ok;
}
bool agree(std::string_view f) {
  if (f == "quotient") return agree(quotient_hand(0.3, 0.7, 0.4), quotient_mg(0.3, 0.7, 0.4));
  if (f == "nested_tanh") return agree(nested_tanh_hand(0.3), nested_tanh_mg(0.3));
  if (f == "shared_exp") return agree(shared_exp_hand(0.3, 0.7), shared_exp_mg(0.3, 0.7));
  if (f == "five")
    return agree(five_hand(0.3, 0.7, -0.2, 0.9, 0.1), five_mg(0.3, 0.7, -0.2, 0.9, 0.1));
  if (f == "radial") return agree(radial_hand(0.3, 0.7), radial_mg(0.3, 0.7));
  if (f == "gate") return agree(gate_hand(0.3, 0.7, 0.4), gate_mg(0.3, 0.7, 0.4));
  return false;
}

// Function f's gradient (hand-written or metagrad's) at t and fixed other arguments, summed; one
// pointer, chosen once, so that --check counts the same calling code for both versions.
using runner = double (*)(double);
runner pick(std::string_view f, bool hand) {
  if (f == "quotient")
    return hand ? +[](double t) { return total(quotient_hand(t, 0.7, 0.4)); }
                : +[](double t) { return total(quotient_mg(t, 0.7, 0.4)); };
  if (f == "nested_tanh")
    return hand ? +[](double t) { return total(nested_tanh_hand(t)); }
                : +[](double t) { return total(nested_tanh_mg(t)); };
  if (f == "shared_exp")
    return hand ? +[](double t) { return total(shared_exp_hand(t, 0.7)); }
                : +[](double t) { return total(shared_exp_mg(t, 0.7)); };
  if (f == "five")
    return hand ? +[](double t) { return total(five_hand(t, 0.7, -0.2, 0.9, 0.1)); }
                : +[](double t) { return total(five_mg(t, 0.7, -0.2, 0.9, 0.1)); };
  if (f == "radial")
    return hand ? +[](double t) { return total(radial_hand(t, 0.7)); }
                : +[](double t) { return total(radial_mg(t, 0.7)); };
  if (f == "gate")
    return hand ? +[](double t) { return total(gate_hand(t, 0.7, 0.4)); }
                : +[](double t) { return total(gate_mg(t, 0.7, 0.4)); };
  std::fprintf(stderr, "unknown function %s\n", f.data());
  std::exit(2);
}

// G at x and the other arguments, x moving a little every call (so nothing is hoisted).
template <auto G, class... A>
void bm(benchmark::State& state, A... rest) {
  double x = 0.3, acc = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(x);
    acc += total(G(x, rest...));
    x += 1e-9;
  }
  benchmark::DoNotOptimize(acc);
}

// Registers the hand-written and the metagrad version of one function, at the same arguments.
template <auto Hand, auto Metagrad, class... A>
void register_pair(const std::string& name, A... rest) {
  benchmark::RegisterBenchmark((name + "/hand").c_str(),
                               [=](benchmark::State& s) { bm<Hand>(s, rest...); });
  benchmark::RegisterBenchmark((name + "/metagrad").c_str(),
                               [=](benchmark::State& s) { bm<Metagrad>(s, rest...); });
}

void register_all() {
  register_pair<quotient_hand, quotient_mg>("quotient", 0.7, 0.4);
  register_pair<nested_tanh_hand, nested_tanh_mg>("nested_tanh");
  register_pair<shared_exp_hand, shared_exp_mg>("shared_exp", 0.7);
  register_pair<five_hand, five_mg>("five", 0.7, -0.2, 0.9, 0.1);
  register_pair<radial_hand, radial_mg>("radial", 0.7);
  register_pair<gate_hand, gate_mg>("gate", 0.7, 0.4);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string_view(argv[1]) == "--check") {
    const long n = std::atol(argv[3]);
    const bool hand = std::string_view(argv[4]) == "hand";
    const runner run = pick(argv[2], hand);
    double acc = 0, t = 0.3;
    for (long i = 0; i < n; ++i, t += 1e-9) acc += run(t);
    std::printf("%.17g\n", acc);
    return 0;
  }
  if (argc == 3 && std::string_view(argv[1]) == "--agree") {  // value and partials, both ways
    const bool ok = agree(argv[2]);
    std::printf("%s: %s\n", argv[2], ok ? "the versions agree" : "the versions DIFFER");
    return ok ? 0 : 1;
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
