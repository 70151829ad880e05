# The wasm preset: Ember compiled to WebAssembly by Debian's emscripten (em++, clang 14, libc++
# 13) for the pages of examples/web/. Included by the top-level CMakeLists.txt when the toolchain
# is Emscripten; it stands in for the find_package() calls of the native build.
#
# - Dependencies: spdlog, fmt, nlohmann-json and Highway are header-only here. em++ must not see
#   /usr/include (glibc's headers break it), so their header trees are copied from Debian's
#   packages into the build directory at configure time. fmt is header-only (FMT_HEADER_ONLY):
#   Debian's spdlog uses an external fmt, whose library is not built for wasm.
# - Highway: one target, so no dispatcher (libhwy's targets.cc, which is not in Debian's -dev
#   package: Highway is header-only here). That target is EMU128, Highway's portable C++ (plain
#   loops over 16-byte arrays, which clang vectorises to SIMD128 under -msimd128): Highway
#   1.0.3's own WASM target has no double-precision vectors (HWY_HAVE_FLOAT64 is 0 there), and
#   the exp kernel (core/kernels/exp.cpp) computes in doubles, as glibc's expf does.
# - OpenMP: none in the browser; scripts/cmake/wasm/omp.h answers "one thread".
# - C++ exceptions: WebAssembly's own (-fwasm-exceptions), for ember::Error.
set(EMBER_WASM_INCLUDE_DIR ${PROJECT_BINARY_DIR}/wasm_include)
foreach(tree spdlog fmt nlohmann hwy)
  if(NOT EXISTS /usr/include/${tree})
    message(FATAL_ERROR "wasm preset: /usr/include/${tree} is missing (run scripts/setup)")
  endif()
  file(COPY /usr/include/${tree} DESTINATION ${EMBER_WASM_INCLUDE_DIR})
endforeach()

add_library(ember_wasm_omp INTERFACE)
target_include_directories(ember_wasm_omp BEFORE INTERFACE ${PROJECT_SOURCE_DIR}/scripts/cmake/wasm)
add_library(OpenMP::OpenMP_CXX ALIAS ember_wasm_omp)
add_library(ember_wasm_spdlog INTERFACE)
target_include_directories(ember_wasm_spdlog SYSTEM INTERFACE ${EMBER_WASM_INCLUDE_DIR})
target_compile_definitions(ember_wasm_spdlog INTERFACE FMT_HEADER_ONLY)
add_library(spdlog::spdlog ALIAS ember_wasm_spdlog)
add_library(nlohmann_json::nlohmann_json ALIAS ember_wasm_spdlog)
add_library(hwy::hwy ALIAS ember_wasm_spdlog)

add_compile_definitions(HWY_COMPILE_ONLY_EMU128)
add_compile_options(-msimd128 -fwasm-exceptions)
add_link_options(-fwasm-exceptions -sALLOW_MEMORY_GROWTH=1)
