// Raw programs (what RapidCheck generates and shrinks) and their lowering to valid programs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/program.hpp"

namespace mg_fuzz {

struct raw_input {
  std::uint8_t rank = 0;               // 0..3
  std::array<std::uint8_t, 3> dims{};  // extent - 1, each 0..3
  bool f32 = false;
  bool constant = false;  // does not require grad
};

struct raw_instr {
  std::uint8_t o = 0;                  // op index modulo the vocabulary's size
  std::array<std::uint8_t, 4> pick{};  // operand choices (0: the latest suitable value)
  std::array<std::int8_t, 4> k{};      // dims, extents, numbers
  std::uint8_t bits = 0;               // variants of the op (keepdim, method form ...)
};

struct raw_program {
  std::vector<raw_input> inputs;
  std::vector<raw_instr> code;
  std::uint32_t seed = 0;  // the inputs' values and the loss weights
};

struct lowered {
  program p;
  std::string failure;  // not empty: the library failed while the program was being built
};

// Note [Lowering]: builds the program instruction by instruction, running it as it goes (in
// float64 and in the inputs' own dtypes). A raw instruction becomes the op it names with
// operands and attributes that fit (suitable values are chosen by `pick`, dims taken modulo the
// rank ...), or is dropped when nothing fits or when its result would leave the region where
// central differences are meaningful (a kink, a pole or a tie within a margin of an operand, a
// value too large). An in-place write that would overwrite a tensor saved for backward is kept
// only when the raw instruction asks for it; the program then records whether torch's rules make
// its backward fail (`expected_error`, Note [Version model] in lower.cpp).
lowered lower(const raw_program& raw);

}  // namespace mg_fuzz
