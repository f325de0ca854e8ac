// mg::tensor on device cuda, computed by the Thrust backend (on the CPP or OMP device system in
// CI, on a GPU in the CUDA leg). This file includes no Thrust header: the backend is registered
// by another translation unit of the same test program that includes <metagrad/cuda.hpp> (Note
// [Device backends]), as in a user's program.
//
// The checks: every op through check_arrays on device cuda (each gradient element against
// central differences in f64, Hessian-vector products); values and first and second derivatives
// against the same graph on the CPU; factories and transfers; a spy backend showing that the
// work runs in the backend; and the errors of device misuse.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/autograd.hpp>
#include <metagrad/function.hpp>
#include <metagrad/fuse.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

#include "support/custom_ops.hpp"
#include "support/harness_runtime.hpp"

using mg::tensor;
using mg::tensor_list;
using mg_test::check_arrays;
using mg_test::expect_error;

namespace {

constexpr mg::device cuda = mg::device::cuda;
constexpr mg_test::array_options on_cuda{.device = cuda};
constexpr mg_test::array_options on_cuda_positive{.lo = 0.5, .hi = 2.0, .device = cuda};
constexpr mg_test::array_options on_cuda_f32{.dtype = mg::f32, .device = cuda};
const mg::shape_t s23{2, 3};

tensor on(const xt::xarray<double>& a, mg::device d, bool grad = true) {
  return tensor(a).to(d).detach().requires_grad_(grad);
}

void expect_near_all(const tensor& a, const tensor& b, double tol, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const auto x = a.to_xtensor<double>(), y = b.to_xtensor<double>();
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_TRUE(mg_test::near_rel(x.data()[i], y.data()[i], tol)) << what << "[" << i << "]";
}

// f on device cuda against f on the CPU: value, gradients, and the gradients of sum(grad * v)
// (second order), to 1e-11 relative (the CPU computes on SIMD packs, whose exp and sin
// differ from the scalar ones in the last bits).
void expect_same_as_cpu(const std::function<tensor(const tensor_list&)>& f,
                        const std::vector<mg::shape_t>& shapes) {
  std::mt19937_64 gen(11);
  std::vector<xt::xarray<double>> x, v;
  for (const auto& s : shapes) x.push_back(mg_test::uniform(s, 0.5, 1.5, gen));
  for (const auto& s : shapes) v.push_back(mg_test::uniform(s, -1, 1, gen));
  auto run = [&](mg::device d) {
    tensor_list leaves;
    for (const auto& a : x) leaves.push_back(on(a, d));
    const tensor y = f(leaves);
    const tensor loss = mg::sum(y * y);
    const auto g = mg::autograd::grad({loss}, leaves, {}, {.create_graph = true});
    tensor s;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const tensor t = mg::sum(g[i] * tensor(v[i]).to(d));
      s = s.defined() ? s + t : t;
    }
    const auto h = mg::autograd::grad({s}, leaves, {}, {.allow_unused = true});
    tensor_list all{y};
    for (const auto& t : g) all.push_back(t);
    for (const auto& t : h) all.push_back(t);
    for (const auto& t : all)
      if (t.defined()) {
        EXPECT_EQ(t.device(), d);
      }
    return all;
  };
  const auto on_gpu = run(cuda), on_cpu = run(mg::device::cpu);
  ASSERT_EQ(on_gpu.size(), on_cpu.size());
  for (std::size_t i = 0; i < on_cpu.size(); ++i) {
    ASSERT_EQ(on_gpu[i].defined(), on_cpu[i].defined()) << "result " << i;
    if (on_cpu[i].defined()) expect_near_all(on_gpu[i], on_cpu[i], 1e-11, "cuda vs cpu");
  }
}

