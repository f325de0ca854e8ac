// libmetagrad_device, the prebuilt device backend: the Thrust backend of mg::tensor on device
// cuda with the kernels of every built-in op, registered when the library loads (Note [Device
// backends] in backend/backend.hpp). A program that links metagrad::device puts tensors on cuda
// from host code alone; a file of it that registers ops of its own includes <metagrad/cuda.hpp>,
// which registers the same backend again. Compiled as CUDA where the build targets a GPU
// (METAGRAD_DEVICE_SYSTEM=CUDA), else for Thrust's CPP or OMP device system on the CPU.
#include <metagrad/cuda.hpp>
