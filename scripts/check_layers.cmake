# The layers of Ember (core/README.md) as a check: every file of core/, nn/, optim/ and
# examples/ belongs to a layer, and may include files of its own layer or of a layer below,
# never of one above. Run by CTest (test "layers"), or by hand:
#
#   cmake -DEMBER_SOURCE_DIR=. -P scripts/check_layers.cmake
#   cmake -DEMBER_SOURCE_DIR=. -DEMBER_PLANT="core/tensor/tensor.cpp|core/ops/shape.h" -P ...
#
# It fails naming each file and the include that runs back up.

cmake_minimum_required(VERSION 3.20)

if(NOT EMBER_SOURCE_DIR)
  set(EMBER_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/..")
endif()
get_filename_component(EMBER_SOURCE_DIR "${EMBER_SOURCE_DIR}" ABSOLUTE)

# Bottom to top, one folder per layer. A file may include files of its own layer and of the
# layers before it. The files directly in core/ (ember.h, testing.h, testing_gtest.h) are the
# api layer: what a user includes.
set(layers
    "base     core/base/"      # storage, allocator, shape, dtype, errors, generator, grad mode, files
    "kernels  core/kernels/"   # loops on pointers, shapes and strides; never a Tensor
    "tensor   core/tensor/"    # Tensor and the ways to make one
    "graph    core/graph/"     # Node, OpFunction<Op> and apply: what ops are written with
    "ops      core/ops/"       # the differentiable ops
    "io       core/io/"        # safetensors
    "autograd core/autograd/"  # backward, grad, gradcheck, functional, anomaly, explore
    "api      core/"           # ember.h, testing.h, testing_gtest.h
    "nn       nn/"
    "optim    optim/"
    "examples examples/")
set(layer_names "")
foreach(entry IN LISTS layers)
  string(REGEX REPLACE " +.*" "" name "${entry}")
  list(APPEND layer_names "${name}")
endforeach()

# The layer of a file (a path relative to the repository), or "" for one outside the layers:
# the layer whose folder holds it directly (api: files directly in core/).
function(layer_of path out)
  get_filename_component(dir "${path}/.." ABSOLUTE BASE_DIR "/")
  string(REGEX REPLACE "^/" "" dir "${dir}/")
  set(layer "")
  foreach(entry IN LISTS layers)
    string(REGEX REPLACE "^([a-z]+) +(.*)$" "\\1;\\2" pair "${entry}")
    list(GET pair 0 name)
    list(GET pair 1 folder)
    string(FIND "${dir}" "${folder}" at)
    # nn/, optim/, examples/: every file below; core/ folders: the folder's files and below.
    if(at EQUAL 0 AND (NOT name STREQUAL "api" OR dir STREQUAL "core/"))
      set(layer "${name}")
      break()
    endif()
  endforeach()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE "${EMBER_SOURCE_DIR}"
     "${EMBER_SOURCE_DIR}/core/*.h" "${EMBER_SOURCE_DIR}/core/*.cpp"
     "${EMBER_SOURCE_DIR}/nn/*.h" "${EMBER_SOURCE_DIR}/nn/*.cpp"
     "${EMBER_SOURCE_DIR}/optim/*.h" "${EMBER_SOURCE_DIR}/optim/*.cpp"
     "${EMBER_SOURCE_DIR}/examples/*.h" "${EMBER_SOURCE_DIR}/examples/*.cpp")

set(violations 0)
set(checked 0)
foreach(file IN LISTS files)
  layer_of("${file}" file_layer)
  if(file_layer STREQUAL "")
    message(SEND_ERROR "${file} is in no layer's folder (core/{base,kernels,tensor,graph,ops,io,autograd}/, core/, nn/, optim/, examples/)")
    math(EXPR violations "${violations} + 1")
    continue()
  endif()
  list(FIND layer_names "${file_layer}" file_rank)
  get_filename_component(dir "${file}" DIRECTORY)
  file(STRINGS "${EMBER_SOURCE_DIR}/${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  # -DEMBER_PLANT="file|include": one include more, as if written in that file (the test that
  # the check fails names the file and the include: CTest's layers_planted).
  if(EMBER_PLANT MATCHES "^${file}\\|(.+)$")
    list(APPEND includes "#include \"${CMAKE_MATCH_1}\"")
  endif()
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*$" "\\1" included "${line}")
    # Rooted at the repository ("core/tensor/tensor.h"), or beside the including file ("svg.h").
    if(NOT EXISTS "${EMBER_SOURCE_DIR}/${included}" AND EXISTS "${EMBER_SOURCE_DIR}/${dir}/${included}")
      set(included "${dir}/${included}")
    endif()
    layer_of("${included}" included_layer)
    if(included_layer STREQUAL "")
      continue()  # outside the layers (a library's header)
    endif()
    math(EXPR checked "${checked} + 1")
    list(FIND layer_names "${included_layer}" included_rank)
    if(included_rank GREATER file_rank)
      message(SEND_ERROR "${file} (layer ${file_layer}) includes \"${included}\" "
                         "(layer ${included_layer}, above it)")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()

list(LENGTH files nfiles)
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} include(s) run back up the layers "
                      "(${layer_names}; see core/README.md)")
endif()
message(STATUS "layers: ${nfiles} files, ${checked} includes within Ember, none runs back up")
