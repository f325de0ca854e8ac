// The LSTM objective of the ADBench suite written once with metagrad, generic over the engine
// (xtensor arrays for the static engine, mg::tensor for the runtime one): benchmarks/lstm.cpp times
// it against a hand-written gradient and benchmarks/compile_time/lstm_step.cpp measures its compile
// time. Include metagrad's headers first (the engines whose overloads it calls).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xtensor.hpp>

#include <metagrad/xtensor.hpp>

#ifndef MG_LSTM_LAYERS
#define MG_LSTM_LAYERS 2
#endif

namespace lstm {

// l layers, c rows of b values (ADBench's sizes: l = 2 or 4, c = 1024, b = 14)
inline constexpr std::size_t l = MG_LSTM_LAYERS, c = 1024, b = 14;
using mat = xt::xtensor<double, 2>;

// main: 2l rows of 4b (layer i: its gates' weights in row 2i, their biases in row 2i + 1, in the
// order forget, input, output, change); extra: 3 rows of b (the input's weight, the output's weight
// and bias); state: 2l rows of b (layer i's hidden and cell values); sequence: c rows of b.
struct instance {
  mat main, extra, state, sequence;
};

// Every value uniform in [-1, 1], from a generator seeded with `seed`.
inline instance make_instance(std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const auto fill = [&](std::size_t rows, std::size_t cols) {
    mat m = mat::from_shape({rows, cols});
    for (auto& v : m) v = u(gen);
    return m;
  };
  instance in;
  in.main = fill(2 * l, 4 * b);
  in.extra = fill(3, b);
  in.state = fill(2 * l, b);
  in.sequence = fill(c, b);
  return in;
}

// Layers k, k + 1, ... of one step: each cell reads the new hidden value of the one below; the
// new (hidden, cell) of each, and the top one's hidden value.
template <std::size_t k, class Cell, class Layers, class U>
auto run_layers(const Cell& cell, const Layers& layers, const U& u) {
  if constexpr (k == l) {
    return std::pair{std::tuple{}, u};
  } else {
    const auto hc = cell(std::integral_constant<std::size_t, k>{}, std::get<k>(layers), u);
    const auto [rest, top] = run_layers<k + 1>(cell, layers, hc.first);
    return std::pair{std::tuple_cat(std::make_tuple(hc), rest), top};
  }
}

// The objective written once, generic: `rows` are the targets (sequence rows 1 to c - 1), given
// to the step one per step; the state is each layer's (hidden, cell), the step's input and the
// running total.
template <class Main, class Extra, class State, class Rows>
auto objective(const Main& main, const Extra& extra, const State& init, const Rows& rows) {
  // The rows and bounds are template arguments (mg::select<dim, index>, mg::slice<dim, start,
  // end>): in the static engine each such read is then one value however often it occurs, and
  // mg::repeat reads it once per call instead of at every step.
  constexpr std::int64_t n = b;
  const auto cell = [&](auto layer, const auto& hc, const auto& x) {
    constexpr std::int64_t row = 2 * std::int64_t(decltype(layer)::value);
    const auto w = mg::select<0, row>(main);
    const auto bias = mg::select<0, row + 1>(main);
    const auto gate = [&]<std::int64_t g>(std::integral_constant<std::int64_t, g>, const auto& v) {
      return v * mg::slice<0, g * n, (g + 1) * n>(w) + mg::slice<0, g * n, (g + 1) * n>(bias);
    };
    using forget_gate = std::integral_constant<std::int64_t, 0>;
    using input_gate = std::integral_constant<std::int64_t, 1>;
    using output_gate = std::integral_constant<std::int64_t, 2>;
    using change_gate = std::integral_constant<std::int64_t, 3>;
    const auto& [h, cp] = hc;
    const auto forget = mg::sigmoid(gate(forget_gate{}, x));
    const auto ingate = mg::sigmoid(gate(input_gate{}, h));
    const auto outgate = mg::sigmoid(gate(output_gate{}, x));
    const auto change = mg::tanh(gate(change_gate{}, h));
    const auto cn = cp * forget + ingate * change;
    return std::pair{outgate * mg::tanh(cn), cn};
  };
  const auto step = [&](const auto& s, const auto& target) {
    const auto& [layers, x, total] = s;
    const auto [new_layers, top] = run_layers<0>(cell, layers, x * mg::select<0, 0>(extra));
    const auto ypred = top * mg::select<0, 1>(extra) + mg::select<0, 2>(extra);
    return std::tuple{new_layers, target, total + mg::sum(target * (ypred - mg::logsumexp(ypred)))};
  };
  const auto final_state = mg::repeat<c - 1>(step, init, rows);
  return -std::get<2>(final_state) / double((c - 1) * b);
}

// The initial state: layer k's (hidden, cell) from rows 2k and 2k + 1 of `state`, the first row
// of the sequence as the input, a total of 0.
template <class Row>
auto initial_state(const std::vector<Row>& state_rows, const Row& first, const auto& zero) {
  return [&]<std::size_t... k>(std::index_sequence<k...>) {
    return std::tuple{std::make_tuple(std::pair{state_rows[2 * k], state_rows[2 * k + 1]}...),
                      first, zero};
  }
  (std::make_index_sequence<l>{});
}

}  // namespace lstm
