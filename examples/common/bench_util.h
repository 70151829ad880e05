// What the benchmark programs share: the median of repeated timings and the peak RSS.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <vector>

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

}  // namespace ember::bench
