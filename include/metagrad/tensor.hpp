// mg::tensor and its operations: the class (<metagrad/tensor_class.hpp>, where it is documented),
// the op families (<metagrad/ops.hpp>), and the runtime engine that evaluates and records them.
#pragma once

#include <metagrad/detail/anomaly.hpp>
#include <metagrad/detail/engine.hpp>
#include <metagrad/detail/runtime_ops.hpp>
#include <metagrad/detail/tensor_members.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/tensor_class.hpp>
