// mg::tensor and its operations: the class (<metagrad/tensor_class.hpp>, where it is documented),
// the op families (<metagrad/ops.hpp>), and the runtime engine that evaluates and records them.
//
// By default the engine is compiled into the library that metagrad::metagrad links (-lmetagrad),
// and this header declares it: a file that uses tensors compiles no kernel, node or engine code.
// With METAGRAD_HEADER_ONLY defined (target metagrad::header_only) it includes the engine, and a
// file compiles what it calls (Note [Compiled core] in core/config.hpp).
#pragma once

#include <metagrad/core/config.hpp>
#include <metagrad/cpu.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/runtime/hooks.hpp>
#include <metagrad/runtime/tensor_inline.hpp>
#include <metagrad/tensor_class.hpp>

#if MG_HEADER_ONLY
#include <metagrad/runtime/anomaly.hpp>
#include <metagrad/runtime/apply.hpp>
#include <metagrad/runtime/engine.hpp>
#include <metagrad/runtime/tensor_members.hpp>
#endif
