// The safetensors reader and writer. The header is parsed by nlohmann::json (with a callback
// that refuses nesting and duplicate names); everything else is checked here before any
// allocation, so a hostile file can only produce an ember::Error.
#include "core/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"

namespace ember {

namespace {

using json = nlohmann::json;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this reader assumes a little-endian machine");

const char* file_dtype(DType d) {
  switch (d) {
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
    case DType::Int64:
      return "I64";
    case DType::Bool:
      return "BOOL";
  }
  return "?";
}

// A dtype of the file: its element size and the Ember dtype it loads as.
struct FileDType {
  std::size_t size;
  DType dtype;
};

bool lookup_dtype(const std::string& name, FileDType& out) {
  static const std::map<std::string, FileDType> table = {
      {"F32", {4, DType::Float32}}, {"F64", {8, DType::Float64}}, {"I64", {8, DType::Int64}},
      {"BOOL", {1, DType::Bool}},   {"F16", {2, DType::Float32}}, {"BF16", {2, DType::Float32}},
      {"I32", {4, DType::Int64}},   {"I16", {2, DType::Int64}},   {"I8", {1, DType::Int64}},
      {"U8", {1, DType::Int64}}};
  auto it = table.find(name);
  if (it == table.end()) return false;
  out = it->second;
  return true;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = mantissa;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (m & 0x3ff) << 13;
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | mantissa << 13;  // inf or nan
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  return std::bit_cast<float>(bits);
}

float bfloat16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

template <typename T>
T read_le(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The tensor of `dtype_name` with `shape` from `bytes` (already checked to be numel * size).
Tensor decode(const std::string& name, const std::string& dtype_name, const FileDType& fd,
              const Shape& shape, const uint8_t* bytes, int64_t numel) {
  Tensor t = empty(shape, fd.dtype);
  const std::size_t n = static_cast<std::size_t>(numel);
  if (dtype_name == "F32" || dtype_name == "F64" || dtype_name == "I64") {
    if (n) std::memcpy(t.storage()->data(), bytes, n * fd.size);
  } else if (dtype_name == "BOOL") {
    bool* out = t.data_ptr<bool>();
    for (std::size_t i = 0; i < n; ++i) {
      check(bytes[i] <= 1, "load_safetensors: tensor '", name, "' (BOOL) holds byte ",
            static_cast<int>(bytes[i]), " at element ", i, "; expected 0 or 1");
      out[i] = bytes[i] == 1;
    }
  } else if (dtype_name == "F16" || dtype_name == "BF16") {
    float* out = t.data_ptr<float>();
    const bool half = dtype_name == "F16";
    for (std::size_t i = 0; i < n; ++i) {
      const uint16_t v = read_le<uint16_t>(bytes + 2 * i);
      out[i] = half ? half_to_float(v) : bfloat16_to_float(v);
    }
  } else {
    int64_t* out = t.data_ptr<int64_t>();
    for (std::size_t i = 0; i < n; ++i) {
      if (dtype_name == "I32") out[i] = read_le<int32_t>(bytes + 4 * i);
      if (dtype_name == "I16") out[i] = read_le<int16_t>(bytes + 2 * i);
      if (dtype_name == "I8") out[i] = static_cast<int8_t>(bytes[i]);
      if (dtype_name == "U8") out[i] = bytes[i];
    }
  }
  return t;
}

uint64_t checked_u64(const json& v, const std::string& what) {
  check(v.is_number_unsigned(), "load_safetensors: ", what, " must be a non-negative integer, got ",
        v.dump());
  return v.get<uint64_t>();
}

}  // namespace

std::string serialize_safetensors(const NamedTensorList& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  std::vector<Tensor> contiguous;
  for (const auto& [name, t] : tensors) {
    check(!name.empty() && name != "__metadata__", "save_safetensors: invalid tensor name '", name,
          "'");
    check(names.insert(name).second, "save_safetensors: duplicate tensor name '", name, "'");
    check(t.defined(), "save_safetensors: tensor '", name, "' is undefined");
    const uint64_t nbytes = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    header[name] = {{"dtype", file_dtype(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous.push_back(t.detach().contiguous());
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string out(8, '\0');
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  out += text;
  out.reserve(out.size() + offset);
  for (const Tensor& t : contiguous) {
    const auto* p = reinterpret_cast<const char*>(t.storage()->data()) +
                    t.offset() * static_cast<int64_t>(dtype_size(t.dtype()));
    out.append(p, static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
  }
  return out;
}

SafetensorsFile parse_safetensors(const uint8_t* data, std::size_t size) {
  const char* op = "load_safetensors";
  check(size >= 8, op, ": file of ", size, " bytes is too short for the 8-byte header size");
  const uint64_t n = read_le<uint64_t>(data);
  check(n <= kSafetensorsMaxHeader, op, ": header size ", n, " is larger than the limit of ",
        kSafetensorsMaxHeader, " bytes");
  check(n <= size - 8, op, ": header size ", n, " is larger than the file (", size - 8,
        " bytes after the size)");
  check(n >= 2 && data[8] == '{', op, ": the header must be a JSON object starting with '{'");
  const uint8_t* buffer = data + 8 + n;
  const uint64_t buffer_size = size - 8 - n;

  // Parse, refusing what the format never has: nesting deeper than entry -> field -> list, and
  // a name given twice (nlohmann would keep the last silently).
  std::set<std::string> top_keys;
  json header;
  try {
    header = json::parse(
        data + 8, data + 8 + n, [&](int depth, json::parse_event_t event, json& parsed) {
          if (depth > 3) fail(op, ": the header nests deeper than the format allows");
          if (event == json::parse_event_t::key && depth == 1) {
            const std::string key = parsed.get<std::string>();
            check(top_keys.insert(key).second, op, ": duplicate tensor name '", key, "'");
          }
          return true;
        });
  } catch (const json::exception& e) {
    fail(op, ": invalid JSON header: ", e.what());
  }
  check(header.is_object(), op, ": the header must be a JSON object");

  SafetensorsFile out;
  struct Entry {
    uint64_t begin, end;
    std::string name, dtype_name;
    FileDType fd;
    Shape shape;
    int64_t numel;
  };
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      check(value.is_object(), op, ": __metadata__ must be an object of strings");
      for (const auto& [key, v] : value.items()) {
        check(v.is_string(), op, ": __metadata__ value of '", key, "' must be a string, got ",
              v.dump());
        out.metadata[key] = v.get<std::string>();
      }
      continue;
    }
    check(value.is_object(), op, ": entry '", name, "' must be an object");
    for (const auto& [field, v] : value.items()) {
      check(field == "dtype" || field == "shape" || field == "data_offsets", op, ": entry '", name,
            "' has an unknown field '", field, "'");
      (void)v;
    }
    check(value.contains("dtype") && value["dtype"].is_string(), op, ": entry '", name,
          "' needs a string dtype");
    check(value.contains("shape") && value["shape"].is_array(), op, ": entry '", name,
          "' needs a shape list");
    check(value.contains("data_offsets") && value["data_offsets"].is_array() &&
              value["data_offsets"].size() == 2,
          op, ": entry '", name, "' needs data_offsets [begin, end]");
    Entry e;
    e.name = name;
    e.dtype_name = value["dtype"].get<std::string>();
    check(lookup_dtype(e.dtype_name, e.fd), op, ": entry '", name, "' has unknown dtype '",
          e.dtype_name, "'");
    check(value["shape"].size() <= 64, op, ": entry '", name, "' has ", value["shape"].size(),
          " dimensions (at most 64)");
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : value["shape"]) {
      const uint64_t dim = checked_u64(d, "a dimension of '" + name + "'");
      check(dim <= static_cast<uint64_t>(INT64_MAX), op, ": dimension ", dim, " of '", name,
            "' is too large");
      e.shape.push_back(static_cast<int64_t>(dim));
      overflow = overflow || __builtin_mul_overflow(numel, dim, &numel);
    }
    uint64_t nbytes = 0;
    overflow = overflow || __builtin_mul_overflow(numel, e.fd.size, &nbytes);
    check(!overflow && numel <= static_cast<uint64_t>(INT64_MAX), op, ": the shape ", e.shape,
          " of '", name, "' has too many elements");
    e.numel = static_cast<int64_t>(numel);
    e.begin = checked_u64(value["data_offsets"][0], "data_offsets of '" + name + "'");
    e.end = checked_u64(value["data_offsets"][1], "data_offsets of '" + name + "'");
    check(e.begin <= e.end && e.end <= buffer_size, op, ": data_offsets [", e.begin, ", ", e.end,
          "] of '", name, "' are out of range (the data has ", buffer_size, " bytes)");
    check(e.end - e.begin == nbytes, op, ": tensor '", name, "' of shape ", e.shape, " and dtype ",
          e.dtype_name, " needs ", nbytes, " bytes, data_offsets give ", e.end - e.begin);
    entries.push_back(std::move(e));
  }
  // The byte ranges must tile the data exactly: no overlap, no hole, nothing after.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (const Entry& e : entries) {
    check(e.begin == expected, op, ": the data of '", e.name, "' starts at byte ", e.begin,
          "; expected ", expected, " (ranges overlap or leave a hole)");
    expected = e.end;
  }
  check(expected == buffer_size, op, ": the tensors cover ", expected,
        " bytes of data, the file has ", buffer_size);
  for (const Entry& e : entries) {
    out.tensors.emplace_back(
        e.name, decode(e.name, e.dtype_name, e.fd, e.shape, buffer + e.begin, e.numel));
  }
  return out;
}

void save_safetensors(const NamedTensorList& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  const std::string bytes = serialize_safetensors(tensors, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  check(static_cast<bool>(out), "save_safetensors: cannot open '", path, "' for writing");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  check(static_cast<bool>(out), "save_safetensors: writing '", path, "' failed");
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(static_cast<bool>(in), "load_safetensors: cannot open '", path, "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  try {
    return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (file '" + path + "')");
  }
}

}  // namespace ember
