// The inline sine and cosine compiled for baseline x86-64 (SSE2, no FMA), whatever instruction
// set the build carries: without a fused multiply-add the reduction uses other constants (Note
// [Inline trigonometry]), and a user who builds with METAGRAD_ARCH=none or the compilers'
// defaults runs them. tests/static/CMakeLists.txt adds -march=x86-64 to this file.
#include "simd_trig_test.cpp"