// A backend that counts the kernels it is asked for and forwards them to the Thrust backend; and
// per-op kernel tables that do the same for exp, mul and add.
struct spy {
  static inline const mg::detail::backend* real = nullptr;
  static inline int sums = 0, copies = 0, fills = 0;
  static void on_sum(mg::dtype d, const mg::detail::nd_space& s, const mg::detail::nd_operand& x,
                     std::uint32_t mask, void* out) {
    ++sums;
    real->sum(d, s, x, mask, out);
  }
  static void on_copy(const mg::detail::nd_space& s, mg::dtype ot, const mg::detail::nd_operand& o,
                      mg::dtype it, const mg::detail::nd_operand& i) {
    ++copies;
    real->copy(s, ot, o, it, i);
  }
  static void on_fill(void* p, mg::dtype d, std::int64_t n, double v) {
    ++fills;
    real->fill(p, d, n, v);
  }
};

template <class Op>
struct op_spy {
  static inline const mg::detail::elementwise_kernels* real = nullptr;
  static inline int forwards = 0, backwards = 0;
  static void forward(const void* op, mg::dtype v, const mg::detail::nd_space& s,
                      const mg::detail::nd_operand& out, const mg::detail::nd_operand* in) {
    ++forwards;
    real->forward(op, v, s, out, in);
  }
  static void backward(const void* op, mg::dtype v, const mg::detail::nd_space& s,
                       const mg::detail::nd_operand* in, const mg::detail::nd_operand& y,
                       const mg::detail::nd_operand& g, const mg::detail::nd_operand* grads) {
    ++backwards;
    real->backward(op, v, s, in, y, g, grads);
  }
  static inline const mg::detail::elementwise_kernels table{&forward, &backward};
  static void install() {
    auto& slot = mg::detail::op_kernels<Op>[static_cast<std::size_t>(mg::device_type::cuda)];
    real = slot;
    slot = &table;
  }
  static void uninstall() {
    mg::detail::op_kernels<Op>[static_cast<std::size_t>(mg::device_type::cuda)] = real;
  }
};

}  // namespace

TEST(DeviceTensor, ElementwiseOps) {
  check_arrays([](const tensor_list& x) { return x[0] + x[1]; }, {s23, s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return x[0] - x[1]; }, {s23, s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return x[0] * x[1]; }, {s23, s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return x[0] / x[1]; }, {s23, s23}, on_cuda_positive);
  check_arrays([](const tensor_list& x) { return -x[0]; }, {s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return exp(x[0]); }, {s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return log(x[0]); }, {s23}, on_cuda_positive);
  check_arrays([](const tensor_list& x) { return sin(x[0]); }, {s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return cos(x[0]); }, {s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return tanh(x[0]); }, {s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return pow(x[0], 2.5); }, {s23}, on_cuda_positive);
}

TEST(DeviceTensor, Broadcasting) {
  check_arrays([](const tensor_list& x) { return x[0] + x[1]; }, {{3, 1}, {1, 4}}, on_cuda);
  check_arrays([](const tensor_list& x) { return x[0] * x[1]; }, {{2, 3}, {3}}, on_cuda);
  check_arrays([](const tensor_list& x) { return x[0] / x[1]; }, {{2, 3}, {2, 1}},
               on_cuda_positive);
  check_arrays([](const tensor_list& x) { return x[0] - x[1]; }, {{}, {2, 3}}, on_cuda);
  check_arrays([](const tensor_list& x) { return 2 * x[0] + x[0] / 3.0 - 1 / (2.5 + x[0]); }, {s23},
               on_cuda);
  check_arrays([](const tensor_list& x) { return exp(x[0] * x[1]) * x[0]; }, {{4, 1, 2}, {3, 1}},
               on_cuda);
}

