// The runtime engine's ops on the CPU at the sizes people train with, one workload per
// benchmark, named as benchmarks/compare_torch.py names the same workload in torch (float32;
// `benchmarks/compare_torch.py` runs both in one run and prints the ratios):
//   - the op coverage, at 1e3, 1e5 and 1e6 elements, for every elementwise op, comparison,
//     broadcast, reduction and in-place op of docs/ops.md:
//       fwd/<op>/<n>: forward on inputs without grad;
//       fwdbwd/<op>/<n>: forward, sum and backward on leaves (gradients reset by set_grad({}));
//       <op> is an elementwise op, bcast_add / bcast_mul (an [n/1000, 1000] matrix with a [1000]
//       row), a reduction of all elements or <reduction>_dim (along dim 1 of [n/1000, 1000]);
//       inplace/<op>_/<n>: an in-place op on n elements (no grad);
//   - inplace/sgd_/<n>: p.sub_(q * 0.01);
//   - rows/<op>/<rows>x<cols>: along dim 1 of a [rows, cols] matrix, forward and backward;
//   - mlp_step: batch 64, 784 -> 128 -> 10, tanh, cross-entropy, SGD by sub_ and grad().zero_();
//     mlp_step_set_grad: the same, the gradients reset by set_grad({}) (torch: grad = None);
//   - chain/1000000: sum((sin(x)*x + exp(-x*x))^2), forward and backward.
// The hand-written workloads check one value before they are timed; the values of the op
// coverage are the tests' (tests/ops).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <benchmark/benchmark.h>
#include <xtensor/xarray.hpp>
#include <xtensor/xbuilder.hpp>

#include <metagrad/autograd.hpp>
#include <metagrad/tensor.hpp>

namespace {

using mg::tensor;

tensor leaf(std::int64_t n, double v, bool grad) {
  return mg::full({n}, v, {.requires_grad = grad});
}

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "runtime_ops: %s computed a wrong value\n", what.c_str());
    std::exit(1);
  }
}

// A workload: prepare() once, then run() repeatedly (the timed part).
struct workload {
  std::string name;
  std::function<std::function<void()>()> prepare;
};

// The inputs of the op coverage (compare_torch.py makes the same): n evenly spaced values,
// over a range each op is defined on.
enum class domain { sym, pos, near_one };
tensor ramp(std::int64_t n, domain d, bool reversed = false) {
  const double lo = d == domain::sym ? -1.0 : d == domain::pos ? 0.5 : 0.999;
  const double hi = d == domain::sym ? 1.0 : d == domain::pos ? 1.5 : 1.001;
  xt::xarray<float> v =
      xt::linspace<float>(static_cast<float>(reversed ? hi : lo),
                          static_cast<float>(reversed ? lo : hi), static_cast<std::size_t>(n));
  return mg::tensor(v);
}

using unary_fn = std::function<tensor(const tensor&)>;
using binary_fn = std::function<tensor(const tensor&, const tensor&)>;

struct unary {
  const char* name;
  domain d;
  unary_fn f;
};
// Every elementwise op of docs/ops.md with one tensor operand.
const std::vector<unary>& unaries() {
  static const std::vector<unary> u = {
      {"neg", domain::sym, [](const tensor& x) { return -x; }},
      {"exp", domain::sym, [](const tensor& x) { return mg::exp(x); }},
      {"log", domain::pos, [](const tensor& x) { return mg::log(x); }},
      {"log1p", domain::pos, [](const tensor& x) { return mg::log1p(x); }},
      {"expm1", domain::sym, [](const tensor& x) { return mg::expm1(x); }},
      {"sqrt", domain::pos, [](const tensor& x) { return mg::sqrt(x); }},
      {"rsqrt", domain::pos, [](const tensor& x) { return mg::rsqrt(x); }},
      {"abs", domain::sym, [](const tensor& x) { return mg::abs(x); }},
      {"sin", domain::sym, [](const tensor& x) { return mg::sin(x); }},
      {"cos", domain::sym, [](const tensor& x) { return mg::cos(x); }},
      {"tan", domain::sym, [](const tensor& x) { return mg::tan(x); }},
      {"tanh", domain::sym, [](const tensor& x) { return mg::tanh(x); }},
      {"sigmoid", domain::sym, [](const tensor& x) { return mg::sigmoid(x); }},
      {"relu", domain::sym, [](const tensor& x) { return mg::relu(x); }},
      {"erf", domain::sym, [](const tensor& x) { return mg::erf(x); }},
      {"square", domain::sym, [](const tensor& x) { return mg::square(x); }},
      {"reciprocal", domain::pos, [](const tensor& x) { return mg::reciprocal(x); }},
      {"softplus", domain::sym, [](const tensor& x) { return mg::softplus(x); }},
      {"clamp", domain::sym, [](const tensor& x) { return mg::clamp(x, -0.5, 0.5); }},
      {"pow_number", domain::pos, [](const tensor& x) { return mg::pow(x, 2.5); }},
  };
  return u;
}

