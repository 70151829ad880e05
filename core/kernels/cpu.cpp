#include "core/kernels/cpu.h"

#include <cstdlib>
#include <cstring>

namespace ember::kernels {

namespace {

bool avx512_wanted() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (!cpu_has_avx512f()) return false;
  const char* capability = std::getenv("EMBER_CPU_CAPABILITY");
  return capability == nullptr || std::strcmp(capability, "avx2") != 0;
#else
  return false;
#endif
}

}  // namespace

bool cpu_has_avx512f() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

bool use_avx512() {
  static const bool wanted = avx512_wanted();
  return wanted;
}

}  // namespace ember::kernels
