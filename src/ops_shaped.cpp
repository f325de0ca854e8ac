// The built-in ops that are not elementwise, on tensors, compiled once
// (<metagrad/runtime/instances.hpp>):
#include "library.hpp"

#define MG_INSTANCES_SHAPED 1
#include <metagrad/runtime/instances.hpp>
