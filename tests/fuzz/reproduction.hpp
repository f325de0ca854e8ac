// What a reproduction the fuzzer writes (and a regression test kept from one) includes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/tensor.hpp>

#include "fuzz/program.hpp"
#include "fuzz/properties.hpp"
#include "fuzz/run.hpp"

namespace mg_fuzz {

// Runs every property on the program; a failure says which invariant broke.
inline void expect_passes(const program& p) {
  for (const auto& i : p.code)
    if (i.o == op::to_device && !device_available())
      GTEST_SKIP() << "x.to(device) needs the Thrust backend, which this build does not have";
  const auto f = check(p);
  EXPECT_FALSE(f.has_value()) << *f << "\nthe program:\n" << to_mg_code(p);
}

// For pasting the mg code of a reproduction into a program of one's own: an input tensor, and
// a 1-D i64 tensor of indices on x's device.
inline mg::tensor input(const mg::shape_t& shape, mg::dtype d, bool requires_grad,
                        const std::vector<double>& data) {
  program p;
  p.inputs.push_back({shape, d, requires_grad, data});
  variant v;
  v.f64 = false;
  return make_inputs(p, v)[0];
}
inline mg::tensor indices(const std::vector<std::int64_t>& ix, const mg::tensor& x) {
  std::vector<double> d(ix.begin(), ix.end());
  return input({static_cast<std::int64_t>(ix.size())}, mg::f64, false, d)
      .to(mg::i64)
      .to(x.device());
}

}  // namespace mg_fuzz