struct binary {
  const char* name;
  binary_fn f;
  bool differentiable = true;
};
// Every elementwise op of docs/ops.md with two tensor operands (both over 0.5..1.5).
const std::vector<binary>& binaries() {
  static const std::vector<binary> b = {
      {"add", [](const tensor& x, const tensor& y) { return x + y; }},
      {"sub", [](const tensor& x, const tensor& y) { return x - y; }},
      {"mul", [](const tensor& x, const tensor& y) { return x * y; }},
      {"div", [](const tensor& x, const tensor& y) { return x / y; }},
      {"pow", [](const tensor& x, const tensor& y) { return mg::pow(x, y); }},
      {"maximum", [](const tensor& x, const tensor& y) { return mg::maximum(x, y); }},
      {"minimum", [](const tensor& x, const tensor& y) { return mg::minimum(x, y); }},
      {"atan2", [](const tensor& x, const tensor& y) { return mg::atan2(x, y); }},
      {"where", [](const tensor& x, const tensor& y) { return mg::where(x > y, x, y); }},
      {"gt", [](const tensor& x, const tensor& y) { return x > y; }, false},
      {"lt", [](const tensor& x, const tensor& y) { return x < y; }, false},
      {"ge", [](const tensor& x, const tensor& y) { return x >= y; }, false},
      {"le", [](const tensor& x, const tensor& y) { return x <= y; }, false},
      {"eq", [](const tensor& x, const tensor& y) { return x == y; }, false},
      {"ne", [](const tensor& x, const tensor& y) { return x != y; }, false},
  };
  return b;
}

// Every reduction of docs/ops.md: of all elements, and along dim 1 of an [n / 1000, 1000] matrix.
struct reduction {
  const char* name;
  domain d;
  unary_fn all;
  std::function<tensor(const tensor&, std::int64_t)> along;
};
const std::vector<reduction>& reductions() {
  using std::int64_t;
  static const std::vector<reduction> r = {
      {"sum", domain::sym, [](const tensor& x) { return mg::sum(x); },
       [](const tensor& x, int64_t d) { return mg::sum(x, d, false); }},
      {"prod", domain::near_one, [](const tensor& x) { return mg::prod(x); },
       [](const tensor& x, int64_t d) { return mg::prod(x, d); }},
      {"amax", domain::sym, [](const tensor& x) { return mg::amax(x); },
       [](const tensor& x, int64_t d) { return mg::amax(x, d); }},
      {"amin", domain::sym, [](const tensor& x) { return mg::amin(x); },
       [](const tensor& x, int64_t d) { return mg::amin(x, d); }},
      {"mean", domain::sym, [](const tensor& x) { return mg::mean(x); },
       [](const tensor& x, int64_t d) { return mg::mean(x, d); }},
      {"var", domain::sym, [](const tensor& x) { return mg::var(x); },
       [](const tensor& x, int64_t d) { return mg::var(x, d, true); }},
      {"norm", domain::sym, [](const tensor& x) { return mg::norm(x); },
       [](const tensor& x, int64_t d) { return mg::norm(x, d); }},
      {"logsumexp", domain::sym, [](const tensor& x) { return mg::logsumexp(x); },
       [](const tensor& x, int64_t d) { return mg::logsumexp(x, d); }},
  };
  return r;
}

// Every in-place op of docs/ops.md, on a tensor of 0.5..1.5 without grad (the operand: 1.5..0.5).
struct in_place {
  const char* name;
  std::function<void(tensor&, const tensor&)> f;
};
const std::vector<in_place>& in_places() {
  static const std::vector<in_place> i = {
      {"add_", [](tensor& a, const tensor& b) { a.add_(b); }},
      {"sub_", [](tensor& a, const tensor& b) { a.sub_(b); }},
      {"mul_", [](tensor& a, const tensor&) { a.mul_(1.0); }},
      {"div_", [](tensor& a, const tensor&) { a.div_(1.0); }},
      {"pow_", [](tensor& a, const tensor&) { a.pow_(2.0); }},
      {"clamp_", [](tensor& a, const tensor&) { a.clamp_(0.75, 1.25); }},
      {"copy_", [](tensor& a, const tensor& b) { a.copy_(b); }},
      {"fill_", [](tensor& a, const tensor&) { a.fill_(0.5); }},
      {"zero_", [](tensor& a, const tensor&) { a.zero_(); }},
      {"neg_", [](tensor& a, const tensor&) { a.neg_(); }},
      {"abs_", [](tensor& a, const tensor&) { a.abs_(); }},
      {"exp_", [](tensor& a, const tensor&) { a.exp_(); }},
      {"log_", [](tensor& a, const tensor&) { a.log_(); }},
      {"sqrt_", [](tensor& a, const tensor&) { a.sqrt_(); }},
      {"sin_", [](tensor& a, const tensor&) { a.sin_(); }},
      {"cos_", [](tensor& a, const tensor&) { a.cos_(); }},
      {"tanh_", [](tensor& a, const tensor&) { a.tanh_(); }},
      {"sigmoid_", [](tensor& a, const tensor&) { a.sigmoid_(); }},
      {"relu_", [](tensor& a, const tensor&) { a.relu_(); }},
  };
  return i;
}

