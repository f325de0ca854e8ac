// The one translation unit of the device example that includes the Thrust backend: including
// <metagrad/cuda.hpp> registers it for mg::device::cuda.
#include <metagrad/cuda.hpp>
