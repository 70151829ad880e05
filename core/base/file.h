// Writing a file whole or not at all.
#pragma once

#include <string>
#include <string_view>

namespace ember::detail {

// `bytes` to `path` through a temporary file beside it, fsync and rename (an existing device or
// pipe is written in place); every failure is an ember::Error starting with `op`, and leaves a
// file that was at `path` as it was. Under save_safetensors, checkpoints, pages and pictures.
void write_file(const std::string& path, std::string_view bytes, const char* op);

}  // namespace ember::detail
