// Every built-in op family, and the lists the device backends and the tests read.
#pragma once

#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/comparison.hpp>
#include <metagrad/ops/conversion.hpp>
#include <metagrad/ops/indexing.hpp>
#include <metagrad/ops/linalg.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/ops/math.hpp>
#include <metagrad/ops/nn.hpp>
#include <metagrad/ops/reductions.hpp>
#include <metagrad/ops/selection.hpp>
#include <metagrad/ops/shape.hpp>

namespace mg {

/// The built-in elementwise ops: each has a forward kernel and a fused backward kernel on every
/// backend.
using elementwise_ops = op_list_concat<arithmetic_ops, math_ops, comparison_ops>;

/// Every built-in op of both engines (the conversions, tensor members, are `conversion_ops`).
using builtin_ops =
    op_list_concat<elementwise_ops, reduction_ops, selection_ops, shape_ops, indexing_ops,
                   linalg_ops, nn_ops>;

}  // namespace mg
