// Running programs on the runtime engine (see run.hpp).
#include "fuzz/run.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>

#include <metagrad/autograd.hpp>
#include <metagrad/fuse.hpp>
#include <metagrad/saved_tensors.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

namespace mg_fuzz {

std::vector<double> values_of(const mg::tensor& t) {
  mg::no_grad_guard ng;
  const auto a = t.to_xtensor<double>();
  return std::vector<double>(a.begin(), a.end());
}

namespace {

mg::tensor tensor_of(const mg::shape_t& shape, const std::vector<double>& data, mg::dtype d,
                     mg::device dev) {
  auto a = xt::xarray<double>::from_shape(std::vector<std::size_t>(shape.begin(), shape.end()));
  std::copy(data.begin(), data.end(), a.begin());
  mg::tensor t(a);
  if (d != mg::f64) t = t.to(d);
  if (dev != mg::device::cpu) t = t.to(dev);
  return t;
}

mg::tensor index_tensor(const std::vector<std::int64_t>& ix, mg::device dev) {
  std::vector<double> d(ix.begin(), ix.end());
  mg::tensor t =
      tensor_of({static_cast<std::int64_t>(ix.size())}, d, mg::f64, mg::device::cpu).to(mg::i64);
  return dev == mg::device::cpu ? t : t.to(dev);
}

mg::tensor condition(comparison c, const mg::tensor& a, const mg::tensor& b) {
  switch (c) {
    case comparison::gt:
      return mg::gt(a, b);
    case comparison::lt:
      return a < b;
    case comparison::ge:
      return mg::ge(a, b);
    case comparison::le:
      return a <= b;
    case comparison::eq:
      return mg::eq(a, b);
    case comparison::ne:
      return a != b;
  }
  return {};
}

// An elementwise unary op through mg::fuse (the static engine's expression, one node).
// (Not in the Debug builds: the ASan leg spends its compile time elsewhere, Note [Fuzzer
// compile time] in CMakeLists.txt.)
template <class F>
mg::tensor unary([[maybe_unused]] bool fuse, const mg::tensor& x, F f) {
#ifndef MG_FUZZ_NO_FUSE
  if (fuse) return mg::fuse([f](auto a) { return f(a); })(x);
#endif
  return f(x);
}
template <class F>
mg::tensor binary([[maybe_unused]] bool fuse, const mg::tensor& a, const mg::tensor& b, F f) {
#ifndef MG_FUZZ_NO_FUSE
  if (fuse) return mg::fuse([f](auto p, auto q) { return f(p, q); })(a, b);
#endif
  return f(a, b);
}

std::vector<std::int64_t> tail(const std::vector<std::int64_t>& v, std::size_t from) {
  return std::vector<std::int64_t>(v.begin() + static_cast<std::ptrdiff_t>(from), v.end());
}

}  // namespace

mg::tensor apply(const instr& ins, const std::vector<mg::tensor>& v, bool fuse, bool all_f64) {
  const auto arg = [&](std::size_t i) -> const mg::tensor& { return v.at(ins.in.at(i)); };
  const auto& k = ins.ints;
  const double n = ins.num;
  switch (ins.o) {
    case op::add:
      return binary(fuse, arg(0), arg(1), [](auto a, auto b) { return a + b; });
    case op::sub:
      return binary(fuse, arg(0), arg(1), [](auto a, auto b) { return a - b; });
    case op::mul:
      return binary(fuse, arg(0), arg(1), [](auto a, auto b) { return a * b; });
    case op::div:
      return binary(fuse, arg(0), arg(1), [](auto a, auto b) { return a / b; });
    case op::maximum:
      return binary(fuse, arg(0), arg(1), [](auto a, auto b) { return mg::maximum(a, b); });
    case op::minimum:
      return binary(fuse, arg(0), arg(1), [](auto a, auto b) { return mg::minimum(a, b); });
    case op::atan2:
      return binary(fuse, arg(0), arg(1), [](auto a, auto b) { return mg::atan2(a, b); });
    case op::pow_tensor:
      return binary(fuse, arg(0), arg(1), [](auto a, auto b) { return mg::pow(a, b); });
    case op::add_number:
      return unary(fuse, arg(0), [n](auto a) { return a + n; });
    case op::mul_number:
      return unary(fuse, arg(0), [n](auto a) { return a * n; });
    case op::number_sub:
      return unary(fuse, arg(0), [n](auto a) { return n - a; });
    case op::number_div:
      return unary(fuse, arg(0), [n](auto a) { return n / a; });
    case op::number_pow:
      return unary(fuse, arg(0), [n](auto a) { return mg::pow(n, a); });
    case op::neg:
      return unary(fuse, arg(0), [](auto a) { return -a; });
    case op::exp:
      return unary(fuse, arg(0), [](auto a) { return mg::exp(a); });
    case op::log:
      return unary(fuse, arg(0), [](auto a) { return mg::log(a); });
    case op::log1p:
      return unary(fuse, arg(0), [](auto a) { return mg::log1p(a); });
    case op::expm1:
      return unary(fuse, arg(0), [](auto a) { return mg::expm1(a); });
    case op::sqrt:
      return unary(fuse, arg(0), [](auto a) { return mg::sqrt(a); });
    case op::rsqrt:
      return unary(fuse, arg(0), [](auto a) { return mg::rsqrt(a); });
    case op::abs:
      return unary(fuse, arg(0), [](auto a) { return mg::abs(a); });
    case op::sin:
      return unary(fuse, arg(0), [](auto a) { return mg::sin(a); });
    case op::cos:
      return unary(fuse, arg(0), [](auto a) { return mg::cos(a); });
    case op::tan:
      return unary(fuse, arg(0), [](auto a) { return mg::tan(a); });
    case op::tanh:
      return unary(fuse, arg(0), [](auto a) { return mg::tanh(a); });
    case op::sigmoid:
      return unary(fuse, arg(0), [](auto a) { return mg::sigmoid(a); });
    case op::relu:
      return unary(fuse, arg(0), [](auto a) { return mg::relu(a); });
    case op::erf:
      return unary(fuse, arg(0), [](auto a) { return mg::erf(a); });
    case op::square:
      return unary(fuse, arg(0), [](auto a) { return mg::square(a); });
    case op::reciprocal:
      return unary(fuse, arg(0), [](auto a) { return mg::reciprocal(a); });
    case op::softplus:
      return unary(fuse, arg(0), [](auto a) { return mg::softplus(a); });
    case op::clamp: {
      const double hi = ins.num2;
      return unary(fuse, arg(0), [n, hi](auto a) { return mg::clamp(a, n, hi); });
    }
    case op::pow_scalar:
      if (ins.flag) {  // an integral exponent given as an integer
        const auto p = static_cast<int>(n);
        return unary(fuse, arg(0), [p](auto a) { return mg::pow(a, p); });
      }
      return unary(fuse, arg(0), [n](auto a) { return mg::pow(a, n); });
    case op::where:
      return mg::where(condition(ins.cmp, arg(0), arg(1)), arg(2), arg(3));
    case op::sum:
      return ins.flag ? mg::sum(arg(0), k[0], ins.flag2) : mg::sum(arg(0));
    case op::prod:
      return ins.flag ? mg::prod(arg(0), k[0], ins.flag2) : mg::prod(arg(0));
    case op::max:
      return ins.flag ? mg::max(arg(0), k[0], ins.flag2).values : mg::max(arg(0));
    case op::min:
      return ins.flag ? mg::min(arg(0), k[0], ins.flag2).values : mg::min(arg(0));
    case op::topk:
      return mg::topk(arg(0), k[1], k[0], ins.flag).values;
    case op::argmax: {  // the indices, as values of x's dtype (no gradient)
      const mg::tensor x = arg(0);
      const mg::tensor i = ins.flag ? (ins.flag2 ? mg::argmin(x, k[0], k[1] != 0)
                                                 : mg::argmax(x, k[0], k[1] != 0))
                                    : (ins.flag2 ? mg::argmin(x) : mg::argmax(x));
      return i.to(x.dtype());
    }
    case op::mean:
      return ins.flag ? mg::mean(arg(0), k[0], ins.flag2) : mg::mean(arg(0));
    case op::var:
      return ins.flag ? mg::var(arg(0), k[0], k[1] != 0, ins.flag2) : mg::var(arg(0), k[1] != 0);
    case op::norm:
      return ins.flag ? mg::norm(arg(0), k[0], ins.flag2) : mg::norm(arg(0));
    case op::logsumexp:
      return ins.flag ? mg::logsumexp(arg(0), k[0], ins.flag2) : mg::logsumexp(arg(0));
    case op::softmax:
      return mg::softmax(arg(0), k[0]);
    case op::log_softmax:
      return mg::log_softmax(arg(0), k[0]);
    case op::mse_loss:
      return mg::mse_loss(arg(0), arg(1));
    case op::cross_entropy:
      if (ins.flag) return mg::cross_entropy(arg(0), k);
      return mg::cross_entropy(arg(0), arg(0).dim() == 1
                                           ? index_tensor(k, arg(0).device()).reshape({})
                                           : index_tensor(k, arg(0).device()));
    case op::expand:
      return ins.flag ? arg(0).expand(k) : mg::expand(arg(0), k);
    case op::sum_to:
      return mg::sum_to(arg(0), k);
    case op::unsqueeze:
      return arg(0).unsqueeze(k[0]);
    case op::t:
      return ins.flag ? arg(0).t() : mg::transpose(arg(0));
    case op::transpose:
      return arg(0).transpose(k[0], k[1]);
    case op::permute:
      return arg(0).permute(k);
    case op::reshape:
      return arg(0).reshape(k);
    case op::view:
      return arg(0).view(k);
    case op::flatten:
      return arg(0).flatten(k[0], k[1]);
    case op::squeeze:
      return ins.flag ? arg(0).squeeze(k[0]) : arg(0).squeeze();
    case op::slice:
      return mg::slice(arg(0), k[0], k[1], k[2], k[3]);
    case op::select:
      return ins.flag ? arg(0)[k[1]] : arg(0).select(k[0], k[1]);
    case op::index_select:
      if (ins.flag) return arg(0).index_select(k[0], index_tensor(tail(k, 1), arg(0).device()));
      return mg::index_select(arg(0), k[0], tail(k, 1));
    case op::cat:
    case op::stack: {
      mg::tensor_list xs;
      for (std::size_t i = 0; i < ins.in.size(); ++i) xs.push_back(arg(i));
      return ins.o == op::cat ? mg::cat(xs, k[0]) : mg::stack(xs, k[0]);
    }
    case op::unbind:
      return arg(0).unbind(k[0]).at(k[1]);
    case op::chunk:
      return arg(0).chunk(k[1], k[0]).at(k[2]);
    case op::split:
      return arg(0).split(k[1], k[0]).at(k[2]);
    case op::split_sizes:
      return mg::split(arg(0), tail(k, 2), k[0]).at(k[1]);
    case op::matmul:
      return mg::matmul(arg(0), arg(1));
    case op::dot:
      return mg::dot(arg(0), arg(1));
    case op::outer:
      return mg::outer(arg(0), arg(1));
    case op::to_dtype:
      return arg(0).to(k[0] == 0 && !all_f64 ? mg::f32 : mg::f64);
    case op::to_device: {  // there and back: both moves are recorded
      const mg::device here = arg(0).device();
      return arg(0).to(here == mg::device::cpu ? mg::device::cuda : mg::device::cpu).to(here);
    }
    case op::contiguous:
      return arg(0).contiguous();
    case op::clone:
      return ins.flag ? mg::clone(arg(0)) : arg(0).clone();
    default:
      break;
  }
  // in place: in[0] is written
  mg::tensor t = arg(0);
  const bool tensor_operand = ins.in.size() > 1;
  switch (ins.o) {
    case op::add_:
      return tensor_operand ? t.add_(arg(1)) : t.add_(n);
    case op::sub_:
      return tensor_operand ? t.sub_(arg(1)) : t.sub_(n);
    case op::mul_:
      return tensor_operand ? t.mul_(arg(1)) : t.mul_(n);
    case op::div_:
      return tensor_operand ? t.div_(arg(1)) : t.div_(n);
    case op::pow_:
      return t.pow_(n);
    case op::clamp_:
      return t.clamp_(n, ins.num2);
    case op::copy_:
      return t.copy_(arg(1));
    case op::fill_:
      return t.fill_(n);
    case op::zero_:
      return t.zero_();
    case op::neg_:
      return t.neg_();
    case op::abs_:
      return t.abs_();
    case op::exp_:
      return t.exp_();
    case op::log_:
      return t.log_();
    case op::sqrt_:
      return t.sqrt_();
    case op::sin_:
      return t.sin_();
    case op::cos_:
      return t.cos_();
    case op::tanh_:
      return t.tanh_();
    case op::sigmoid_:
      return t.sigmoid_();
    case op::relu_:
      return t.relu_();
    default:
      break;
  }
  throw std::logic_error("mg_fuzz::apply: unknown op");
}

bool fuse_available() {
#ifdef MG_FUZZ_NO_FUSE
  return false;
#else
  return true;
#endif
}

bool device_available() {
  static const bool yes = [] {
    try {
      (void)mg::tensor(1.0).to(mg::device::cuda);
      return true;
    } catch (const mg::error&) {
      return false;
    }
  }();
  return yes;
}

std::vector<mg::tensor> make_inputs(const program& p, const variant& v,
                                    const std::vector<std::vector<double>>* data) {
  std::vector<mg::tensor> xs;
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    const auto& in = p.inputs[i];
    mg::tensor t =
        tensor_of(in.shape, data ? (*data)[i] : in.data, v.f64 ? mg::f64 : in.dtype, v.device);
    if (in.requires_grad) t.requires_grad_();
    xs.push_back(t);
  }
  return xs;
}

