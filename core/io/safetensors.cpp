// The safetensors reader and writer. The header is parsed by nlohmann::json (with a callback
// that refuses nesting and duplicate names); everything else is checked here before any
// allocation, so a hostile file can only produce an ember::Error.
#include "core/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>

#include "core/base/bit_cast.h"
#include "core/base/error.h"

namespace ember {

namespace detail {

// `text` for an error message: control characters (a NUL would end the message) as \u00XX.
std::string printable(const std::string& text) {
  std::ostringstream out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      out << "\\u" << std::hex << std::setfill('0') << std::setw(4) << static_cast<int>(byte)
          << std::dec;
    } else {
      out << c;
    }
  }
  return out.str();
}

}  // namespace detail

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
  return ember::bit_cast<float>(bits);
}

float bfloat16_to_float(uint16_t b) {
  return ember::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

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

// What is wrong with `text` as a tensor name or metadata string ("" if nothing): it must be
// valid UTF-8 (shortest form, no surrogates, at most U+10FFFF) and, when `name` is set, hold no
// control character (U+0000-U+001F, U+007F-U+009F).
std::string text_problem(const std::string& text, bool name) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t size = text.size();
  for (std::size_t i = 0; i < size;) {
    const unsigned char c = s[i];
    uint32_t cp;
    std::size_t len;
    if (c < 0x80) {
      cp = c, len = 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
      cp = c & 0x1fu, len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      cp = c & 0x0fu, len = 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
      cp = c & 0x07u, len = 4;
    } else {
      return "is not valid UTF-8 (byte " + std::to_string(c) + " at offset " + std::to_string(i) +
             ")";
    }
    if (i + len > size) return "is not valid UTF-8 (truncated sequence at the end)";
    for (std::size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xc0) != 0x80)
        return "is not valid UTF-8 (bad continuation byte at offset " + std::to_string(i + k) + ")";
      cp = cp << 6 | (s[i + k] & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return "is not valid UTF-8 (overlong form, surrogate or code point past U+10FFFF at offset " +
             std::to_string(i) + ")";
    if (name && (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))) {
      std::ostringstream message;
      message << "holds the control character U+" << std::hex << std::uppercase << std::setfill('0')
              << std::setw(4) << cp << std::dec << " at offset " << i;
      return message.str();
    }
    i += len;
  }
  return "";
}

using detail::printable;

uint64_t checked_u64(const json& v, const std::string& what) {
  check(v.is_number_unsigned(), "load_safetensors: ", what, " must be a non-negative integer, got ",
        v.dump());
  return v.get<uint64_t>();
}

