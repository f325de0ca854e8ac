// Compile-time stress: the LSTM objective of benchmarks/lstm.cpp (benchmarks/lstm_objective.hpp)
// with MG_LSTM_LAYERS layers, differentiated by the static engine: mg::repeat over 1023 steps,
// one loop node whose step holds the layers' cells, read with fixed indices. run.sh compiles it
// with 2 and 4 layers; running it checks two entries of the gradient against central differences.
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <vector>

#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <metagrad/xtensor.hpp>

#include "../lstm_objective.hpp"

using vec = xt::xtensor<double, 1>;

int main() {
  const lstm::instance in = lstm::make_instance(11);
  const auto& [main, extra, state, sequence] = in;
  using mat = lstm::mat;
  std::vector<vec> state_rows;
  for (std::size_t k = 0; k < 2 * lstm::l; ++k) state_rows.push_back(xt::row(state, k));
  const vec first = xt::row(sequence, 0);
  const mat targets = xt::view(sequence, xt::range(1, lstm::c), xt::all());
  const auto init = lstm::initial_state(state_rows, first, 0.0);
  const auto f = [&](const auto& m, const auto& e) { return lstm::objective(m, e, init, targets); };
  const auto [loss, g] = mg::value_and_grad(f)(main, extra);
  const auto& [dmain, dextra] = g;
  // central differences of the loss in one entry of each parameter
  const double h = 1e-6;
  const auto at = [&](const mat& m, const mat& e) {
    return double(mg::value_and_grad(f)(m, e).first);
  };
  mat mp = main, mm = main, ep = extra, em = extra;
  mp(1, 3) += h, mm(1, 3) -= h, ep(1, 5) += h, em(1, 5) -= h;
  const double nm = (at(mp, extra) - at(mm, extra)) / (2 * h);
  const double ne = (at(main, ep) - at(main, em)) / (2 * h);
  const auto near = [](double a, double b) {
    return std::abs(a - b) <= 1e-5 * std::abs(b) + 1e-11;
  };
  const bool ok = near(dmain(1, 3), nm) && near(dextra(1, 5), ne);
  std::printf(
      "layers %zu: loss %.12g, d/dmain(1,3) %.10g (numerical %.10g), d/dextra(1,5) %.10g "
      "(numerical %.10g): %s\n",
      lstm::l, double(loss), dmain(1, 3), nm, dextra(1, 5), ne, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
