// mg::unroll: how mg::repeat runs a traced loop (<metagrad/repeat.hpp>).
#pragma once

namespace mg {

/// When mg::repeat unrolls a traced loop (docs/static.md, "Recurrences"):
///   - automatic: unless its step holds constants (then the loop is one node);
///   - always: every step its own nodes, shared by type (fused on arrays; a step holding
///     constants is planned once per occurrence, which is exponential in the steps);
///   - never: one loop node whose compile time does not grow with the steps (second
///     derivatives on numbers only; no fusion across steps).
enum class unroll : unsigned char { automatic, always, never };

}  // namespace mg
