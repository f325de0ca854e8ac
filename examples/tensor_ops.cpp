// docs/ops.md, "A first look": the snippet below is cut from this file, which CI compiles and
// runs (docs_snippet_ops checks that the doc has it verbatim; the test checks the output).
#include <cmath>
#include <cstdio>

#include <metagrad/metagrad.hpp>

int main() {
  // example-begin ops
  mg::manual_seed(0);
  auto w = mg::randn({4, 3}, {.dtype = mg::f64, .requires_grad = true});
  auto x = mg::randn({2, 5, 4}, {.dtype = mg::f64});
  auto targets = mg::tensor({2, 0});  // integers give i64

  auto h = mg::matmul(x, w);          // [2,5,4] x [4,3] -> [2,5,3]: batches broadcast
  auto [pooled, at] = mg::max(h, 1);  // [2,3] values and their i64 indices along dim 1
  auto logits = mg::cat({pooled, h[0].slice(0, 0, 1)}, 0).reshape({-1, 3});  // views, then a copy
  logits.mul_(0.5);  // in place: recorded, version counter bumped
  auto loss = mg::cross_entropy(logits.slice(0, 0, 2), targets);
  loss.backward();  // w.grad(): [4,3]
  // example-end ops
  std::printf("loss %.6f, |dL/dw| %.6f, logits version %llu\n", loss.item<double>(),
              mg::norm(w.grad()).item<double>(), static_cast<unsigned long long>(logits.version()));
  return std::isfinite(loss.item<double>()) && w.grad().shape() == mg::shape_t{4, 3} &&
                 logits.version() == 1
             ? 0
             : 1;
}