TEST(DeviceTensor, SumsAndViews) {
  check_arrays([](const tensor_list& x) { return mg::sum(x[0] * x[0]); }, {s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return x[0].sum(0) * x[0].sum(0); }, {s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return mg::sum(x[0] * x[0], 1); }, {s23}, on_cuda);
  check_arrays([](const tensor_list& x) { return mg::sum(x[0], -3); }, {{2, 3, 4}}, on_cuda);
  check_arrays([](const tensor_list& x) { return mg::sum(sin(x[0]), 1) * x[1]; }, {{2, 3, 4}, {4}},
               on_cuda);
  // non-contiguous operands: a transposed view, and an unsqueezed one broadcast against it
  check_arrays([](const tensor_list& x) { return mg::transpose(x[0]) * x[1]; }, {{3, 2}, {2, 3}},
               on_cuda);
  check_arrays([](const tensor_list& x) { return mg::sum(mg::transpose(x[0]), 0); }, {{3, 4}},
               on_cuda);
  check_arrays([](const tensor_list& x) { return mg::unsqueeze(x[0], 1) * x[1]; }, {{3}, {3, 2}},
               on_cuda);
  check_arrays(
      [](const tensor_list& x) {
        return mg::expand(x[0], {4, 3}) * x[1];
      },
      {{3}, {4, 3}}, on_cuda);
}

TEST(DeviceTensor, Float32AndPromotion) {
  check_arrays([](const tensor_list& x) { return sin(x[0]) * exp(x[1]); }, {s23, {3}}, on_cuda_f32);
  check_arrays([](const tensor_list& x) { return mg::sum(tanh(x[0]), 0); }, {{5, 7}}, on_cuda_f32);
  // f32 * f64 promotes to f64 on the device; the f32 input's gradient comes back in f32
  tensor a = tensor(xt::xarray<float>{1.5f, -0.5f}).to(cuda).requires_grad_();
  tensor b = tensor(xt::xarray<double>{2.0, 3.0}).to(cuda).requires_grad_();
  const tensor y = a * b;
  EXPECT_EQ(y.dtype(), mg::f64);
  EXPECT_EQ(y.device(), cuda);
  y.sum().backward();
  EXPECT_EQ(a.grad().dtype(), mg::f32);
  EXPECT_EQ(a.grad().device(), cuda);
  EXPECT_EQ(a.grad().to_xtensor<double>(), (xt::xarray<double>{2.0, 3.0}));
  EXPECT_EQ(b.grad().to_xtensor<double>(), (xt::xarray<double>{1.5, -0.5}));
}

TEST(DeviceTensor, CustomOps) {
  check_arrays([](const tensor_list& x) { return mg::apply<mg_test::hypot2>(x[0], x[1]); },
               {{3, 1}, {4}}, on_cuda);
  check_arrays([](const tensor_list& x) { return mg::apply<mg_test::softplus>(x[0]) * x[0]; },
               {s23}, on_cuda);
}

TEST(DeviceTensor, SameAsCpu) {
  expect_same_as_cpu(
      [](const tensor_list& x) {
        return (sin(x[0]) * x[1] + exp(x[0] * x[1])) / (1 + x[0] * x[0]) - pow(x[1], 1.5);
      },
      {{4, 5}, {5}});
  expect_same_as_cpu([](const tensor_list& x) { return mg::sum(tanh(x[0]) * x[1], 0); },
                     {{6, 3}, {6, 1}});
  expect_same_as_cpu([](const tensor_list& x) { return log(x[0]) - cos(mg::transpose(x[1])); },
                     {{2, 3}, {3, 2}});
  // large enough for the OMP device system to split the work between threads
  expect_same_as_cpu([](const tensor_list& x) { return mg::sum(sin(x[0]) * x[0], 1); },
                     {{3, 10007}});
}

