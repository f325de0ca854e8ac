// Compile-time baseline for umbrella.cpp: the xtensor headers metagrad includes, and nothing else.
// (With XTENSOR_USE_XSIMD, as metagrad's CMake target sets it.)
#include <xtensor/xarray.hpp>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xexception.hpp>
#include <xtensor/xexpression.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xstrided_view.hpp>

int main() { return 0; }
