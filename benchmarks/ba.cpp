// Bundle adjustment, the reprojection Jacobian of the ADBench suite (Srajer, Kukelova and
// Fitzgibbon, "A benchmark of selected algorithmic differentiation tools on some problems in
// computer vision and machine learning", 2018): for each observation, the 2 x 15 Jacobian of the
// weighted reprojection error w (proj(cam, X) - feat) with respect to the camera's 11 parameters
// (Rodrigues rotation 3, centre 3, focal length 1, principal point 2, radial distortion 2), the
// point's 3 coordinates and the weight, and the derivative of the weight error 1 - w^2.
//
//   hand                the Jacobian differentiated by hand (below, chain rule by stages)
//   metagrad            mg::jacobian of the error written the natural way: 15 numbers in, the
//                       observed feature captured, literal constants inline
//   metagrad/arguments  the same with the feature passed as two more arguments
//   runtime             the same generic formula on mg::tensor, all observations at once: each
//                       input a tensor of one value per observation, one backward per row
//
// The instance has the layout of ADBench's first one (49 cameras, 7776 points, 31843
// observations, observation i seeing camera i mod 49 and point i mod 7776); its values come from a
// fixed-seed generator (small rotations, points in front of the cameras, focal length about 500).
//
//   bench_ba                  Google Benchmark: every version over all observations
//   bench_ba --compare        the largest differences: metagrad against hand, and hand against
//                             central differences
//   bench_ba --check V N      version V (hand, mg, args or rt) over all observations N times,
//                             for callgrind
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <benchmark/benchmark.h>

#include <xtensor/xtensor.hpp>

#include <metagrad/metagrad.hpp>

