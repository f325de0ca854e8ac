// The built-in unary math ops on tensors, compiled once (<metagrad/runtime/instances.hpp>).
#include "library.hpp"

#define MG_INSTANCES_MATH 1
#include <metagrad/runtime/instances.hpp>