// The file's first bytes: the header's size (8 bytes) and the header, its JSON padded with spaces
// so that the data starts 8-byte aligned; every name, dtype and the header's size checked.
std::string header_bytes(const NamedTensorList& tensors,
                         const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  // Metadata alone over the header limit: refused before it is checked and dumped (the exact
  // header size is checked below).
  std::size_t metadata_bytes = 0;
  for (const auto& [key, value] : metadata) metadata_bytes += key.size() + value.size();
  check(metadata_bytes <= kSafetensorsMaxHeader, "save_safetensors: the header would be over ",
        metadata_bytes, " bytes, more than the format's limit of ", kSafetensorsMaxHeader,
        " (metadata too large)");
  for (const auto& [key, value] : metadata) {
    // The JSON writer would throw its own exception on text that is not UTF-8.
    if (const std::string problem = text_problem(key, false); !problem.empty())
      fail("save_safetensors: the metadata key '", printable(key), "' ", problem);
    if (const std::string problem = text_problem(value, false); !problem.empty())
      fail("save_safetensors: the metadata value of '", printable(key), "' ", problem);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    check(!name.empty() && name != "__metadata__", "save_safetensors: invalid tensor name '", name,
          "'");
    if (const std::string problem = text_problem(name, true); !problem.empty())
      fail("save_safetensors: the tensor name '", printable(name), "' ", problem);
    check(names.insert(name).second, "save_safetensors: duplicate tensor name '", name, "'");
    check(t.defined(), "save_safetensors: tensor '", name, "' is undefined");
    const auto numel = static_cast<uint64_t>(t.numel());
    check(numel <= (UINT64_MAX - offset) / dtype_size(t.dtype()), "save_safetensors: tensor '",
          name, "' of shape ", t.shape(), " would end past byte 2^64 of the data");
    const uint64_t nbytes = numel * dtype_size(t.dtype());
    header[name] = {{"dtype", file_dtype(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  // Never write a file that the reader (and the Rust crate) would refuse.
  check(text.size() <= kSafetensorsMaxHeader, "save_safetensors: the header would be ", text.size(),
        " bytes, more than the format's limit of ", kSafetensorsMaxHeader,
        " (too many tensors, or metadata too large)");
  std::string out(8, '\0');
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  out += text;
  return out;
}

// Gives `sink` the file's data: each tensor's bytes in turn, straight from its storage (a tensor
// that is not contiguous is copied alone, one at a time).
template <typename Sink>
void write_data(const NamedTensorList& tensors, Sink&& sink) {
  for (const auto& [name, tensor] : tensors) {
    const Tensor t = tensor.detach().contiguous();
    const auto* p = reinterpret_cast<const char*>(t.storage()->data()) +
                    t.offset() * static_cast<int64_t>(dtype_size(t.dtype()));
    sink(std::string_view(p, static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype())));
  }
}

}  // namespace

std::string serialize_safetensors(const NamedTensorList& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  std::string out = header_bytes(tensors, metadata);
  std::size_t data_size = 0;
  for (const auto& [name, t] : tensors) {
    data_size += static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
  }
  out.reserve(out.size() + data_size);
  write_data(tensors, [&](std::string_view bytes) { out.append(bytes); });
  return out;
}

namespace {

// One tensor's entry in the header, checked.
struct Entry {
  uint64_t begin, end;
  std::string name, dtype_name;
  FileDType fd;
  Shape shape;
  int64_t numel;
};

struct Header {
  std::vector<Entry> entries;  // sorted by their data, which they tile from byte 0
  std::map<std::string, std::string> metadata;
  uint64_t data_size = 0;  // the bytes of data the entries cover
};

// The n bytes of the header (after its 8-byte size), checked against a data section of
// buffer_size bytes (UINT64_MAX when it is not known yet: a stream).
Header parse_header(const uint8_t* header_begin, uint64_t n, uint64_t buffer_size) {
  const char* op = "load_safetensors";
  check(n >= 2 && header_begin[0] == '{', op,
        ": the header must be a JSON object starting with '{'");
  const uint8_t* header_end = header_begin + n;
  // The header is a JSON object followed by nothing but spaces (0x20), as the format says. A NUL
  // byte is never valid in it (JSON strings escape control characters), and nlohmann's lexer
  // would take one for the end of the input: `{...}\0garbage` must not load.
  if (const auto* nul = std::find(header_begin, header_end, uint8_t{0}); nul != header_end) {
    fail(op, ": the header holds a NUL byte at offset ", nul - header_begin,
         " (only spaces may follow its JSON object)");
  }
  const auto* text_end = header_end;
  while (text_end > header_begin && text_end[-1] == ' ') --text_end;
  check(text_end > header_begin && text_end[-1] == '}', op,
        ": the header must be a JSON object followed only by spaces (0x20); its last byte other "
        "than a space is ",
        static_cast<int>(text_end > header_begin ? text_end[-1] : 0), ", not '}'");

  // Parse, refusing what the format never has: nesting deeper than entry -> field -> list, and
  // a key given twice at any level (nlohmann would keep the last silently): a tensor name, a
  // field of an entry ("dtype" twice), a key of __metadata__. keys[d] holds the keys seen so far
  // in the object open at nesting level d; owner[d] is the key that object is the value of.
  std::vector<std::set<std::string>> keys;
  std::vector<std::string> owner;
  std::string last_key;
  json header;
  try {
    header = json::parse(
        header_begin, text_end, [&](int depth, json::parse_event_t event, json& parsed) {
          if (depth > 3) fail(op, ": the header nests deeper than the format allows");
          if (event == json::parse_event_t::object_start) {
            keys.emplace_back();
            owner.push_back(keys.size() == 1 ? std::string() : last_key);
          } else if (event == json::parse_event_t::object_end) {
            keys.pop_back();
            owner.pop_back();
          } else if (event == json::parse_event_t::key) {
            last_key = parsed.get<std::string>();
            if (!keys.back().insert(last_key).second) {
              if (keys.size() == 1) fail(op, ": duplicate tensor name '", printable(last_key), "'");
              if (keys.size() == 2 && owner.back() == "__metadata__")
                fail(op, ": duplicate key '", printable(last_key), "' in __metadata__");
              fail(op, ": entry '", printable(owner.back()), "' has the field '",
                   printable(last_key), "' twice");
            }
          }
          return true;
        });
  } catch (const json::parse_error& e) {
    // In strict mode the parser insists on the end of the input after the object.
    if (std::string(e.what()).find("expected end of input") != std::string::npos) {
      fail(op, ": the header must be one JSON object followed only by spaces (0x20): ", e.what());
    }
    fail(op, ": invalid JSON header: ", e.what());
  } catch (const json::exception& e) {
    fail(op, ": invalid JSON header: ", e.what());
  }
  check(header.is_object(), op, ": the header must be a JSON object");

  Header out;
  std::vector<Entry>& entries = out.entries;
  for (const auto& [name, value] : header.items()) {
    check(!name.empty(), op, ": a tensor name is empty");
    if (const std::string problem = text_problem(name, true); !problem.empty())
      fail(op, ": the tensor name '", printable(name), "' ", problem);
    if (name == "__metadata__") {
      check(value.is_object(), op, ": __metadata__ must be an object of strings");
      for (const auto& [key, v] : value.items()) {
        check(v.is_string(), op, ": __metadata__ value of '", printable(key),
              "' must be a string, got ", v.dump());
        out.metadata[key] = v.get<std::string>();
      }
      continue;
    }
    check(value.is_object(), op, ": entry '", name, "' must be an object");
    for (const auto& [field, v] : value.items()) {
      check(field == "dtype" || field == "shape" || field == "data_offsets", op, ": entry '", name,
            "' has an unknown field '", printable(field), "'");
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
  out.data_size = expected;
  return out;
}

}  // namespace

SafetensorsFile parse_safetensors(const uint8_t* data, std::size_t size) {
  const char* op = "load_safetensors";
  check(size >= 8, op, ": file of ", size, " bytes is too short for the 8-byte header size");
  const uint64_t n = read_le<uint64_t>(data);
  check(n <= kSafetensorsMaxHeader, op, ": header size ", n, " is larger than the limit of ",
        kSafetensorsMaxHeader, " bytes");
  check(n <= size - 8, op, ": header size ", n, " is larger than the file (", size - 8,
        " bytes after the size)");
  const uint8_t* buffer = data + 8 + n;
  const uint64_t buffer_size = size - 8 - n;
  Header header = parse_header(data + 8, n, buffer_size);
  check(header.data_size == buffer_size, op, ": the tensors cover ", header.data_size,
        " bytes of data, the file has ", buffer_size);
  SafetensorsFile out;
  out.metadata = std::move(header.metadata);
  for (const Entry& e : header.entries) {
    out.tensors.emplace_back(
        e.name, decode(e.name, e.dtype_name, e.fd, e.shape, buffer + e.begin, e.numel));
  }
  return out;
}

namespace {

std::string errno_text(int error) { return std::generic_category().message(error); }

// Reads up to `size` bytes (fewer only at the end of the file); the count read, or -1.
ssize_t read_all(int fd, uint8_t* out, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, out + done, std::min<std::size_t>(size - done, 1u << 30));
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return static_cast<ssize_t>(done);
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void save_safetensors(const NamedTensorList& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  // Streamed: the header, then each tensor's bytes from its own storage, so that saving a model
  // and its optimizer's state never holds a second copy of them (serialize_safetensors would).
  const std::string header = header_bytes(tensors, metadata);  // checked before the file is made
  uint64_t data = 0;  // header_bytes checked that the data offsets do not overflow
  for (const auto& [name, t] : tensors)
    data += static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
  const uint64_t size = data > UINT64_MAX - header.size() ? UINT64_MAX : data + header.size();
  detail::AtomicFile file(path, "save_safetensors");
  file.reserve(size);  // a file the disk cannot hold is refused before its first byte
  file.write(header);
  write_data(tensors, [&](std::string_view bytes) { file.write(bytes); });
  file.commit();
}

SafetensorsFile load_safetensors(const std::string& path) {
  const char* op = "load_safetensors";
  // Opened without waiting for a FIFO's writer (a FIFO that no program writes to reads as
  // empty, an error below, not a wait without end); the reads then block as usual.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  check(fd >= 0, op, ": cannot open '", path, "': ", errno_text(errno));
  FdCloser closer{fd};
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  struct stat st {};
  check(::fstat(fd, &st) == 0, op, ": cannot stat '", path, "': ", errno_text(errno));
  check(!S_ISDIR(st.st_mode), op, ": '", path, "' is a directory, not a safetensors file");
  // The header first: its size and its JSON are checked before any byte of data is read (or
  // any memory allocated for it), so a huge or endless input (/dev/zero) is refused at once.
  auto fail_read = [&](const char* what) {
    fail(op, ": reading ", what, " of '", path, "' failed: ", errno_text(errno));
  };
  try {
    std::string bytes(8, '\0');
    auto* p = reinterpret_cast<uint8_t*>(bytes.data());
    ssize_t got = read_all(fd, p, 8);
    if (got < 0) fail_read("the header size");
    if (got < 8) return parse_safetensors(p, static_cast<std::size_t>(got));  // the error
    const uint64_t n = read_le<uint64_t>(p);
    check(n <= kSafetensorsMaxHeader, op, ": header size ", n, " is larger than the limit of ",
          kSafetensorsMaxHeader, " bytes");
    const bool regular = S_ISREG(st.st_mode);
    const auto file_size = static_cast<uint64_t>(st.st_size);
    if (regular) {
      check(n <= file_size - 8, op, ": header size ", n, " is larger than the file (",
            file_size - 8, " bytes after the size)");
    }
    bytes.resize(8 + n);
    p = reinterpret_cast<uint8_t*>(bytes.data());
    got = read_all(fd, p + 8, n);
    if (got < 0) fail_read("the header");
    check(static_cast<uint64_t>(got) == n, op, ": header size ", n, " is larger than the file (",
          got, " bytes after the size)");
    const Header header = parse_header(p + 8, n, regular ? file_size - 8 - n : UINT64_MAX);
    if (regular) {
      check(header.data_size == file_size - 8 - n, op, ": the tensors cover ", header.data_size,
            " bytes of data, the file has ", file_size - 8 - n);
    }
    check(header.data_size <= SIZE_MAX - 9 - n, op, ": the tensors cover ", header.data_size,
          " bytes, more than this machine can address");
    // The data, and one byte more to see that the file ends there; from a stream in chunks, so
    // that memory grows only as the data really comes.
    const uint64_t wanted = header.data_size + 1;
    uint64_t have = 0;
    while (have < wanted) {
      const uint64_t chunk = regular ? wanted : std::min<uint64_t>(wanted - have, 1u << 24);
      bytes.resize(8 + n + have + chunk);
      got = read_all(fd, reinterpret_cast<uint8_t*>(bytes.data()) + 8 + n + have, chunk);
      if (got < 0) fail_read("the data");
      have += static_cast<uint64_t>(got);
      if (static_cast<uint64_t>(got) < chunk) break;
    }
    bytes.resize(8 + n + have);
    return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (file '" + path + "')");
  }
}

}  // namespace ember