std::vector<int> shuffled_order(const program& p, unsigned seed) {
  // Each out-of-place instruction depends on the instructions defining its operands; in-place
  // instructions are barriers that nothing crosses. Within a segment, a random topological order.
  const auto defined = p.defined_values();
  std::vector<int> definer(p.value_count(), -1);
  for (std::size_t i = 0; i < p.code.size(); ++i)
    if (defined[i] >= 0) definer[defined[i]] = static_cast<int>(i);
  std::mt19937 rng(seed);
  std::vector<int> order;
  std::size_t start = 0;
  while (start < p.code.size()) {
    std::size_t end = start;
    while (end < p.code.size() && !writes_in_place(p.code[end].o)) ++end;
    std::vector<int> pending;
    for (std::size_t i = start; i < end; ++i) pending.push_back(static_cast<int>(i));
    std::vector<bool> done(p.code.size(), false);
    for (std::size_t i = 0; i < start; ++i) done[i] = true;
    while (!pending.empty()) {
      std::vector<std::size_t> ready;
      for (std::size_t j = 0; j < pending.size(); ++j) {
        bool ok = true;
        for (int a : p.code[pending[j]].in)
          if (definer[a] >= 0 && !done[definer[a]]) ok = false;
        if (ok) ready.push_back(j);
      }
      const std::size_t pick = ready[rng() % ready.size()];
      done[pending[pick]] = true;
      order.push_back(pending[pick]);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(pick));
    }
    if (end < p.code.size()) order.push_back(static_cast<int>(end));
    start = end + 1;
  }
  return order;
}