TEST(DeviceTensor, FactoriesAndTransfers) {
  const tensor z = mg::zeros({2, 3}, {.device = cuda});
  EXPECT_EQ(z.device(), cuda);
  EXPECT_EQ(z.dtype(), mg::f32);
  EXPECT_EQ(z.to_xtensor<double>(), xt::zeros<double>({2, 3}));
  const tensor f = mg::full({4}, 2.5, {.dtype = mg::f64, .device = cuda, .requires_grad = true});
  EXPECT_TRUE(f.requires_grad());
  EXPECT_TRUE(f.is_leaf());
  EXPECT_EQ(f.to_xtensor<double>(), (xt::xarray<double>{2.5, 2.5, 2.5, 2.5}));
  EXPECT_EQ(mg::ones({3}, {.device = cuda}).sum().item<double>(), 3.0);
  EXPECT_EQ(mg::zeros({0, 3}, {.device = cuda}).sum(0).to_xtensor<double>(),
            xt::zeros<double>({3}));
  // randn draws on the host: the same seed gives the same numbers on either device
  mg::manual_seed(5);
  const tensor r1 = mg::randn({7}, {.dtype = mg::f64});
  mg::manual_seed(5);
  const tensor r2 = mg::randn({7}, {.dtype = mg::f64, .device = cuda});
  EXPECT_EQ(r2.device(), cuda);
  EXPECT_EQ(r1.to_xtensor<double>(), r2.to_xtensor<double>());
  // a round trip keeps the values; to() of a view copies only its elements
  const tensor m({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, mg::f64);
  const tensor back = m.to(cuda).t().to(mg::device::cpu);
  EXPECT_EQ(back.device(), mg::device::cpu);
  EXPECT_EQ(back.to_xtensor<double>(), xt::transpose(m.to_xtensor<double>()));
  EXPECT_EQ(m.to(cuda).t().contiguous().to_xtensor<double>(),
            xt::transpose(m.to_xtensor<double>()));
  EXPECT_EQ(tensor(4.0, mg::f64).to(cuda).item<double>(), 4.0);
}

TEST(DeviceTensor, GradientsCrossDevices) {
  // x lives on the CPU, the work on the device: the gradient comes back to x's device
  tensor x = tensor({0.5, -1.0, 2.0}, mg::f64).requires_grad_();
  const tensor y = x.to(cuda);
  EXPECT_EQ(y.grad_fn()->name(), std::string("to_device"));
  const tensor loss = (sin(y) * y).sum();
  EXPECT_EQ(loss.device(), cuda);
  loss.backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().device(), mg::device::cpu);
  const auto xv = x.to_xtensor<double>();
  const auto g = x.grad().to_xtensor<double>();
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(g(i), std::cos(xv(i)) * xv(i) + std::sin(xv(i)), 1e-14);
  // and twice: the gradient of the gradient, through both transfers
  tensor x2 = tensor(0.7, mg::f64).requires_grad_();
  const tensor y2 = x2.to(cuda);
  const auto g1 = mg::autograd::grad({sin(y2) * y2}, {x2}, {}, {.create_graph = true});
  EXPECT_EQ(g1[0].device(), mg::device::cpu);
  const auto g2 = mg::autograd::grad({g1[0]}, {x2});
  EXPECT_NEAR(g2[0].item<double>(), 2 * std::cos(0.7) - 0.7 * std::sin(0.7), 1e-14);
  // an explicit gradient on the device, accumulated twice into .grad()
  tensor w = tensor({1.0, 2.0}, mg::f64).to(cuda).requires_grad_();
  const tensor seed = tensor({3.0, 4.0}, mg::f64).to(cuda);
  (w * w).backward(seed, {.retain_graph = true});
  (w * w).backward(seed);
  EXPECT_EQ(w.grad().device(), cuda);
  EXPECT_EQ(w.grad().to_xtensor<double>(), (xt::xarray<double>{12.0, 32.0}));
}

TEST(DeviceTensor, InPlaceUnderNoGrad) {
  tensor a = tensor({1.0, 2.0, 3.0}, mg::f64).to(cuda);
  const std::uint64_t v0 = a.version();
  {
    mg::no_grad_guard ng;
    a.add_(tensor(1.0, mg::f64).to(cuda)).mul_(tensor({2.0, 3.0, 4.0}, mg::f64).to(cuda));
  }
  EXPECT_EQ(a.version(), v0 + 2);
  EXPECT_EQ(a.to_xtensor<double>(), (xt::xarray<double>{4.0, 9.0, 16.0}));
}