namespace {

constexpr int n_cams = 49, n_points = 7776, n_obs = 31843;

struct instance {
  std::vector<std::array<double, 11>> cams;
  std::vector<std::array<double, 3>> points;
  std::vector<double> weights;
  std::vector<std::array<double, 2>> feats;
};

// The projection of ADBench's definition: rotate X - C by the Rodrigues vector (theta != 0 in
// this instance), divide by depth, distort radially, scale by f and shift by the principal point.
template <class T>
std::array<T, 2> project(const std::array<T, 11>& c, const std::array<T, 3>& X) {
  using std::cos, std::sin, std::sqrt;
  const T y0 = X[0] - c[3], y1 = X[1] - c[4], y2 = X[2] - c[5];
  const T theta = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
  const T ct = cos(theta), st = sin(theta), w0 = c[0] / theta, w1 = c[1] / theta, w2 = c[2] / theta;
  const T tmp = (w0 * y0 + w1 * y1 + w2 * y2) * (1 - ct);
  const T x = y0 * ct + (w1 * y2 - w2 * y1) * st + w0 * tmp;
  const T y = y1 * ct + (w2 * y0 - w0 * y2) * st + w1 * tmp;
  const T z = y2 * ct + (w0 * y1 - w1 * y0) * st + w2 * tmp;
  const T px = x / z, py = y / z, rsq = px * px + py * py;
  const T L = 1 + c[9] * rsq + c[10] * rsq * rsq;
  return {px * L * c[6] + c[7], py * L * c[6] + c[8]};
}

instance make_instance() {
  std::mt19937_64 gen(20181127);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  instance in;
  for (int i = 0; i < n_cams; ++i)
    in.cams.push_back({0.2 * u(gen), 0.2 * u(gen), 0.2 * u(gen), 0.5 * u(gen), 0.5 * u(gen),
                       -5 + 0.5 * u(gen), 500 + 50 * u(gen), 5 * u(gen), 5 * u(gen),
                       -0.1 + 0.05 * u(gen), 0.01 * u(gen)});
  for (int j = 0; j < n_points; ++j) in.points.push_back({2 * u(gen), 2 * u(gen), 2 + u(gen)});
  for (int k = 0; k < n_obs; ++k) {
    const auto p = project(in.cams[k % n_cams], in.points[k % n_points]);
    in.weights.push_back(0.8 + 0.2 * u(gen));
    in.feats.push_back({p[0] + u(gen), p[1] + u(gen)});
  }
  return in;
}
const instance& data() {
  static const instance in = make_instance();
  return in;
}

// One observation's results: the error's 2 x 15 Jacobian (row-major) and the weight error's
// derivative. (Two entries more: the version with the feature as arguments writes 17 per row.)
struct jac {
  double J[32];
  double dwerr;
};

// ---- by hand --------------------------------------------------------------------------------

// Stage by stage: Y = X - C; Xc = R(r) Y with R's derivatives in r from the closed form
// Xc = cos(t) Y + a (r x Y) + b (r.Y) r, a = sin(t)/t, b = (1 - cos(t))/t^2; p = Xc[0:2]/Xc[2];
// d = p L(|p|^2); proj = f d + x0; err = w (proj - feat).
[[gnu::noinline]] void hand(const std::array<double, 11>& c, const std::array<double, 3>& X,
                            double w, const std::array<double, 2>& feat, jac& out) {
  const double r[3] = {c[0], c[1], c[2]};
  const double Y[3] = {X[0] - c[3], X[1] - c[4], X[2] - c[5]};
  const double t2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2], t = std::sqrt(t2);
  const double ct = std::cos(t), st = std::sin(t);
  const double a = st / t, b = (1 - ct) / t2;
  const double da = (ct - a) / t2, db = (a - 2 * b) / t2;  // d a / d r = da r, d b / d r = db r
  const double s = r[0] * Y[0] + r[1] * Y[1] + r[2] * Y[2];
  const double rxY[3] = {r[1] * Y[2] - r[2] * Y[1], r[2] * Y[0] - r[0] * Y[2],
                         r[0] * Y[1] - r[1] * Y[0]};
  double Xc[3], JY[3][3], Jr[3][3];  // d Xc / d Y, d Xc / d r
  for (int i = 0; i < 3; ++i) {
    Xc[i] = ct * Y[i] + a * rxY[i] + b * s * r[i];
    // d Xc / d r = u r^T + a [e_k x Y]_k + b (s I + r Y^T), u = -a Y + da (r x Y) + db s r
    const double ui = -a * Y[i] + da * rxY[i] + db * s * r[i];
    for (int k = 0; k < 3; ++k) {
      Jr[i][k] = ui * r[k] + b * (r[i] * Y[k] + (i == k ? s : 0));
      JY[i][k] = (i == k ? ct : 0) + b * r[i] * r[k];
    }
  }
  // the cross products: d (r x Y)_i / d r_k and d (r x Y)_i / d Y_k
  Jr[0][1] += a * Y[2], Jr[0][2] -= a * Y[1], Jr[1][0] -= a * Y[2];
  Jr[1][2] += a * Y[0], Jr[2][0] += a * Y[1], Jr[2][1] -= a * Y[0];
  JY[0][1] -= a * r[2], JY[0][2] += a * r[1], JY[1][0] += a * r[2];
  JY[1][2] -= a * r[0], JY[2][0] -= a * r[1], JY[2][1] += a * r[0];

