// The built-in arithmetic and comparison ops on tensors, compiled once
// (<metagrad/detail/instances.hpp>).
#include "library.hpp"

#define MG_INSTANCES_ARITHMETIC 1
#include <metagrad/detail/instances.hpp>
