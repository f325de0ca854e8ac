// The CUDA component's consumer, as docs/runtime.md (Devices) lays a program out: this .cu file,
// compiled by nvcc, is the one translation unit that includes the Thrust backend, which registers
// it for mg::device::cuda; cuda_main.cpp is host code. The packaging test compiles and links the
// two (CI has no GPU to run them on); nvcc must print no warning.
#include <metagrad/cuda.hpp>
