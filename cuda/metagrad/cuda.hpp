// The Thrust backend of metagrad: mg::tensor on device cuda (and the registration point of the
// user's ops there) with its streams, events, device memory and cuBLAS products, and the static
// engine's transforms over device arrays, each one fused pass (docs/gpu.md). Link metagrad::cuda
// (it adds CCCL and cuBLAS); compile with nvcc for CUDA, or with a host compiler and
// THRUST_DEVICE_SYSTEM_CPP/_OMP. A program that links metagrad::device (the prebuilt backend)
// needs this header only where it registers ops of its own.
#pragma once

#include <metagrad/cuda/backend.hpp>
#include <metagrad/cuda/functors.hpp>
#include <metagrad/cuda/graph.hpp>
#include <metagrad/cuda/transforms.hpp>
#include <metagrad/device.hpp>
