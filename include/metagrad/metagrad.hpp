// metagrad: automatic differentiation for C++20. This header brings in everything that needs
// no GPU toolkit; the Thrust backend is <metagrad/cuda.hpp>.
#pragma once

#include <metagrad/autograd.hpp>
#include <metagrad/concepts.hpp>
#include <metagrad/error.hpp>
#include <metagrad/forward_ad.hpp>
#include <metagrad/function.hpp>
#include <metagrad/functional.hpp>
#include <metagrad/fuse.hpp>
#include <metagrad/gradcheck.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/graph_dot.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/profiler.hpp>
#include <metagrad/saved_tensors.hpp>
#include <metagrad/static.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>
#include <metagrad/version.hpp>
#include <metagrad/xtensor.hpp>