TEST(DeviceTensor, WorkRunsInTheBackend) {
  const mg::detail::backend* real = &mg::detail::backend_of(cuda, "test");
  spy::real = real;
  const mg::detail::backend counting{"spy",           real->allocate, real->release, real->to_host,
                                     real->from_host, &spy::on_fill,  &spy::on_copy, &spy::on_sum,
                                     real->prod,      real->max,      real->min};
  mg::detail::register_backend(mg::device_type::cuda, &counting);
  op_spy<mg::exp_op>::install();
  op_spy<mg::mul_op>::install();
  op_spy<mg::add_op>::install();
  tensor x = tensor({{0.1, 0.2, 0.3}, {0.4, 0.5, 0.6}}, mg::f64).to(cuda).requires_grad_();
  const int fills0 = spy::fills, copies0 = spy::copies;
  const tensor y = mg::sum(exp(x) * x.t().t(), 0);  // exp, mul, sum over an axis
  EXPECT_EQ(op_spy<mg::exp_op>::forwards, 1);
  EXPECT_EQ(op_spy<mg::mul_op>::forwards, 1);
  EXPECT_EQ(spy::sums, 1);
  y.backward(mg::ones({3}, {.dtype = mg::f64, .device = cuda}));
  EXPECT_GE(spy::fills, fills0 + 1);  // the seed
  // Note [One formula]: one fused kernel per node's backward, not a chain of tensor ops; the
  // gradient of sum(axis) and of the transposes are views
  EXPECT_EQ(op_spy<mg::mul_op>::backwards, 1);
  EXPECT_EQ(op_spy<mg::exp_op>::backwards, 1);
  EXPECT_EQ(op_spy<mg::add_op>::forwards, 1);  // x's two gradients summed
  EXPECT_EQ(spy::copies, copies0);  // .grad() takes over that sum, which nothing else holds
  op_spy<mg::exp_op>::uninstall();
  op_spy<mg::mul_op>::uninstall();
  op_spy<mg::add_op>::uninstall();
  mg::detail::register_backend(mg::device_type::cuda, real);
  const auto xv = x.to_xtensor<double>();
  const auto g = x.grad().to_xtensor<double>();
  for (std::size_t i = 0; i < xv.size(); ++i)
    EXPECT_NEAR(g.data()[i], std::exp(xv.data()[i]) * (1 + xv.data()[i]), 1e-14);
}

// Note [Asynchronous device work]: nothing of a forward and backward pass reads a device value on
// the host; the reductions whose CPU backward checks a count (prod for zeros, amax/amin for a NaN
// result) take their general formula there. Counted by a backend whose to_host counts.
struct host_reads {
  static inline const mg::detail::backend* real = nullptr;
  static inline int count = 0;
  static void to_host(void* dst, const void* src, std::size_t n) {
    ++count;
    real->to_host(dst, src, n);
  }
};

TEST(DeviceTensor, APassReadsNothingOnTheHost) {
  const mg::detail::backend* real = &mg::detail::backend_of(cuda, "test");
  host_reads::real = real;
  mg::detail::backend counting = *real;
  counting.to_host = &host_reads::to_host;
  mg::detail::register_backend(mg::device_type::cuda, &counting);
  tensor x = tensor({{0.5, 2.0, 2.0}, {-1.0, 0.0, 3.0}}, mg::f64).to(cuda).requires_grad_();
  host_reads::count = 0;
  const tensor loss = mg::prod(x, 1).sum() + mg::amax(x) + mg::amin(x, 0).sum() + mg::prod(x + 2);
  loss.backward();
  EXPECT_EQ(host_reads::count, 0);
  mg::detail::register_backend(mg::device_type::cuda, real);
  // the gradient: prod over rows (row 1 holds a zero: only that element's partial is not 0),
  // amax (the 3 at (1,2)), amin over columns (at (1,0), (1,1), (0,2)), and prod(x + 2) = p2
  const auto xv = x.to_xtensor<double>(), g = x.grad().to_xtensor<double>();
  double p2 = 1;
  for (double v : xv) p2 *= v + 2;
  const double want[2][3] = {{4 + p2 / 2.5, 1 + p2 / 4, 1 + 1 + p2 / 4},
                             {0 + 1 + p2 / 1, -3 + 1 + p2 / 2, 0 + 1 + p2 / 5}};
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j) EXPECT_NEAR(g(i, j), want[i][j], 1e-12) << i << "," << j;
}

