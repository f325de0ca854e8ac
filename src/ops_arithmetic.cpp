// The built-in arithmetic and comparison ops on tensors, compiled once
// (<metagrad/runtime/instances.hpp>).
#include "library.hpp"

#define MG_INSTANCES_ARITHMETIC 1
#include <metagrad/runtime/instances.hpp>
