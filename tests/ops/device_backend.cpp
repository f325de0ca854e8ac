// The op table's device legs run mg::tensor on device cuda, on the Thrust backend compiled for
// the CPU (CPP or OMP device system). As in a user's program, one translation unit includes
// <metagrad/cuda.hpp> and so registers the backend with every built-in kernel; the op files
// include only <metagrad/cuda/transforms.hpp> (the mg::cuda transforms), which registers
// nothing and compiles in half the time.
#include <metagrad/cuda.hpp>
