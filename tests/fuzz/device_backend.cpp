// Registers the Thrust backend (on the CPU's OMP or CPP device system), so that the fuzzer runs
// programs on device cuda too: one translation unit that includes <metagrad/cuda.hpp>.
#include <metagrad/cuda.hpp>
