// The CUDA variant of transforms_test.cpp (main is in thrust_test.cu). A separate translation
// unit so that the two halves of the CUDA tests compile in parallel (nvcc is slow on them).
#include "transforms_test.cpp"