  const double iz = 1 / Xc[2], p[2] = {Xc[0] * iz, Xc[1] * iz};
  const double rsq = p[0] * p[0] + p[1] * p[1];
  const double L = 1 + c[9] * rsq + c[10] * rsq * rsq, dL = c[9] + 2 * c[10] * rsq;
  const double f = c[6];
  // d proj / d Xc = f (L I + 2 dL p p^T) (d p / d Xc), d p / d Xc = [[iz, 0, -p0 iz], [0, iz, -p1
  // iz]]
  double dXc[2][3];
  for (int i = 0; i < 2; ++i) {
    const double m0 = f * (L * (i == 0) + 2 * dL * p[i] * p[0]);
    const double m1 = f * (L * (i == 1) + 2 * dL * p[i] * p[1]);
    dXc[i][0] = m0 * iz;
    dXc[i][1] = m1 * iz;
    dXc[i][2] = -(m0 * p[0] + m1 * p[1]) * iz;
  }
  for (int i = 0; i < 2; ++i) {
    double* row = out.J + 15 * i;
    for (int k = 0; k < 3; ++k) {
      double gr = 0, gy = 0;
      for (int j = 0; j < 3; ++j) {
        gr += dXc[i][j] * Jr[j][k];
        gy += dXc[i][j] * JY[j][k];
      }
      row[k] = w * gr;       // rotation
      row[3 + k] = -w * gy;  // centre
      row[11 + k] = w * gy;  // point
    }
    const double proj = p[i] * L * f + c[7 + i];
    row[6] = w * p[i] * L;  // focal length
    row[7] = w * (i == 0);  // principal point
    row[8] = w * (i == 1);
    row[9] = w * f * p[i] * rsq;  // distortion
    row[10] = w * f * p[i] * rsq * rsq;
    row[14] = proj - feat[i];  // weight
  }
  out.dwerr = -2 * w;
}

// ---- with metagrad ----------------------------------------------------------------------------

template <class Row>
void store_row(const Row& row, double* J) {
  std::apply(
      [&](auto... g) {
        std::size_t k = 0;
        ((J[k++] = g), ...);
      },
      row);
}

// The error as one writes it from the definition: the observed feature captured, the constants
// inline. Generic, so that the runtime engine runs the same formula on tensors.
const auto reprojection = [](const auto& fx, const auto& fy) {
  return [&fx, &fy](auto r0, auto r1, auto r2, auto c0, auto c1, auto c2, auto f, auto x0, auto y0,
                    auto k1, auto k2, auto X0, auto X1, auto X2, auto w) {
    // one declaration per value: each has its own expression type in the static engine
    const auto Y0 = X0 - c0;
    const auto Y1 = X1 - c1;
    const auto Y2 = X2 - c2;
    const auto theta = sqrt(r0 * r0 + r1 * r1 + r2 * r2);
    const auto ct = cos(theta);
    const auto st = sin(theta);
    const auto w0 = r0 / theta;
    const auto w1 = r1 / theta;
    const auto w2 = r2 / theta;
    const auto tmp = (w0 * Y0 + w1 * Y1 + w2 * Y2) * (1 - ct);
    const auto x = Y0 * ct + (w1 * Y2 - w2 * Y1) * st + w0 * tmp;
    const auto y = Y1 * ct + (w2 * Y0 - w0 * Y2) * st + w1 * tmp;
    const auto z = Y2 * ct + (w0 * Y1 - w1 * Y0) * st + w2 * tmp;
    const auto px = x / z;
    const auto py = y / z;
    const auto rsq = px * px + py * py;
    const auto L = 1 + k1 * rsq + k2 * rsq * rsq;
    return std::tuple{w * (px * L * f + x0 - fx), w * (py * L * f + y0 - fy)};
  };
};

[[gnu::noinline]] void with_metagrad(const std::array<double, 11>& c,
                                     const std::array<double, 3>& X, double w,
                                     const std::array<double, 2>& feat, jac& out) {
  const auto error = reprojection(feat[0], feat[1]);
  const auto [j0, j1] = mg::jacobian(error)(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8],
                                            c[9], c[10], X[0], X[1], X[2], w);
  store_row(j0, out.J);
  store_row(j1, out.J + 15);
  out.dwerr = mg::grad([](auto v) { return 1 - v * v; })(w);
}

