// The static engine on small fixed architectures, value and gradient in
// float64, each against what a careful human writes by hand with the same flags: SIMD
// accumulators (xsimd), one pass where the maths allows, the gradient stored once into a new
// array of the argument's type. Every function runs on xt::xtensor and on xt::xtensor_fixed.
//
//   sum        sum(x), n = 1000
//   prod       prod(x)
//   lse        log(sum(exp(x))) (hand: SIMD exp, exp(x) stored once and scaled)
//   normal     the normal log-density of n points, d/d(mu, sigma)
//   tanh_wx    sum(tanh(W x)), W 32x32, d/dW and d/dx (hand: the same BLAS for W x, W^T d);
//              also with x as a 32x1 column matrix (kinds column and fixedcolumn)
//   expr2      sum(((sin(x)*y + exp(x*y))^2) / (1 + x*x)), d/dx and d/dy (hand: the same inline
//              trigonometry as metagrad's packs, Note [Inline trigonometry])
//
// `bench_suite --check N NAME` runs one case N times without Google Benchmark, for instruction
// counts under callgrind (docs/performance.md); NAME is e.g. lse_fixed_metagrad.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>
#include <xtensor/xfixed.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>

#include <metagrad/metagrad.hpp>

extern "C" void dgemv_(const char* trans, const int* m, const int* n, const double* alpha,
                       const double* a, const int* lda, const double* x, const int* incx,
                       const double* beta, double* y, const int* incy);

namespace {

constexpr std::size_t n = 1000, w_n = 32;
using B = xsimd::batch<double>;
constexpr std::size_t lanes = B::size;

using dyn_vec = xt::xtensor<double, 1>;
using dyn_mat = xt::xtensor<double, 2>;
using fix_vec = xt::xtensor_fixed<double, xt::xshape<n>>;
using fix_wvec = xt::xtensor_fixed<double, xt::xshape<w_n>>;
using fix_mat = xt::xtensor_fixed<double, xt::xshape<w_n, w_n>>;
using dyn_col = xt::xtensor<double, 2>;  // x as a column matrix, [w_n, 1]
using fix_col = xt::xtensor_fixed<double, xt::xshape<w_n, 1>>;

template <class V>
V random_vector(std::size_t size, double lo, double hi, int seed) {
  xt::random::seed(seed);
  if constexpr (xt::get_rank<V>::value == 2) {  // a column
    V v = xt::random::rand<double>({size, std::size_t{1}}, lo, hi);
    return v;
  } else {
    V v = xt::random::rand<double>({size}, lo, hi);
    return v;
  }
}
template <class M>
M random_matrix(double lo, double hi, int seed) {
  xt::random::seed(seed);
  M m = xt::random::rand<double>({w_n, w_n}, lo, hi);
  return m;
}

template <class V>
V empty_like(const V& x) {
  if constexpr (requires { V::from_shape(x.shape()); }) {
    return V::from_shape(x.shape());
  } else {
    return V{};
  }
}

double hsum(const B& b) { return xsimd::hadd(b); }
double hprod(const B& b) {
  alignas(B::arch_type::alignment()) double v[lanes];
  b.store_aligned(v);
  double p = 1;
  for (double e : v) p *= e;
  return p;
}

// ---- the functions, written once for metagrad ----------------------------------------------

constexpr auto sum_f = [](auto x) { return sum(x); };
constexpr auto prod_f = [](auto x) { return prod(x); };
constexpr auto lse_f = [](auto x) { return log(sum(exp(x))); };
// the normal log-density up to its constant, of the points x, with respect to (mu, sigma)
constexpr auto normal_f = [](auto x, auto mu, auto sigma) {
  const auto z = (x - mu) / sigma;
  return sum(-0.5 * z * z - log(sigma));
};
constexpr auto tanh_wx_f = [](auto w, auto x) { return sum(tanh(matmul(w, x))); };
constexpr auto expr2_f = [](auto x, auto y) {
  const auto t = sin(x) * y + exp(x * y);
  return sum(t * t / (1 + x * x));
};

// ---- by hand --------------------------------------------------------------------------------

template <class V>
std::pair<double, V> sum_hand(const V& x) {
  B acc(0.0);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) acc += B::load_unaligned(x.data() + i);
  double s = hsum(acc);
  for (; i < n; ++i) s += x.data()[i];
  V g = empty_like(x);
  std::fill(g.begin(), g.end(), 1.0);
  return {s, std::move(g)};
}

// prod and its gradient p / x_i; with a zero among x the gradient is the product of the others
template <class V>
std::pair<double, V> prod_hand(const V& x) {
  B acc(1.0);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) acc *= B::load_unaligned(x.data() + i);
  double p = hprod(acc);
  for (; i < n; ++i) p *= x.data()[i];
  V g = empty_like(x);
  if (p != 0) {
    const B pb(p);
    for (i = 0; i + lanes <= n; i += lanes)
      (pb / B::load_unaligned(x.data() + i)).store_unaligned(g.data() + i);
    for (; i < n; ++i) g.data()[i] = p / x.data()[i];
  } else {  // rare: fall back to products of the others
    for (std::size_t j = 0; j < n; ++j) {
      double q = 1;
      for (std::size_t k = 0; k < n; ++k)
        if (k != j) q *= x.data()[k];
      g.data()[j] = q;
    }
  }
  return {p, std::move(g)};
}

