// The Thrust backend of metagrad: elementwise static functions over device arrays, forward and
// backward fused into one thrust::transform each. Link metagrad::cuda (it adds CCCL); compile
// with nvcc for CUDA, or with a host compiler and THRUST_DEVICE_SYSTEM_CPP/_OMP.
#pragma once

#include <metagrad/cuda/kernels.hpp>
#include <metagrad/cuda/tensor_backend.hpp>
#include <metagrad/cuda/transforms.hpp>