// A user's op that no translation unit registered for the device (ops_test.cpp registers
// softplus and hypot2): the error names the op and the line that registers it.
struct cube_unregistered {
  MG_HD static auto forward(const auto& x) { return x * x * x; }
  MG_HD static auto backward(const auto& x, const auto&, const auto& g) { return 3 * x * x * g; }
};

TEST(DeviceTensor, UnregisteredUserOpSaysHowToRegisterIt) {
  const tensor x = tensor({1.0, 2.0}, mg::f64).to(cuda);
  expect_error([&] { (void)mg::apply<cube_unregistered>(x); },
               {"cube_unregistered", "no kernel on device cuda", "<metagrad/cuda.hpp>",
                "mg::cuda::register_ops<cube_unregistered>()"});
  // the same op runs on the CPU without registration
  EXPECT_EQ(mg::apply<cube_unregistered>(tensor({1.0, 2.0}, mg::f64)).to_xtensor<double>(),
            (xt::xarray<double>{1.0, 8.0}));
}

// Matrix products through the backend's gemm (cuBLAS on a GPU): every layout the runtime hands
// it (contiguous, a transposed view, a copy of a strided view, broadcast batches, vectors), with
// first and second derivatives against the CPU's BLAS.
TEST(DeviceTensor, MatrixProductsMatchTheCpu) {
  using L = const tensor_list&;
  expect_same_as_cpu([](L x) { return mg::matmul(x[0], x[1]); }, {{3, 4}, {4, 5}});
  expect_same_as_cpu([](L x) { return mg::matmul(x[0], x[1].t()); }, {{3, 4}, {5, 4}});
  expect_same_as_cpu([](L x) { return mg::matmul(x[0].t(), x[1].t()); }, {{4, 3}, {5, 4}});
  expect_same_as_cpu([](L x) { return mg::matmul(mg::slice(x[0], 1, 0, 8, 2), x[1]); },
                     {{3, 8}, {4, 2}});
  expect_same_as_cpu([](L x) { return mg::matmul(x[0], x[1]); }, {{4}, {4, 5}});
  expect_same_as_cpu([](L x) { return mg::matmul(x[0], x[1]); }, {{3, 4}, {4}});
  expect_same_as_cpu([](L x) { return mg::matmul(x[0], x[1]); }, {{1, 4}, {4, 1}});
  expect_same_as_cpu([](L x) { return mg::dot(x[0], x[1]); }, {{6}, {6}});
  expect_same_as_cpu([](L x) { return mg::outer(x[0], x[1]); }, {{3}, {2}});
  expect_same_as_cpu([](L x) { return mg::matmul(x[0], x[1]); }, {{2, 3, 4}, {4, 5}});
  expect_same_as_cpu([](L x) { return mg::matmul(x[0], x[1]); }, {{2, 1, 3, 4}, {3, 4, 2}});
  // an empty inner dimension gives zeros
  const tensor z =
      mg::matmul(mg::zeros({2, 0}, {.device = cuda}), mg::zeros({0, 3}, {.device = cuda}));
  EXPECT_EQ(z.device(), cuda);
  EXPECT_EQ(z.to_xtensor<double>(), xt::zeros<double>({2, 3}));
}

