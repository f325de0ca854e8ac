// The built-in ops that are not elementwise, on tensors, compiled once
// (<metagrad/detail/instances.hpp>):
#include "library.hpp"

#define MG_INSTANCES_SHAPED 1
#include <metagrad/detail/instances.hpp>
