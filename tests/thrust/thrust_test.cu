// The CUDA variant of the Thrust tests: the same sources compiled by nvcc, run on a GPU when
// there is one, skipped (exit code 77) when there is none.
#include <cstdio>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "device_memory_test.cpp"
#include "ops_test.cpp"  // transforms_test.cpp is thrust_transforms_test.cu: two nvcc TUs build in parallel

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::puts("metagrad: no CUDA device; the CUDA Thrust tests are skipped");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
