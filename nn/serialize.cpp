// Module::save / Module::load: the state dict in a safetensors file.
#include "core/io/safetensors.h"
#include "nn/module.h"

namespace ember::nn {

void Module::save(const std::string& path,
                  const std::map<std::string, std::string>& metadata) const {
  save_safetensors(state_dict(), path, metadata);
}

LoadResult Module::load(const std::string& path, bool strict) {
  return load_state_dict(load_safetensors(path).tensors, strict);
}

}  // namespace ember::nn