template <class V>
std::pair<double, V> lse_hand(const V& x) {
  V g = empty_like(x);
  B acc(0.0);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const B e = xsimd::exp(B::load_unaligned(x.data() + i));
    e.store_unaligned(g.data() + i);
    acc += e;
  }
  double s = hsum(acc);
  for (; i < n; ++i) s += (g.data()[i] = std::exp(x.data()[i]));
  const double inv = 1 / s;
  const B ib(inv);
  for (i = 0; i + lanes <= n; i += lanes)
    (B::load_unaligned(g.data() + i) * ib).store_unaligned(g.data() + i);
  for (; i < n; ++i) g.data()[i] *= inv;
  return {std::log(s), std::move(g)};
}

struct normal_result {
  double value, dmu, dsigma;
};
template <class V>
normal_result normal_hand(const V& x, double mu, double sigma) {
  const double is = 1 / sigma;
  const B mub(mu), isb(is);
  B zz(0.0), zs(0.0);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const B z = (B::load_unaligned(x.data() + i) - mub) * isb;
    zz += z * z;
    zs += z;
  }
  double szz = hsum(zz), sz = hsum(zs);
  for (; i < n; ++i) {
    const double z = (x.data()[i] - mu) * is;
    szz += z * z;
    sz += z;
  }
  return {-0.5 * szz - double(n) * std::log(sigma), sz * is, szz * is - double(n) * is};
}

// y = W x by BLAS gemv (row-major W is column-major W^T), t = tanh(y), dW = d x^T, dx = W^T d
void gemv(const char* trans, const double* a, const double* x, double* y) {
  const int m = int(w_n), one = 1;
  const double alpha = 1, beta = 0;
  dgemv_(trans, &m, &m, &alpha, a, &m, x, &one, &beta, y, &one);
}
template <class M, class V>
std::tuple<double, M, V> tanh_wx_hand(const M& w, const V& x) {
  double y[w_n], d[w_n];
  gemv("T", w.data(), x.data(), y);  // y = W x
  double value = 0;
  for (std::size_t i = 0; i < w_n; ++i) {
    const double t = std::tanh(y[i]);
    value += t;
    d[i] = 1 - t * t;
  }
  M dw = empty_like(w);
  for (std::size_t i = 0; i < w_n; ++i)
    for (std::size_t j = 0; j < w_n; ++j) dw.data()[i * w_n + j] = d[i] * x.data()[j];
  V dx = empty_like(x);
  gemv("N", w.data(), d, dx.data());  // dx = W^T d
  return {value, std::move(dw), std::move(dx)};
}

template <class V>
std::tuple<double, V, V> expr2_hand(const V& x, const V& y) {
  V gx = empty_like(x), gy = empty_like(y);
  B acc(0.0);
  std::size_t i = 0;
  const auto step = [](const auto& xv, const auto& yv, auto& value, auto& dx, auto& dy) {
    using T = std::remove_cvref_t<decltype(xv)>;
    const T s = mg::detail::inline_trig<true>(xv), c = mg::detail::inline_trig<false>(xv);
    const T e = xsimd::exp(xv * yv);
    const T t = s * yv + e, q = T(1.0) / (T(1.0) + xv * xv);
    value = t * t * q;
    const T dt = T(2.0) * t * q;  // d/dt
    dx = dt * (c * yv + yv * e) - value * T(2.0) * xv * q;
    dy = dt * (s + xv * e);
  };
  for (; i + lanes <= n; i += lanes) {
    B v, dx, dy;
    step(B::load_unaligned(x.data() + i), B::load_unaligned(y.data() + i), v, dx, dy);
    acc += v;
    dx.store_unaligned(gx.data() + i);
    dy.store_unaligned(gy.data() + i);
  }
  double value = hsum(acc);
  for (; i < n; ++i) {
    const double xv = x.data()[i], yv = y.data()[i];
    const double s = std::sin(xv), c = std::cos(xv), e = std::exp(xv * yv);
    const double t = s * yv + e, q = 1 / (1 + xv * xv), v = t * t * q, dt = 2 * t * q;
    value += v;
    gx.data()[i] = dt * (c * yv + yv * e) - v * 2 * xv * q;
    gy.data()[i] = dt * (s + xv * e);
  }
  return {value, std::move(gx), std::move(gy)};
}

// ---- the cases -------------------------------------------------------------------------------

