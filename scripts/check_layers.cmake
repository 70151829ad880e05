# The layers of Ember (core/README.md) as a check: every file of core/, nn/, optim/ and
# examples/ belongs to a layer, and may include files of its own layer or of a layer below,
# never of one above. Run by CTest (test "layers"), or by hand:
#
#   cmake -DEMBER_SOURCE_DIR=. -P scripts/check_layers.cmake
#
# It fails naming each file and the include that runs back up.

cmake_minimum_required(VERSION 3.20)

if(NOT EMBER_SOURCE_DIR)
  set(EMBER_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/..")
endif()
get_filename_component(EMBER_SOURCE_DIR "${EMBER_SOURCE_DIR}" ABSOLUTE)

# Bottom to top. A file may include files of its own layer and of the layers before it.
set(layers base kernels tensor graph ops engine api nn optim examples)

# The layer of a file (a path relative to the repository), or "" for one outside the layers.
function(layer_of path out)
  set(layer "")
  if(path MATCHES "^core/kernels/")
    set(layer kernels)
  elseif(path MATCHES
         "^core/autograd/(node\\.h|function\\.h|function\\.cpp|grad_mode\\.h|record\\.h|record\\.cpp|profiler\\.h|profiler\\.cpp)$")
    set(layer graph)  # the graph's nodes, Function<Op> and apply: what ops are written with (and
                      # the recording hook apply calls: labels and module paths for anomaly mode
                      # and the profiler)
  elseif(path MATCHES "^core/autograd/")
    set(layer engine)  # backward, grad, gradcheck: they run ops (add, sum_to) on gradients
  elseif(path MATCHES "^core/ops/")
    set(layer ops)
  elseif(path MATCHES "^core/(sampling|safetensors|log|testing)\\.(h|cpp)$")
    set(layer ops)  # built from ops: sampling (sort, softmax), safetensors (contiguous), logging
                    # and test comparisons (to, repr)
  elseif(path MATCHES "^core/(ember\\.h|testing_gtest\\.h)$")
    set(layer api)  # everything of core in one include; the GoogleTest helpers (gradcheck)
  elseif(path MATCHES
         "^core/(tensor|factories|overlap|random)\\.(h|cpp)$")
    set(layer tensor)
  elseif(path MATCHES "^core/[^/]+\\.(h|cpp)$")
    set(layer base)  # storage, shape, dtype, errors, allocator, generator, formatting
  elseif(path MATCHES "^nn/")
    set(layer nn)
  elseif(path MATCHES "^optim/")
    set(layer optim)
  elseif(path MATCHES "^examples/")
    set(layer examples)
  endif()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

# The one include that runs up, with its reason ("including file|included file").
set(allowed
    # The grad-mode switch is a thread-local flag with no includes of its own; Tensor's in-place
    # checks (check_inplace, fill_) read it. It sits in autograd/ because that is where a learner
    # looks for no_grad.
    "core/tensor.cpp|core/autograd/grad_mode.h")

file(GLOB_RECURSE files RELATIVE "${EMBER_SOURCE_DIR}"
     "${EMBER_SOURCE_DIR}/core/*.h" "${EMBER_SOURCE_DIR}/core/*.cpp"
     "${EMBER_SOURCE_DIR}/nn/*.h" "${EMBER_SOURCE_DIR}/nn/*.cpp"
     "${EMBER_SOURCE_DIR}/optim/*.h" "${EMBER_SOURCE_DIR}/optim/*.cpp"
     "${EMBER_SOURCE_DIR}/examples/*.h" "${EMBER_SOURCE_DIR}/examples/*.cpp")

set(violations 0)
set(checked 0)
foreach(file IN LISTS files)
  layer_of("${file}" file_layer)
  list(FIND layers "${file_layer}" file_rank)
  get_filename_component(dir "${file}" DIRECTORY)
  file(STRINGS "${EMBER_SOURCE_DIR}/${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" included "${line}")
    # Rooted at the repository ("core/tensor.h"), or beside the including file ("svg.h").
    if(NOT EXISTS "${EMBER_SOURCE_DIR}/${included}" AND EXISTS "${EMBER_SOURCE_DIR}/${dir}/${included}")
      set(included "${dir}/${included}")
    endif()
    layer_of("${included}" included_layer)
    if(included_layer STREQUAL "")
      continue()  # outside the layers (a library's header)
    endif()
    math(EXPR checked "${checked} + 1")
    list(FIND layers "${included_layer}" included_rank)
    if(included_rank GREATER file_rank AND NOT "${file}|${included}" IN_LIST allowed)
      message(SEND_ERROR "${file} (layer ${file_layer}) includes \"${included}\" "
                         "(layer ${included_layer}, above it)")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()

list(LENGTH files nfiles)
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} include(s) run back up the layers "
                      "(${layers}; see core/README.md)")
endif()
message(STATUS "layers: ${nfiles} files, ${checked} includes within Ember, none runs back up")
