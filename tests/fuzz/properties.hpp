// The invariants every generated program must keep (docs/testing.md, "The fuzzer").
#pragma once

#include <map>
#include <optional>
#include <string>

#include "fuzz/program.hpp"

namespace mg_fuzz {

struct check_options {
  bool second_order = true;  // Hessian-vector products through create_graph
  bool device = true;        // the Thrust backend (device cuda), where the binary registers it
};

// The first invariant the program breaks, described with the values involved; nothing if it
// keeps them all.
std::optional<std::string> check(const program& p, const check_options& o = {});

// What a run of the fuzzer reached: ops (by docs/ops.md name and by vocabulary name), dtypes,
// pairs of ops where one's result is the other's operand.
struct coverage {
  std::map<std::string, long> ops, docs, dtypes, pairs, variants;
  void add(const program& p);
  std::string report() const;
};

}  // namespace mg_fuzz