template <class V>
struct vec_inputs {
  V x = random_vector<V>(n, 0.5, 1.5, 1), y = random_vector<V>(n, -1.0, 1.0, 2);
};
template <class M, class V>
struct mat_inputs {
  M w = random_matrix<M>(-0.2, 0.2, 3);
  V x = random_vector<V>(w_n, -1.0, 1.0, 4);
};

// Each case returns a checksum of its results, so that nothing is optimised away and the
// metagrad and hand versions can be compared.
template <class V>
std::map<std::string, std::function<double()>> vec_cases(const std::string& kind) {
  auto in = std::make_shared<vec_inputs<V>>();
  const auto first = [](const auto& r) { return r.first + r.second.data()[n / 2]; };
  std::map<std::string, std::function<double()>> c;
  c["sum_" + kind + "_metagrad"] = [=] { return first(mg::value_and_grad(sum_f)(in->x)); };
  c["sum_" + kind + "_hand"] = [=] { return first(sum_hand(in->x)); };
  c["prod_" + kind + "_metagrad"] = [=] { return first(mg::value_and_grad(prod_f)(in->x)); };
  c["prod_" + kind + "_hand"] = [=] { return first(prod_hand(in->x)); };
  c["lse_" + kind + "_metagrad"] = [=] { return first(mg::value_and_grad(lse_f)(in->x)); };
  c["lse_" + kind + "_hand"] = [=] { return first(lse_hand(in->x)); };
  c["normal_" + kind + "_metagrad"] = [=] {
    const auto [v, g] = mg::value_and_grad<1, 2>(normal_f)(in->x, 0.9, 0.7);
    return v + std::get<0>(g) + std::get<1>(g);
  };
  c["normal_" + kind + "_hand"] = [=] {
    const auto r = normal_hand(in->x, 0.9, 0.7);
    return r.value + r.dmu + r.dsigma;
  };
  c["expr2_" + kind + "_metagrad"] = [=] {
    const auto [v, g] = mg::value_and_grad(expr2_f)(in->x, in->y);
    return v + std::get<0>(g).data()[n / 2] + std::get<1>(g).data()[n / 3];
  };
  c["expr2_" + kind + "_hand"] = [=] {
    const auto [v, gx, gy] = expr2_hand(in->x, in->y);
    return v + gx.data()[n / 2] + gy.data()[n / 3];
  };
  return c;
}
template <class M, class V>
std::map<std::string, std::function<double()>> mat_cases(const std::string& kind) {
  auto in = std::make_shared<mat_inputs<M, V>>();
  std::map<std::string, std::function<double()>> c;
  c["tanh_wx_" + kind + "_metagrad"] = [=] {
    const auto [v, g] = mg::value_and_grad(tanh_wx_f)(in->w, in->x);
    return v + std::get<0>(g).data()[5] + std::get<1>(g).data()[7];
  };
  c["tanh_wx_" + kind + "_hand"] = [=] {
    const auto [v, dw, dx] = tanh_wx_hand(in->w, in->x);
    return v + dw.data()[5] + dx.data()[7];
  };
  return c;
}

std::map<std::string, std::function<double()>> all_cases() {
  std::map<std::string, std::function<double()>> c;
  c.merge(vec_cases<dyn_vec>("xtensor"));
  c.merge(vec_cases<fix_vec>("fixed"));
  c.merge(mat_cases<dyn_mat, dyn_vec>("xtensor"));
  c.merge(mat_cases<fix_mat, fix_wvec>("fixed"));
  c.merge(mat_cases<dyn_mat, dyn_col>("column"));
  c.merge(mat_cases<fix_mat, fix_col>("fixedcolumn"));
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const auto cases = all_cases();
  if (argc == 4 && std::string(argv[1]) == "--check") {
    const long reps = std::atol(argv[2]);
    const auto it = cases.find(argv[3]);
    if (it == cases.end()) {
      std::fprintf(stderr, "no case %s\n", argv[3]);
      return 2;
    }
    double acc = 0;
    for (long r = 0; r < reps; ++r) acc += it->second();
    std::printf("%.17g\n", acc / double(reps));
    return 0;
  }
  if (argc == 2 && std::string(argv[1]) == "--compare") {  // metagrad against hand, checksums
    int bad = 0;
    for (const auto& [name, f] : cases) {
      if (name.ends_with("_hand")) continue;
      const std::string base = name.substr(0, name.size() - 9);
      const double a = f(), b = cases.at(base + "_hand")();
      const bool ok = std::fabs(a - b) <= 1e-9 * std::fmax(1.0, std::fabs(b));
      std::printf("%-22s metagrad %.15g  hand %.15g  %s\n", base.c_str(), a, b, ok ? "" : "DIFFER");
      bad += !ok;
    }
    return bad == 0 ? 0 : 1;
  }
  for (const auto& [name, f] : cases)
    benchmark::RegisterBenchmark(name.c_str(), [f](benchmark::State& state) {
      for (auto _ : state) benchmark::DoNotOptimize(f());
    })->Unit(benchmark::kNanosecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
