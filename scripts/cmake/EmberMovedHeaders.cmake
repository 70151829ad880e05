# Headers that moved when core/ was split into one folder per layer (base/, tensor/, graph/, io/),
# old path = new path. For one release, <ember/core/OLD.h> still works: installed and in the
# build tree a forwarding header of that name includes the new one (scripts/cmake/EmberInstallHeaders.cmake,
# the top-level CMakeLists.txt). Remove in 0.2. (core/autograd/function.h moved to
# core/graph/function.h too, but that path is now the custom Functions' header, which includes
# core/graph/function.h: the old path still gives what it gave.)
set(EMBER_MOVED_HEADERS
    "core/allocator.h=core/base/allocator.h"
    "core/args.h=core/base/args.h"
    "core/convert.h=core/base/convert.h"
    "core/dtype.h=core/base/dtype.h"
    "core/error.h=core/base/error.h"
    "core/format.h=core/base/format.h"
    "core/generator.h=core/base/generator.h"
    "core/ordered_dict.h=core/base/ordered_dict.h"
    "core/parallel.h=core/base/parallel.h"
    "core/repr.h=core/base/repr.h"
    "core/shape.h=core/base/shape.h"
    "core/small_shape.h=core/base/small_shape.h"
    "core/storage.h=core/base/storage.h"
    "core/autograd/grad_mode.h=core/base/grad_mode.h"
    "core/tensor.h=core/tensor/tensor.h"
    "core/options.h=core/tensor/options.h"
    "core/overlap.h=core/tensor/overlap.h"
    "core/random.h=core/tensor/random.h"
    "core/autograd/node.h=core/graph/node.h"
    "core/autograd/record.h=core/graph/record.h"
    "core/autograd/profiler.h=core/graph/profiler.h"
    "core/sampling.h=core/ops/sampling.h"
    "core/safetensors.h=core/io/safetensors.h"
    "core/log.h=core/autograd/log.h"
)

# Writes a forwarding header for each moved header under `dir` (the folder holding core/),
# including the new header as "<prefix>core/...". In the build tree core/autograd/ is a link to
# the source folder, so the old autograd/ paths are forwarded only in an install.
function(ember_write_forwarding_headers dir prefix)
  foreach(pair IN LISTS EMBER_MOVED_HEADERS)
    string(REPLACE "=" ";" pair "${pair}")
    list(GET pair 0 old)
    list(GET pair 1 new)
    get_filename_component(parent "${dir}/${old}" DIRECTORY)
    if(IS_SYMLINK "${parent}")
      continue()  # the build tree's link to a source folder (core/autograd/): never write there
    endif()
    set(text "// Moved to <${prefix}${new}> (core/ is one folder per layer); this forwarding header\n")
    string(APPEND text "// goes in Ember 0.2.\n#pragma once\n#include \"${prefix}${new}\"\n")
    if(EXISTS "${dir}/${old}")
      file(READ "${dir}/${old}" current)
    else()
      set(current "")
    endif()
    if(NOT current STREQUAL text)
      file(WRITE "${dir}/${old}" "${text}")
    endif()
  endforeach()
endfunction()
