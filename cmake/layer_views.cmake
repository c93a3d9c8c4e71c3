# SPDX-License-Identifier: MIT
# Makes the compiler enforce the layer table of CMakeLists.txt (EPROF_LAYERS, EPROF_DEPS_<layer>,
# EPROF_SHARED_<path>, EPROF_INCLUDE_<layer>). Each layer gets a view, EPROF_VIEWS/<layer>/, a directory of links: its
# own folder, the folders of the layers it may use and of the layers those use (a header may
# include its own layer's dependencies), and the shared headers it may include. A layer's
# target has only its view on its include path, so "layer/file.h" of a layer above it (or
# beside it) is not found and the build fails. Includes are written "layer/file.h" or
# "file.h" in the same folder; tools/check-layers refuses "../", which would go around this.
# Sets EPROF_VIEW_INCLUDES_<layer>: the view and the EPROF_INCLUDE_<l> of every layer it sees.
set(EPROF_VIEWS ${CMAKE_BINARY_DIR}/layers)
# Made afresh at each configure: a link left from an older table would still let an include
# through. (REMOVE_RECURSE removes the links, not what they point to.)
file(REMOVE_RECURSE ${EPROF_VIEWS})

# The layers a layer sees: itself and its dependencies, transitively.
function(eprof_layer_closure layer out)
  set(seen ${layer})
  set(todo ${EPROF_DEPS_${layer}})
  while(todo)
    list(POP_FRONT todo l)
    if(NOT l IN_LIST seen)
      list(APPEND seen ${l})
      list(APPEND todo ${EPROF_DEPS_${l}})
    endif()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

get_cmake_property(_eprof_vars VARIABLES)
list(FILTER _eprof_vars INCLUDE REGEX "^EPROF_SHARED_")
foreach(layer ${EPROF_LAYERS})
  set(view ${EPROF_VIEWS}/${layer})
  file(MAKE_DIRECTORY ${view})
  eprof_layer_closure(${layer} seen)
  set(EPROF_VIEW_INCLUDES_${layer} ${view})
  foreach(l ${seen})
    list(APPEND EPROF_VIEW_INCLUDES_${layer} ${EPROF_INCLUDE_${l}})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/src/${l} ${view}/${l} SYMBOLIC)
    if(l STREQUAL "output") # flamegraph/ is part of output
      file(CREATE_LINK ${CMAKE_SOURCE_DIR}/flamegraph ${view}/flamegraph SYMBOLIC)
    endif()
  endforeach()
  # Shared headers: bpf/X is included as "X", src/<dir>/X as "<dir>/X".
  foreach(var ${_eprof_vars})
    string(REGEX REPLACE "^EPROF_SHARED_" "" path ${var})
    if(NOT layer IN_LIST ${var})
      continue()
    endif()
    if(path MATCHES "^bpf/([^/]+)$")
      file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${path} ${view}/${CMAKE_MATCH_1} SYMBOLIC)
    elseif(path MATCHES "^src/([^/]+)/([^/]+)$")
      if(NOT CMAKE_MATCH_1 IN_LIST seen)
        set(dir ${CMAKE_MATCH_1})
        set(name ${CMAKE_MATCH_2})
        file(MAKE_DIRECTORY ${view}/${dir})
        file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${path} ${view}/${dir}/${name} SYMBOLIC)
      endif()
    else()
      message(FATAL_ERROR "EPROF_SHARED_${path}: a shared header is bpf/X or src/<dir>/X")
    endif()
  endforeach()
endforeach()
