// The OpenMP calls Ember makes, for the wasm preset: WebAssembly in the browser runs one thread
// and has no OpenMP runtime, so these say "one thread, thread 0". Without -fopenmp the compiler
// ignores the `#pragma omp` lines and every loop runs serially. (scripts/cmake/EmberWasm.cmake
// puts this directory first on the include path.)
#pragma once

inline int omp_get_max_threads() { return 1; }
inline int omp_get_thread_num() { return 0; }
inline int omp_in_parallel() { return 0; }
