// The torch.autograd API, as PyTorch's torch.autograd documentation gives it, spelled in
// metagrad: docs/from-pytorch.md cuts its snippets from this file (checked verbatim by ctest), and
// running it checks their values.
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include <metagrad/metagrad.hpp>

namespace {
int failures = 0;
void check(bool ok, const char* what) {
  if (!ok) {
    std::printf("WRONG: %s\n", what);
    ++failures;
  }
}
bool near(double a, double b) { return std::fabs(a - b) < 1e-9 * (1 + std::fabs(b)); }

void backward_and_grad() {
  // example-begin backward
  mg::tensor x = mg::tensor({1.0, 2.0, 3.0}, mg::f64).requires_grad_();  // requires_grad=True
  mg::tensor y = mg::sum(x * x);
  y.backward(mg::tensor{}, {.retain_graph = true});  // y.backward(retain_graph=True)
  mg::tensor dx = x.grad();                          // x.grad: 2x
  auto g = mg::autograd::grad({y}, {x}, {}, {.create_graph = true});  // torch.autograd.grad
  auto h = mg::autograd::grad({mg::sum(g[0])}, {x})[0];               // second order: 2 everywhere
  mg::autograd::backward({y}, {}, {.inputs = {x}});                   // torch.autograd.backward
  // example-end backward
  // dx is x.grad itself: the second backward added 2x into it in place, as in torch
  check(near(dx.to_xtensor<double>()(1), 8.0) && near(h.to_xtensor<double>()(2), 2.0), "grad");
}

void grad_modes() {
  mg::tensor w = mg::tensor(1.0, mg::f64).requires_grad_();
  // example-begin modes
  {
    mg::no_grad_guard ng;  // with torch.no_grad():
    w.sub_(0.1);           //   an optimiser step, not recorded
  }
  mg::set_grad_enabled(false);        // torch.set_grad_enabled(False)
  bool off = !mg::is_grad_enabled();  // torch.is_grad_enabled()
  mg::set_grad_enabled(true);
  mg::tensor r;
  {
    mg::inference_mode_guard im;  // with torch.inference_mode():
    r = w * 2.0;                  //   r.is_inference() is true
  }
  // example-end modes
  check(off && r.is_inference() && near(w.item<double>(), 0.9), "modes");
}

void tensor_hooks() {
  // example-begin tensor-hooks
  mg::tensor x = mg::tensor(2.0, mg::f64).requires_grad_();
  mg::tensor y = x * x;
  y.retain_grad();                                                         // y.retain_grad()
  auto h = x.register_hook([](const mg::tensor& g) { return g * 10.0; });  // x.register_hook
  auto node = y.grad_fn();                                                 // y.grad_fn
  const char* name = node->name();                                         // "mul"
  auto next = node->next_functions();                                      // .next_functions
  auto nh = node->register_prehook(
      [](const mg::tensor_list& grad_outputs) -> std::optional<mg::tensor_list> {
        return mg::tensor_list{grad_outputs[0] * 0.5};
      });
  y.backward();  // x.grad = 10 * 2x * 0.5 = 20, y.grad() = 1
  h.remove();    // RemovableHandle.remove()
  nh.remove();
  // example-end tensor-hooks
  check(near(x.grad().item<double>(), 20.0) && near(y.grad().item<double>(), 1.0) &&
            std::string(name) == "mul" && next.size() == 2,
        "hooks");
}

void multi_grad_hook() {
  // example-begin multi-grad-hook
  mg::tensor a = mg::tensor(1.0, mg::f64).requires_grad_(),
             b = mg::tensor(2.0, mg::f64).requires_grad_();
  int calls = 0;
  auto h = mg::autograd::register_multi_grad_hook({a, b}, [&](const mg::tensor_list& grads) {
    calls += grads[0].defined() + grads[1].defined();
  });
  (a * b).backward();  // one call, both gradients defined
  // example-end multi-grad-hook
  check(calls == 2, "multi grad hook");
}

void saved_tensor_hooks() {
  // example-begin saved-tensors
  mg::tensor x = mg::tensor({1.0, 2.0}, mg::f64).requires_grad_();
  mg::tensor y;
  {
    int packed = 0;
    mg::autograd::saved_tensors_hooks_guard g(  // saved_tensors_hooks(pack, unpack)
        [&](const mg::tensor& t) {
          ++packed;
          return t.clone();
        },
        [](const mg::tensor& p) { return p; });
    y = mg::sum(mg::exp(x));
  }
  { mg::autograd::save_on_cpu_guard cpu; }  // save_on_cpu()
  {  // disable_saved_tensors_hooks(msg): entering hooks under it (or it under hooks) throws msg
    mg::autograd::disable_saved_tensors_hooks_guard off("no hooks here");
  }
  {
    mg::autograd::allow_mutation_on_saved_tensors_guard m;  // allow_mutation_on_saved_tensors()
    mg::tensor z = x * 1.0;
    mg::tensor w = mg::sum(z * z);
    z.mul_(3.0);  // backward still sees z's old value
    w.backward();
  }
  mg::autograd::increment_version(x);  // torch.autograd.graph.increment_version
  // example-end saved-tensors
  y.backward();
  check(near(x.grad().to_xtensor<double>()(0), 2.0 + std::exp(1.0)), "saved tensors");  // 2x + e^x
}

void anomaly_and_checks() {
  // example-begin checks
  mg::autograd::set_detect_anomaly(true);  // torch.autograd.set_detect_anomaly(True)
  mg::autograd::set_detect_anomaly(false);
  std::string message;
  try {
    mg::autograd::detect_anomaly_guard on;  // with torch.autograd.detect_anomaly():
    mg::tensor x = mg::tensor(0.0, mg::f64).requires_grad_();
    mg::sqrt(x).backward();  // d/dx sqrt(x) at 0 is infinite
  } catch (const mg::error& e) {
    message = e.what();  // names the node (sqrt) and where it was called
  }
  auto f = [](const mg::tensor_list& in) { return mg::sin(in[0]) * in[1]; };
  mg::tensor_list in{mg::tensor({0.3, 1.1}, mg::f64).requires_grad_(),
                     mg::tensor({2.0, -1.0}, mg::f64).requires_grad_()};
  bool ok1 =
      mg::autograd::gradcheck(f, in, {.eps = 1e-6, .atol = 1e-5});  // torch.autograd.gradcheck
  bool ok2 = mg::autograd::gradgradcheck(f, in);
  // example-end checks
  check(message.find("sqrt") != std::string::npos && ok1 && ok2, "anomaly and gradcheck");
}
}  // namespace

int main() {
  backward_and_grad();
  grad_modes();
  tensor_hooks();
  multi_grad_hook();
  saved_tensor_hooks();
  anomaly_and_checks();
  std::printf("from_pytorch: %s\n", failures == 0 ? "ok" : "WRONG");
  return failures == 0 ? 0 : 1;
}