using ptr = std::shared_ptr<tensor>;
ptr shared(tensor t) { return std::make_shared<tensor>(std::move(t)); }

// fwd/<op>/<n>: forward on inputs without grad; fwdbwd/<op>/<n>: forward, sum and backward on
// leaves (their gradients reset with set_grad({}) after each).
void add_coverage(std::vector<workload>& w, std::int64_t n) {
  const std::string s = "/" + std::to_string(n);
  for (const unary& u : unaries()) {
    w.push_back({"fwd/" + std::string(u.name) + s, [n, u] {
                   auto x = shared(ramp(n, u.d));
                   return [x, u] { benchmark::DoNotOptimize(u.f(*x)); };
                 }});
    w.push_back({"fwdbwd/" + std::string(u.name) + s, [n, u] {
                   auto x = shared(ramp(n, u.d).requires_grad_());
                   return [x, u] {
                     u.f(*x).sum().backward();
                     x->set_grad({});
                   };
                 }});
  }
  for (const binary& b : binaries()) {
    w.push_back({"fwd/" + std::string(b.name) + s, [n, b] {
                   auto x = shared(ramp(n, domain::pos));
                   auto y = shared(ramp(n, domain::pos, true));
                   return [x, y, b] { benchmark::DoNotOptimize(b.f(*x, *y)); };
                 }});
    if (!b.differentiable) continue;
    w.push_back({"fwdbwd/" + std::string(b.name) + s, [n, b] {
                   auto x = shared(ramp(n, domain::pos).requires_grad_());
                   auto y = shared(ramp(n, domain::pos, true).requires_grad_());
                   return [x, y, b] {
                     b.f(*x, *y).sum().backward();
                     x->set_grad({});
                     y->set_grad({});
                   };
                 }});
  }
  // broadcast: an [n / 1000, 1000] matrix with a [1000] row
  const std::int64_t rows = n / 1000;
  for (const binary& b : binaries()) {
    if (std::string_view(b.name) != "add" && std::string_view(b.name) != "mul") continue;
    const std::string name = std::string("bcast_") + b.name + s;
    w.push_back({"fwd/" + name, [rows, b] {
                   auto x = shared(mg::reshape(ramp(rows * 1000, domain::pos), {rows, 1000}));
                   auto y = shared(ramp(1000, domain::pos, true));
                   return [x, y, b] { benchmark::DoNotOptimize(b.f(*x, *y)); };
                 }});
    w.push_back({"fwdbwd/" + name, [rows, b] {
                   auto x = shared(
                       mg::reshape(ramp(rows * 1000, domain::pos), {rows, 1000}).requires_grad_());
                   auto y = shared(ramp(1000, domain::pos, true).requires_grad_());
                   return [x, y, b] {
                     b.f(*x, *y).sum().backward();
                     x->set_grad({});
                     y->set_grad({});
                   };
                 }});
  }
  for (const reduction& r : reductions()) {
    w.push_back({"fwd/" + std::string(r.name) + s, [n, r] {
                   auto x = shared(ramp(n, r.d));
                   return [x, r] { benchmark::DoNotOptimize(r.all(*x)); };
                 }});
    w.push_back({"fwdbwd/" + std::string(r.name) + s, [n, r] {
                   auto x = shared(ramp(n, r.d).requires_grad_());
                   return [x, r] {
                     r.all(*x).backward();
                     x->set_grad({});
                   };
                 }});
    const std::string dim = std::string(r.name) + "_dim" + s;
    w.push_back({"fwd/" + dim, [rows, r] {
                   auto x = shared(mg::reshape(ramp(rows * 1000, r.d), {rows, 1000}));
                   return [x, r] { benchmark::DoNotOptimize(r.along(*x, 1)); };
                 }});
    w.push_back(
        {"fwdbwd/" + dim, [rows, r] {
           auto x = shared(mg::reshape(ramp(rows * 1000, r.d), {rows, 1000}).requires_grad_());
           return [x, r] {
             r.along(*x, 1).sum().backward();
             x->set_grad({});
           };
         }});
  }
  for (const in_place& i : in_places())
    w.push_back({"inplace/" + std::string(i.name) + s, [n, i] {
                   auto a = shared(ramp(n, domain::pos));
                   auto b = shared(ramp(n, domain::pos, true));
                   return [a, b, i] { i.f(*a, *b); };
                 }});
}