// The feature as two more arguments: the only constants left are literals.
[[gnu::noinline]] void with_arguments(const std::array<double, 11>& c,
                                      const std::array<double, 3>& X, double w,
                                      const std::array<double, 2>& feat, jac& out) {
  const auto error = [](auto r0, auto r1, auto r2, auto c0, auto c1, auto c2, auto f, auto x0,
                        auto y0, auto k1, auto k2, auto X0, auto X1, auto X2, auto w, auto u,
                        auto v) {
    return reprojection(u, v)(r0, r1, r2, c0, c1, c2, f, x0, y0, k1, k2, X0, X1, X2, w);
  };
  const auto [j0, j1] = mg::jacobian(error)(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8],
                                            c[9], c[10], X[0], X[1], X[2], w, feat[0], feat[1]);
  store_row(j0, out.J);  // 17 entries: the last two (the feature's) are overwritten below
  store_row(j1, out.J + 15);
  out.dwerr = mg::grad([](auto v) { return 1 - v * v; })(w);
}

// The runtime engine: the same formula on all observations at once, each of the 15 inputs a tensor
// of one value per observation (gathered from the cameras and points); two backward passes, one
// per row, give every observation's Jacobian, since observation k's error reads only entry k.
double runtime_all(std::vector<jac>& out) {
  const instance& in = data();
  std::array<xt::xtensor<double, 1>, 17> cols;
  for (auto& c : cols) c = xt::xtensor<double, 1>::from_shape({std::size_t(n_obs)});
  for (int k = 0; k < n_obs; ++k) {
    const auto& c = in.cams[k % n_cams];
    const auto& X = in.points[k % n_points];
    for (int i = 0; i < 11; ++i) cols[i](k) = c[i];
    for (int i = 0; i < 3; ++i) cols[11 + i](k) = X[i];
    cols[14](k) = in.weights[k];
    cols[15](k) = in.feats[k][0];
    cols[16](k) = in.feats[k][1];
  }
  std::array<mg::tensor, 15> x;
  for (int i = 0; i < 15; ++i) x[i] = mg::tensor(cols[i]).requires_grad_();
  const mg::tensor fx(cols[15]), fy(cols[16]);
  const auto [e0, e1] = std::apply(reprojection(fx, fy), x);
  const mg::tensor seed = mg::ones({n_obs}, {.dtype = mg::f64});
  for (int row = 0; row < 2; ++row) {
    (row == 0 ? e0 : e1).backward(seed, {.retain_graph = row == 0});
    for (int i = 0; i < 15; ++i) {
      if (!x[i].grad().defined()) {  // the other row's principal point
        for (int k = 0; k < n_obs; ++k) out[k].J[15 * row + i] = 0;
        continue;
      }
      const auto g = x[i].grad().to_xtensor<double>();
      for (int k = 0; k < n_obs; ++k) out[k].J[15 * row + i] = g.data()[k];
      x[i].set_grad({});
    }
  }
  (1 - x[14] * x[14]).backward(seed);  // the weight error's derivative
  const auto dw = x[14].grad().to_xtensor<double>();
  for (int k = 0; k < n_obs; ++k) out[k].dwerr = dw.data()[k];
  x[14].set_grad({});
  return out[0].J[0] + out[n_obs - 1].J[29];
}

using version = void (*)(const std::array<double, 11>&, const std::array<double, 3>&, double,
                         const std::array<double, 2>&, jac&);

double run_all(version v, std::vector<jac>& out) {
  const instance& in = data();
  double acc = 0;
  for (int k = 0; k < n_obs; ++k) {
    v(in.cams[k % n_cams], in.points[k % n_points], in.weights[k], in.feats[k], out[k]);
    acc += out[k].J[0] + out[k].J[29];
  }
  return acc;
}

void bench(benchmark::State& state, version v) {
  std::vector<jac> out(n_obs);
  for (auto _ : state) benchmark::DoNotOptimize(run_all(v, out));
  state.counters["obs/s"] = benchmark::Counter(double(n_obs), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(bench, hand, hand)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bench, metagrad, with_metagrad)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bench, metagrad_arguments, with_arguments)->Unit(benchmark::kMillisecond);
