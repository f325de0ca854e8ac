// RapidCheck generators of raw programs (lower.hpp), and the fuzzer's one property.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include <rapidcheck.h>

#include "fuzz/lower.hpp"
#include "fuzz/properties.hpp"

namespace mg_fuzz {

inline rc::Gen<raw_input> raw_inputs() {
  using u8 = std::uint8_t;
  return rc::gen::map(rc::gen::tuple(rc::gen::inRange<u8>(0, 4), rc::gen::inRange<u8>(0, 4),
                                     rc::gen::inRange<u8>(0, 4), rc::gen::inRange<u8>(0, 4),
                                     rc::gen::arbitrary<bool>(), rc::gen::arbitrary<bool>()),
                      [](const std::tuple<u8, u8, u8, u8, bool, bool>& t) {
                        raw_input r;
                        std::tie(r.rank, r.dims[0], r.dims[1], r.dims[2], r.f32, r.constant) = t;
                        return r;
                      });
}

inline rc::Gen<raw_instr> raw_instrs() {
  using u8 = std::uint8_t;
  using i8 = std::int8_t;
  const auto b = rc::gen::arbitrary<u8>();
  const auto k = rc::gen::arbitrary<i8>();
  return rc::gen::map(rc::gen::tuple(rc::gen::inRange<u8>(0, op_count), b, b, b, b, k, k, k, k, b),
                      [](const std::tuple<u8, u8, u8, u8, u8, i8, i8, i8, i8, u8>& t) {
                        raw_instr r;
                        std::tie(r.o, r.pick[0], r.pick[1], r.pick[2], r.pick[3], r.k[0], r.k[1],
                                 r.k[2], r.k[3], r.bits) = t;
                        return r;
                      });
}

// Programs of 0 to 3 inputs and up to about 16 instructions at RapidCheck's largest size (100);
// the elements are drawn at the largest size whatever the program's.
inline rc::Gen<raw_program> raw_programs() {
  return rc::gen::map(
      rc::gen::tuple(rc::gen::resize(3, rc::gen::container<std::vector<raw_input>>(
                                            rc::gen::resize(100, raw_inputs()))),
                     rc::gen::scale(0.16, rc::gen::container<std::vector<raw_instr>>(
                                              rc::gen::resize(100, raw_instrs()))),
                     rc::gen::arbitrary<std::uint32_t>()),
      [](const std::tuple<std::vector<raw_input>, std::vector<raw_instr>, std::uint32_t>& t) {
        raw_program p;
        std::tie(p.inputs, p.code, p.seed) = t;
        return p;
      });
}

// The property: the raw program lowers without a library error and keeps every invariant.
// On failure: what failed, then the program as mg code.
inline std::optional<std::string> failure_of(const raw_program& raw, const check_options& o = {}) {
  const lowered l = lower(raw);
  std::optional<std::string> f;
  if (!l.failure.empty())
    f = l.failure;
  else
    f = check(l.p, o);
  if (f) *f += "\nthe program:\n" + to_mg_code(l.p);
  return f;
}

}  // namespace mg_fuzz