std::vector<workload> workloads() {
  std::vector<workload> w;
  for (std::int64_t n : {1'000, 100'000, 1'000'000}) {
    add_coverage(w, n);
    w.push_back({"inplace/sgd_/" + std::to_string(n), [n] {
                   auto p = shared(leaf(n, 1.5, false));
                   auto q = shared(leaf(n, 0.0, false));
                   return [p, q] { p->sub_(*q * 0.01); };
                 }});
  }
  w.push_back(
      {"rows/softmax_logsumexp/1024x1024", [] {
         mg::manual_seed(0);
         auto x = std::make_shared<tensor>(mg::randn({1024, 1024}, {.requires_grad = true}));
         return [x] {
           const tensor y = mg::mean(mg::logsumexp(*x, 1)) + mg::sum(mg::softmax(*x, 1) * *x);
           y.backward();
           x->set_grad({});
         };
       }});
  w.push_back(
      {"rows/sum_dim/1024x1024", [] {
         auto x = std::make_shared<tensor>(mg::full({1024, 1024}, 0.5, {.requires_grad = true}));
         return [x] {
           mg::sum(*x, 1, false).sum().backward();
           x->set_grad({});
         };
       }});
  // selection along rows: max with its indices, topk, argmax
  const auto ramp = [] {  // row r: r, r + 1/1024, ... (distinct values)
    const xt::xarray<float> v = xt::arange<float>(0.f, 1024.f * 1024.f) / 1024.f;
    return mg::reshape(mg::tensor(v), {1024, 1024});
  };
  w.push_back({"rows/max_dim/1024x1024", [ramp] {
                 auto x = std::make_shared<tensor>(ramp().requires_grad_());
                 check(mg::max(*x, 1).indices.sum().item<double>() == 1023.0 * 1024, "max");
                 return [x] {
                   mg::max(*x, 1).values.sum().backward();
                   x->set_grad({});
                 };
               }});
  w.push_back({"rows/topk8/1024x1024", [ramp] {
                 auto x = std::make_shared<tensor>(ramp().requires_grad_());
                 check(mg::topk(*x, 8, 1).indices.sum().item<double>() == 1019.5 * 8 * 1024,
                       "topk");
                 return [x] {
                   mg::topk(*x, 8, 1).values.sum().backward();
                   x->set_grad({});
                 };
               }});
  w.push_back({"rows/argmax/1024x1024", [ramp] {
                 auto x = std::make_shared<tensor>(ramp());
                 check(mg::argmax(*x, 1).sum().item<double>() == 1023.0 * 1024, "argmax");
                 return [x] { benchmark::DoNotOptimize(mg::argmax(*x, 1)); };
               }});
  for (const bool none : {false, true}) {  // gradients reset by grad().zero_() or set_grad({})
    w.push_back(
        {none ? "mlp_step_set_grad/64x784x128x10" : "mlp_step/64x784x128x10", [none] {
           mg::manual_seed(1);
           auto w1 = std::make_shared<tensor>(mg::randn({784, 128}, {.requires_grad = true}));
           auto w2 = std::make_shared<tensor>(mg::randn({128, 10}, {.requires_grad = true}));
           auto x = std::make_shared<tensor>(mg::randn({64, 784}));
           std::vector<std::int64_t> targets(64);
           for (std::size_t i = 0; i < targets.size(); ++i)
             targets[i] = static_cast<std::int64_t>(i % 10);
           {
             mg::no_grad_guard off;
             w1->mul_(0.05);
             w2->mul_(0.1);
           }
           return [w1, w2, x, targets, none] {
             const tensor h = mg::tanh(mg::matmul(*x, *w1));
             const tensor loss = mg::cross_entropy(mg::matmul(h, *w2), targets);
             loss.backward();
             mg::no_grad_guard off;
             w1->sub_(w1->grad() * 0.01);
             w2->sub_(w2->grad() * 0.01);
             for (tensor* p : {w1.get(), w2.get()}) {
               if (none) {
                 p->set_grad({});
               } else {
                 p->grad().zero_();
               }
             }
           };
         }});
  }
  w.push_back({"chain/1000000", [] {
                 auto x =
                     std::make_shared<tensor>(mg::full({1'000'000}, 0.5, {.requires_grad = true}));
                 return [x] {
                   const tensor s = mg::sin(*x) * *x + mg::exp(-(*x * *x));
                   (s * s).sum().backward();
                   x->set_grad({});
                 };
               }});
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  for (const workload& w : workloads()) {
    auto prepare = w.prepare;
    benchmark::RegisterBenchmark(w.name.c_str(), [prepare](benchmark::State& state) {
      const auto run = prepare();
      for (auto _ : state) run();
    })->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
