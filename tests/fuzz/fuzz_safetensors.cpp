// libFuzzer target: the safetensors loader on arbitrary bytes. Any input must either load or
// throw an ember::Error; a crash, a sanitizer report or any other exception is a bug.
#include <cstddef>
#include <cstdint>

#include "core/base/error.h"
#include "core/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    ember::SafetensorsFile file = ember::parse_safetensors(data, size);
    // Touch every element, so a tensor whose bytes were not really there would be caught.
    for (const auto& [name, t] : file.tensors) {
      if (t.numel() > 0) (void)t.to_vector<double>();
    }
  } catch (const ember::Error&) {
  }
  return 0;
}
