# The layers of the headers (docs/design.md, "Layers"), checked when the top-level project is
# configured: a header includes nothing from a layer above its own, and no include cycle exists.
# A header's layer is its folder:
#   core     detail/metagrad/core/, and the public core types: error, types, shape, call_site, grads,
#            concepts, version
#   ops      include/metagrad/ops/ and ops.hpp: one struct per op
#   backend  detail/metagrad/backend/: the backend interface, the registry, the CPU backend and
#            the kernels made from op structs
#   static   detail/metagrad/static/, expr.hpp, repeat.hpp, unroll.hpp, to_string.hpp: tracing,
#            sweeps (the runtime engine reads what an op's backward uses by tracing it)
#   xt       detail/metagrad/xt/, dual_array.hpp: the xtensor evaluator
#   runtime  detail/metagrad/runtime/, tensor_class.hpp, node.hpp, ops/split.hpp: graph, nodes, engine,
#            hooks, saved tensors, profiler
#   face     every other public header, detail/metagrad/api/ (the functional API and gradcheck
#            behind their public headers), and the Thrust backend under cuda/
# metagrad_check_layers(<headers...>): paths relative to the project's source folder.
set(METAGRAD_LAYER_ALLOWS_core core)
set(METAGRAD_LAYER_ALLOWS_ops core ops)
set(METAGRAD_LAYER_ALLOWS_backend core ops backend)
set(METAGRAD_LAYER_ALLOWS_static core ops static)
set(METAGRAD_LAYER_ALLOWS_xt core ops backend static xt)
set(METAGRAD_LAYER_ALLOWS_runtime core ops backend static runtime)
set(METAGRAD_LAYER_ALLOWS_face core ops backend static xt runtime face)

# The layer of an include path as written after <metagrad/ (e.g. core/storage.hpp).
function(metagrad_layer_of path out)
  if(path MATCHES "^(core|backend|static|xt|runtime)/")
    set(layer "${CMAKE_MATCH_1}")
  elseif(path MATCHES "^api/" OR path MATCHES "^cuda")
    set(layer face)
  elseif(path MATCHES "^(error|types|shape|call_site|grads|concepts|version)\\.hpp$")
    set(layer core)
  elseif(path STREQUAL "ops/split.hpp" OR path STREQUAL "tensor_class.hpp" OR path STREQUAL "node.hpp")
    set(layer runtime)
  elseif(path MATCHES "^ops/" OR path STREQUAL "ops.hpp")
    set(layer ops)
  elseif(path MATCHES "^(expr|repeat|to_string|unroll)\\.hpp$")
    set(layer static)
  elseif(path STREQUAL "dual_array.hpp")
    set(layer xt)
  else()
    set(layer face)
  endif()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

function(metagrad_check_layers)
  set(problems "")
  set(nodes "")
  foreach(header IN LISTS ARGN)
    string(REGEX REPLACE "^(include|detail|cuda)/metagrad/" "" self "${header}")
    list(APPEND nodes "${self}")
    metagrad_layer_of("${self}" layer)
    file(STRINGS "${PROJECT_SOURCE_DIR}/${header}" lines REGEX "^#include <metagrad/")
    set(edges "")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^#include <metagrad/([^>]+)>.*" "\\1" target "${line}")
      list(APPEND edges "${target}")
      metagrad_layer_of("${target}" target_layer)
      if(NOT target_layer IN_LIST METAGRAD_LAYER_ALLOWS_${layer})
        string(APPEND problems "\n  ${self} (${layer}) includes ${target} (${target_layer})")
      endif()
    endforeach()
    set(edges_of_${self} "${edges}")
  endforeach()
  # No cycle: remove, again and again, the headers that include no remaining header.
  set(left "${nodes}")
  while(TRUE)
    set(kept "")
    foreach(n IN LISTS left)
      set(blocked FALSE)
      foreach(e IN LISTS edges_of_${n})
        if(e IN_LIST left)
          set(blocked TRUE)
          break()
        endif()
      endforeach()
      if(blocked)
        list(APPEND kept "${n}")
      endif()
    endforeach()
    list(LENGTH left before)
    list(LENGTH kept after)
    set(left "${kept}")
    if(after EQUAL 0 OR after EQUAL before)
      break()
    endif()
  endwhile()
  if(left)
    list(JOIN left ", " cycle)
    string(APPEND problems "\n  an include cycle, among or reached from: ${cycle}")
  endif()
  if(problems)
    message(FATAL_ERROR "metagrad: the headers break their layers (cmake/metagrad_layers.cmake):"
                        "${problems}")
  endif()
endfunction()