mg::tensor forward(const program& p, const std::vector<mg::tensor>& inputs, const variant& v,
                   std::vector<mg::tensor>* values_out) {
  std::vector<mg::tensor> values(p.value_count());
  std::copy(inputs.begin(), inputs.end(), values.begin());
  const auto defined = p.defined_values();
  std::vector<int> order(p.code.size());
  std::iota(order.begin(), order.end(), 0);
  if (v.reorder) order = shuffled_order(p, 12345u + static_cast<unsigned>(p.code.size()));
  std::vector<mg::hook_handle> hooks;
  // mg::fuse nodes save their operands (the static engine's backward reads them), so only the
  // instructions after the last in-place write are fused
  std::size_t fuse_from = 0;
  for (std::size_t i = 0; i < p.code.size(); ++i)
    if (writes_in_place(p.code[i].o)) fuse_from = i + 1;
  for (std::size_t step = 0; step < order.size(); ++step) {
    const int i = order[step];
    const instr& ins = p.code[i];
    if (v.side_regions && step % 2 == 0 && !ins.in.empty()) {
      // Work under no_grad and inference_mode that reads the values but must change nothing.
      const mg::tensor& x = values[ins.in[0]];
      {
        mg::no_grad_guard ng;
        mg::tensor c = mg::tanh(x) * 2.0;
        c.add_(1.0);
        (void)mg::sum(c * x);
      }
      {
        mg::inference_mode_guard im;
        mg::tensor c = mg::exp(mg::tanh(x));
        c.mul_(0.5);
        (void)mg::sum(c);
      }
    }
    const mg::tensor r = mg_fuzz::apply(
        ins, values, v.fuse && ins.o != op::where && static_cast<std::size_t>(i) >= fuse_from,
        v.f64);
    if (defined[i] >= 0) values[defined[i]] = r;
    if (v.identity_hooks && r.requires_grad())
      hooks.push_back(r.register_hook([](const mg::tensor& g) { return g; }));
  }
  mg::tensor loss;
  for (std::size_t k = 0; k < p.outputs.size(); ++k) {
    const mg::tensor& y = values[p.outputs[k]];
    const mg::tensor w = tensor_of(y.shape(), p.weights[k], y.dtype(), y.device());
    const mg::tensor term = mg::sum(y * w);
    loss = loss.defined() ? loss + term : term;
  }
  if (values_out) *values_out = std::move(values);
  return loss;
}

