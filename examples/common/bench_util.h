// What the benchmark programs share: the median of repeated timings, the peak RSS, and the check
// that the sizes on a command line fit in memory.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/base/error.h"

namespace ember::bench {

// The median (upper middle for an even count) of the timings.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The process's peak resident set size in MB.
inline double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

// Refuses, before any work, sizes whose tensors would not fit in this machine's memory (such a
// run is killed by the kernel half-way, or swaps for hours): `bytes` is a rough count of what the
// benchmark allocates, `flags` names the flags that set it. A double, so that no product of
// sizes overflows.
inline void check_fits_in_memory(double bytes, const std::string& flags) {
  const double physical =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  auto gb = [](double n) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3g GB", n / 1e9);
    return std::string(text);
  };
  check(physical <= 0 || bytes <= physical, flags, ": these sizes need about ", gb(bytes),
        " of memory, more than this machine's ", gb(physical));
}

}  // namespace ember::bench