void bench_runtime(benchmark::State& state) {
  std::vector<jac> out(n_obs);
  for (auto _ : state) benchmark::DoNotOptimize(runtime_all(out));
  state.counters["obs/s"] = benchmark::Counter(double(n_obs), benchmark::Counter::kIsRate);
}
BENCHMARK(bench_runtime)->Name("bench/runtime")->Unit(benchmark::kMillisecond);

// The largest difference between two versions over all observations, and between the hand
// Jacobian and central differences of project() (step 1e-6 relative) on the first 200.
int compare() {
  std::vector<jac> h(n_obs), m(n_obs), a(n_obs), r(n_obs);
  run_all(hand, h);
  run_all(with_metagrad, m);
  run_all(with_arguments, a);
  runtime_all(r);
  double dm = 0, da = 0, dr = 0, scale = 0;
  for (int k = 0; k < n_obs; ++k) {
    for (int i = 0; i < 30; ++i) {
      dm = std::max(dm, std::abs(m[k].J[i] - h[k].J[i]));
      da = std::max(da, std::abs(a[k].J[i] - h[k].J[i]));
      dr = std::max(dr, std::abs(r[k].J[i] - h[k].J[i]));
      scale = std::max(scale, std::abs(h[k].J[i]));
    }
    dm = std::max(dm, std::abs(m[k].dwerr - h[k].dwerr));
    dr = std::max(dr, std::abs(r[k].dwerr - h[k].dwerr));
  }
  const instance& in = data();
  double dfd = 0;
  for (int k = 0; k < 200; ++k) {
    std::array<double, 15> x{};
    for (int i = 0; i < 11; ++i) x[i] = in.cams[k % n_cams][i];
    for (int i = 0; i < 3; ++i) x[11 + i] = in.points[k % n_points][i];
    x[14] = in.weights[k];
    const auto err = [&](const std::array<double, 15>& y) {
      std::array<double, 11> c{};
      std::array<double, 3> X{};
      for (int i = 0; i < 11; ++i) c[i] = y[i];
      for (int i = 0; i < 3; ++i) X[i] = y[11 + i];
      const auto p = project(c, X);
      return std::array<double, 2>{y[14] * (p[0] - in.feats[k][0]),
                                   y[14] * (p[1] - in.feats[k][1])};
    };
    for (int j = 0; j < 15; ++j) {
      auto xp = x, xm = x;
      const double step = 1e-6 * std::max(1.0, std::abs(x[j]));
      xp[j] += step;
      xm[j] -= step;
      const auto ep = err(xp), em = err(xm);
      for (int i = 0; i < 2; ++i) {
        const double fd = (ep[i] - em[i]) / (2 * step);
        dfd = std::max(dfd, std::abs(fd - h[k].J[15 * i + j]) / std::max(1.0, std::abs(fd)));
      }
    }
  }
  std::printf(
      "largest |J|: %.3g\nmetagrad - hand: %.3g\nmetagrad (arguments) - hand: %.3g\n"
      "runtime engine - hand: %.3g\n"
      "hand - central differences (relative, 200 observations): %.3g\n",
      scale, dm, da, dr, dfd);
  return dm <= 1e-9 * scale && da <= 1e-9 * scale && dr <= 1e-9 * scale && dfd <= 1e-5 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--compare") return compare();
  if (argc > 3 && std::string(argv[1]) == "--check") {
    const std::string v = argv[2];
    const int n = std::atoi(argv[3]);
    std::vector<jac> out(n_obs);
    double acc = 0;
    for (int i = 0; i < n; ++i)
      acc += v == "rt" ? runtime_all(out)
                       : run_all(v == "hand" ? hand
                                 : v == "mg" ? with_metagrad
                                             : with_arguments,
                                 out);
    std::printf("%.17g\n", acc);
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
