// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), so that
// files move between Ember and the Python ecosystem:
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header][raw little-endian tensor data]
//   header: {"__metadata__": {"k": "v"}, "w": {"dtype": "F32", "shape": [2, 3],
//            "data_offsets": [0, 24]}, ...}   (offsets relative to the start of the data)
//
// Written: F32, F64, I64, BOOL. Read: those, plus F16 and BF16 (converted to float32) and
// I32/I16/I8/U8 (converted to int64). Every malformed file is an ember::Error naming what is
// wrong: truncated data, a header larger than the file or than 100 MB, invalid JSON or UTF-8,
// anything but spaces (0x20) after the header's JSON object (a NUL byte included), nesting
// deeper than the format has, a key repeated at any level (a tensor name, a field of an entry,
// a key of __metadata__), a tensor name that is empty or holds a control character, offsets out
// of range / overlapping / leaving holes, an unknown dtype, a byte range that does not match
// shape x dtype, a BOOL byte other than 0 or 1. The writer refuses what the reader would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/file.h"  // detail::AtomicFile, which save_safetensors writes through
#include "core/tensor/tensor.h"

namespace ember {

using NamedTensorList = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  NamedTensorList tensors;  // in the order of their data in the file
  std::map<std::string, std::string> metadata;
};

inline constexpr std::size_t kSafetensorsMaxHeader = 100u << 20;  // 100 MB, as the Rust crate

// The file's bytes for `tensors` (names unique and not "__metadata__"; any layout, written
// contiguous) and `metadata`.
std::string serialize_safetensors(const NamedTensorList& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
SafetensorsFile parse_safetensors(const uint8_t* data, std::size_t size);

// Writing: the file is written beside `path` under a temporary name, the header first and then
// each tensor's bytes straight from its storage (no second copy of the tensors in memory), flushed
// (fsync), closed and renamed over `path` (and the directory flushed), every step checked: a full
// disk ("No space left on device") is an ember::Error and leaves a file that was at `path` as it
// was. The file's bytes are serialize_safetensors'. Reading checks the header (size, JSON) before
// reading the data.
void save_safetensors(const NamedTensorList& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});
SafetensorsFile load_safetensors(const std::string& path);

namespace detail {
// `text` for an error message: control characters as \u00XX (a NUL would end the message).
std::string printable(const std::string& text);
}  // namespace detail

}  // namespace ember
