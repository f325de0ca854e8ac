// The Thrust backend of metagrad: mg::tensor on device cuda (and the registration point of the
// user's ops there), and elementwise static functions over device arrays with forward and
// backward fused into one thrust::transform each. Link metagrad::cuda (it adds CCCL); compile
// with nvcc for CUDA, or with a host compiler and THRUST_DEVICE_SYSTEM_CPP/_OMP.
#pragma once

#include <metagrad/cuda/backend.hpp>
#include <metagrad/cuda/functors.hpp>
#include <metagrad/cuda/transforms.hpp>