TEST(DeviceTensor, MatrixProductsInFloat32AndOfLargerSizes) {
  std::mt19937_64 gen(5);
  const auto a = mg_test::uniform({33, 70}, -1, 1, gen), b = mg_test::uniform({70, 19}, -1, 1, gen);
  const tensor on_cpu = mg::matmul(tensor(a).to(mg::f32), tensor(b).to(mg::f32));
  const tensor on_dev = mg::matmul(tensor(a).to(mg::f32).to(cuda), tensor(b).to(mg::f32).to(cuda));
  EXPECT_EQ(on_dev.dtype(), mg::f32);
  expect_near_all(on_dev.to(mg::device::cpu).to(mg::f64), on_cpu.to(mg::f64), 1e-5, "f32 matmul");
  // f64 against a plain triple loop
  const tensor c = mg::matmul(tensor(a).to(cuda), tensor(b).to(cuda));
  const auto got = c.to_xtensor<double>();
  for (std::size_t i = 0; i < 33; ++i)
    for (std::size_t j = 0; j < 19; ++j) {
      double want = 0;
      for (std::size_t p = 0; p < 70; ++p) want += a(i, p) * b(p, j);
      EXPECT_NEAR(got(i, j), want, 1e-12) << i << "," << j;
    }
}

// A two-layer network's loss on the device: log_softmax of tanh(x W1 + b1) W2, its gradients and
// Hessian-vector products against the CPU; and the central differences of check_arrays.
TEST(DeviceTensor, TwoLayerNetworkMatchesTheCpu) {
  using L = const tensor_list&;
  const auto net = [](L x) {
    return mg::log_softmax(mg::matmul(mg::tanh(mg::matmul(x[0], x[1]) + x[2]), x[3]), 1);
  };
  expect_same_as_cpu(net, {{8, 6}, {6, 5}, {5}, {5, 3}});
  check_arrays(net, {{4, 3}, {3, 5}, {5}, {5, 2}}, on_cuda);
}

TEST(DeviceTensor, MisuseThrowsMgError) {
  const tensor a = tensor({1.0, 2.0}, mg::f64).to(cuda), b({3.0, 4.0}, mg::f64);
  expect_error([&] { (void)(a + b); },
               {"add", "different devices", "[2] on cuda", "[2] on cpu", ".to(mg::device::"});
  expect_error(
      [&] { (void)mg::matmul(mg::unsqueeze(a, 0), mg::unsqueeze(b, 1)); },
      {"matmul", "different devices", "[1,2] on cuda", "[2,1] on cpu", ".to(mg::device::"});
  expect_error([&] { (void)mg::matmul(a.to(mg::i64), a.to(mg::i64)); },
               {"matmul", "floating dtype", "i64", ".to(mg::"});
  expect_error([&] { (void)mg::matmul(mg::unsqueeze(a, 0), mg::unsqueeze(a, 0)); },
               {"matmul", "[1,2]"});
  expect_error([&] { (void)mg::fuse([](auto x) { return x * x; })(a); },
               {"fuse", "device cuda", ".to(mg::device::cpu)"});
  tensor w = tensor({1.0, 2.0}, mg::f64).to(cuda).requires_grad_();
  expect_error(
      [&] {
        (w * w).backward(tensor({1.0, 1.0}, mg::f64));
      },
      {"backward", "gradient for output 0 is on device cpu", "output is on device cuda",
       ".to(mg::device::cuda)"});
  tensor c = tensor({1.0, 2.0}, mg::f64);
  expect_error(
      [&] {
        mg::no_grad_guard ng;
        c.add_(a);
      },
      {"add_", "different devices"});
  expect_error(
      [] {
        (void)mg::zeros({1, 1, 1, 1, 1, 1, 1, 1, 2}, {.device = cuda}).sum();
      },
      {"sum", "[1,1,1,1,1,1,1,1,2]", "9 dimensions", "at most 8"});
}
