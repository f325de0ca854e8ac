// mg::tensor and its operations: the class (<metagrad/tensor_class.hpp>, where it is documented),
// the op families (<metagrad/ops.hpp>), and the runtime engine that evaluates and records them.
//
// By default the engine is compiled into the library that metagrad::metagrad links (-lmetagrad),
// and this header declares it: a file that uses tensors compiles no kernel, node or engine code.
// With METAGRAD_HEADER_ONLY defined (target metagrad::header_only) it includes the engine, and a
// file compiles what it calls (Note [Compiled core] in detail/config.hpp).
#pragma once

#include <metagrad/detail/config.hpp>
#include <metagrad/detail/hooks.hpp>
#include <metagrad/detail/tensor_inline.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/tensor_class.hpp>

#if MG_HEADER_ONLY
#include <metagrad/detail/anomaly.hpp>
#include <metagrad/detail/engine.hpp>
#include <metagrad/detail/runtime_ops.hpp>
#include <metagrad/detail/tensor_members.hpp>
#endif