run_result run(const program& p, const variant& v) {
  run_result r;
  try {
    const auto inputs = make_inputs(p, v);
    mg::tensor loss;
    {
      std::optional<mg::autograd::saved_tensors_hooks_guard> sh;
      std::optional<mg::autograd::save_on_cpu_guard> sc;
      std::optional<mg::autograd::allow_mutation_on_saved_tensors_guard> am;
      if (v.allow_mutation) am.emplace();
      if (v.saved_hooks)
        sh.emplace([](const mg::tensor& t) { return t; }, [](const mg::tensor& t) { return t; });
      if (v.save_on_cpu) sc.emplace();
      loss = forward(p, inputs, v);
      r.loss = loss.to(mg::f64).item<double>();
      if (v.allow_mutation) {  // backward inside the guard
        loss.backward();
        am.reset();
      }
    }
    if (!v.allow_mutation) {
      if (v.other_thread) {
        std::optional<std::string> err;
        std::thread th([&] {
          try {
            loss.backward();
          } catch (const mg::error& e) {
            err = e.what();
          }
        });
        th.join();
        if (err) throw mg::error(*err);
      } else {
        loss.backward();
      }
    }
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (p.inputs[i].requires_grad) r.grads.push_back(inputs[i].grad());
  } catch (const mg::error& e) {
    r.error = e.what();
  }
  return r;
}

double loss_at(const program& p, const std::vector<std::vector<double>>& data) {
  mg::no_grad_guard ng;
  variant v;
  const auto inputs = make_inputs(p, v, &data);
  return forward(p, inputs, v).item<double>();
}

}  // namespace mg_fuzz
