#include "nn/tokenizer.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>

#include "core/base/error.h"
#include "nn/unicode_classes.h"

namespace ember::nn {

std::string default_gpt2_dir() {
  if (const char* dir = std::getenv("EMBER_GPT2_DIR"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/ember/gpt2";
}

namespace {

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  check(static_cast<bool>(in), what, ": cannot read ", path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string md5_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  check(EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_md5(), nullptr) == 1,
        "file_md5: OpenSSL's MD5 failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

// The length of the well-formed UTF-8 sequence at s[i], or 0 when it is not one; `bad` is then
// the length of the maximal invalid subpart (at least 1), the bytes one U+FFFD replaces.
// Well-formed sequences (Unicode's table 3-7): 00-7F | C2-DF 80-BF | E0 A0-BF 80-BF |
// E1-EC 80-BF 80-BF | ED 80-9F 80-BF | EE-EF 80-BF 80-BF | F0 90-BF 80-BF 80-BF |
// F1-F3 80-BF 80-BF 80-BF | F4 80-8F 80-BF 80-BF.
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::size_t& bad, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  std::size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    bad = 1;
    return 0;
  }
  char32_t value = b0 & (need == 1 ? 0x1F : need == 2 ? 0x0F : 0x07);
  for (std::size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) {
      bad = k;
      return 0;
    }
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      bad = k;
      return 0;
    }
    value = (value << 6) | (b & 0x3F);
  }
  cp = value;
  return need + 1;
}

struct CodePoint {
  char32_t cp;
  std::size_t offset;  // of its first byte
};

// `text`'s code points; `base` is the offset of text[0] in the caller's text, which an error
// names, with `op`, the public function called.
std::vector<CodePoint> decode_strict(std::string_view text, const char* op, std::size_t base = 0) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::size_t bad = 0;
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(text, i, bad, cp);
    if (n == 0) {
      std::ostringstream bytes;
      for (std::size_t k = i; k < i + bad; ++k)
        bytes << (k > i ? " " : "") << "0x" << std::hex
              << static_cast<int>(static_cast<unsigned char>(text[k]));
      fail(op, ": the text is not valid UTF-8: byte offset ", base + i, " (", bytes.str(),
           ") does not start a well-formed sequence");
    }
    out.push_back({cp, i});
    i += n;
  }
  return out;
}

// Whether c lies in one of a class's sorted, disjoint ranges: the first range ending at or after c
// is the only one that can hold it.
template <std::size_t N>
bool in_class(char32_t c, const unicode::CodePointRange (&ranges)[N]) {
  const auto* r = std::lower_bound(
      std::begin(ranges), std::end(ranges), c,
      [](const unicode::CodePointRange& range, char32_t x) { return range.last < x; });
  return r != std::end(ranges) && r->first <= c;
}

// GPT-2's classes as tiktoken's regex has them (Unicode 16.0, nn/unicode_classes.h): \p{L}, \p{N}
// and \s (Unicode's White_Space property).
bool is_letter(char32_t c) { return in_class(c, unicode::kLetter); }
bool is_number(char32_t c) { return in_class(c, unicode::kNumber); }
bool is_space(char32_t c) { return in_class(c, unicode::kWhiteSpace); }
bool is_other(char32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); }

}  // namespace

std::string file_md5(const std::string& path) { return md5_hex(read_file(path, "file_md5")); }

std::string utf8_replace_invalid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    std::size_t bad = 0;
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(bytes, i, bad, cp);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += bad;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

namespace {

// Fails, naming `op` and the byte offset (`base` + its offset in `text`), at the first byte of
// `text` that does not start a well-formed UTF-8 sequence; allocates nothing.
void check_utf8(std::string_view text, const char* op, std::size_t base) {
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    std::size_t bad = 0;
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(text, i, bad, cp);
    if (n == 0) decode_strict(text.substr(i, bad), op, base + i);  // fails, naming the bytes
    i += n;
  }
}

// The code point at text[i] of a valid UTF-8 text, and the offset after it.
struct Decoded {
  char32_t cp;
  std::size_t end;
};
Decoded decode_at(std::string_view text, std::size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  if (b < 0x80) return {b, i + 1};
  std::size_t bad = 0;
  char32_t cp = 0;
  const std::size_t n = utf8_sequence(text, i, bad, cp);
  return {cp, i + n};
}

// Calls piece(view) for each piece of `text` in order (views into it), decoding the code points
// as it goes: it keeps no copy of the text, nor of its code points. `text` starts at byte `base`
// of the text given to encode (an invalid UTF-8 error names the offset in that text); it is
// checked whole before the first piece.
template <class Piece>
void pretokenize(std::string_view text, const char* op, std::size_t base, Piece&& piece) {
  check_utf8(text, op, base);
  const std::size_t n = text.size();
  std::size_t i = 0;                  // the offset of the next piece
  auto take = [&](std::size_t end) {  // the piece [i, end)
    piece(text.substr(i, end - i));
    i = end;
  };
  // A run of code points of one class from offset k on: the offset where it ends.
  auto run = [&](std::size_t k, bool (*cls)(char32_t)) {
    while (k < n) {
      const Decoded d = decode_at(text, k);
      if (!cls(d.cp)) break;
      k = d.end;
    }
    return k;
  };
  while (i < n) {
    const Decoded d0 = decode_at(text, i);
    const char32_t c = d0.cp;
    // 's|'t|'re|'ve|'m|'ll|'d
    if (c == U'\'' && d0.end < n) {
      const Decoded d1 = decode_at(text, d0.end);
      const Decoded d2 = d1.end < n ? decode_at(text, d1.end) : Decoded{0, d1.end};
      const char32_t c1 = d1.cp, c2 = d2.cp;
      if (c1 == U's' || c1 == U't' || c1 == U'm' || c1 == U'd') {
        take(d1.end);
        continue;
      }
      if ((c1 == U'r' && c2 == U'e') || (c1 == U'v' && c2 == U'e') || (c1 == U'l' && c2 == U'l')) {
        take(d2.end);
        continue;
      }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': one class's run, with one leading space
    const Decoded d1 = c == U' ' && d0.end < n ? decode_at(text, d0.end) : Decoded{0, d0.end};
    bool matched = false;
    for (bool (*cls)(char32_t) : {is_letter, is_number, is_other}) {
      if (cls(c)) {
        take(run(i, cls));
      } else if (c == U' ' && d0.end < n && cls(d1.cp)) {
        take(run(d0.end, cls));
      } else {
        continue;
      }
      matched = true;
      break;
    }
    if (matched) continue;
    // '\s+(?!\S)|\s+': c is whitespace (nothing else is left). A run reaching the end is one
    // piece; otherwise the run's last character is left for the word that follows, unless the
    // run is that one character.
    std::size_t last = i, end = d0.end;  // the run's last code point is [last, end)
    while (end < n) {
      const Decoded d = decode_at(text, end);
      if (!is_space(d.cp)) break;
      last = end;
      end = d.end;
    }
    take(end == n || last == i ? end : last);
  }
}

}  // namespace

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  pretokenize(text, "gpt2_pretokenize", 0, [&](std::string_view p) { pieces.push_back(p); });
  return pieces;
}

GPT2Tokenizer::GPT2Tokenizer(const std::string& dir) {
  const std::string encoder_path = dir + "/encoder.json", vocab_path = dir + "/vocab.bpe";
  // GPT-2's files have these sizes: a file of another size (a huge one), or something that is
  // not a regular file (a FIFO, /dev/zero), is refused before it is read.
  auto load = [](const std::string& path, const char* md5, std::uintmax_t size) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (fs::exists(status)) {
      check(fs::is_regular_file(status), "GPT2Tokenizer: ", path,
            " is not a regular file (expected GPT-2's file with MD5 ", md5, ")");
      const std::uintmax_t got = fs::file_size(path, ec);
      check(!ec && got == size, "GPT2Tokenizer: ", path, " is ", got, " bytes, expected ", size,
            " (GPT-2's file with MD5 ", md5, "; scripts/setup fetches it)");
    }
    std::ifstream in(path, std::ios::binary);
    check(static_cast<bool>(in), "GPT2Tokenizer: cannot read ", path,
          " (expected GPT-2's file with MD5 ", md5, "; scripts/setup fetches it into ",
          "$EMBER_GPT2_DIR, default ~/.cache/ember/gpt2)");
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string got = md5_hex(bytes);
    check(got == md5, "GPT2Tokenizer: ", path, " has MD5 ", got, ", expected ", md5,
          " (a corrupt or different file; scripts/setup fetches GPT-2's)");
    return bytes;
  };
  const std::string encoder_text = load(encoder_path, kGPT2EncoderJsonMd5, 1042301);
  const std::string vocab_text = load(vocab_path, kGPT2VocabBpeMd5, 456318);

  // GPT-2 writes bytes as printable characters: the 188 printable bytes stand for themselves
  // (as code points), the other 68 for U+0100 onwards, in byte order (bytes_to_unicode).
  std::unordered_map<char32_t, unsigned char> byte_of;
  {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      byte_of[printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++)] =
          static_cast<unsigned char>(b);
    }
  }
  auto to_bytes = [&](std::string_view mapped, const std::string& path) {
    std::string out;
    for (const CodePoint& cp : decode_strict(mapped, "GPT2Tokenizer")) {
      const auto it = byte_of.find(cp.cp);
      check(it != byte_of.end(), "GPT2Tokenizer: ", path, ": the token '", mapped,
            "' has a character outside GPT-2's byte alphabet");
      out += static_cast<char>(it->second);
    }
    return out;
  };

  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(encoder_text);
  } catch (const nlohmann::json::exception& e) {
    fail("GPT2Tokenizer: ", encoder_path, " is not valid JSON: ", e.what());
  }
  check(encoder.is_object(), "GPT2Tokenizer: ", encoder_path, " is not a JSON object");
  id_to_bytes_.resize(encoder.size());
  for (const auto& [token, id_json] : encoder.items()) {
    check(id_json.is_number_integer(), "GPT2Tokenizer: ", encoder_path, ": the id of '", token,
          "' is not an integer");
    const auto id = id_json.get<int64_t>();
    check(id >= 0 && id < static_cast<int64_t>(encoder.size()), "GPT2Tokenizer: ", encoder_path,
          ": id ", id, " out of range");
    // The special token is written as itself (its characters are all printable ASCII).
    const std::string bytes = to_bytes(token, encoder_path);
    id_to_bytes_[static_cast<std::size_t>(id)] = bytes;
    if (id != kEndOfText) bytes_to_id_.emplace(bytes, id);
  }
  check(n_vocab() == kEndOfText + 1, "GPT2Tokenizer: ", encoder_path, " has ", n_vocab(),
        " tokens, expected ", kEndOfText + 1);

  // vocab.bpe: "#version: 0.2", then one merge "left right" per line, in rank order. tiktoken
  // ranks a pair by the id of its concatenation (GPT-2's ids are 256 + the merge's line), so the
  // merges only confirm that: each result must be the token 256 + its rank.
  std::istringstream lines(vocab_text);
  std::string line;
  std::getline(lines, line);
  int64_t rank = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const auto space = line.find(' ');
    check(space != std::string::npos, "GPT2Tokenizer: ", vocab_path, ": merge line ", rank + 2,
          " is not 'left right'");
    const std::string merged =
        to_bytes(line.substr(0, space), vocab_path) + to_bytes(line.substr(space + 1), vocab_path);
    const auto it = bytes_to_id_.find(merged);
    check(it != bytes_to_id_.end() && it->second == 256 + rank, "GPT2Tokenizer: ", vocab_path,
          ": merge ", rank, " ('", line, "') does not give token ", 256 + rank);
    ++rank;
  }
  check(rank == kEndOfText - 256, "GPT2Tokenizer: ", vocab_path, " has ", rank,
        " merges, expected ", kEndOfText - 256);
}

// tiktoken's byte_pair_merge: start from one part per byte; repeatedly merge the adjacent pair
// whose concatenation has the lowest id (the leftmost on a tie) until no concatenation is a token.
// A piece that is itself a token is that token (as in tiktoken). Short pieces take the simple
// loop, long ones the heap (the simple loop rescans the piece for every merge).
void GPT2Tokenizer::encode_piece(std::string_view piece, std::vector<int64_t>& out) const {
  if (const auto it = bytes_to_id_.find(std::string(piece)); it != bytes_to_id_.end()) {
    out.push_back(it->second);
    return;
  }
  // Measured on random letters: the two loops are about as fast up to 64 bytes (the lookups
  // dominate both), the heap 1.2x faster at 128 and 1.7x at 512.
  constexpr std::size_t kHeapFrom = 96;  // bytes
  if (piece.size() < kHeapFrom) {
    merge_simple(piece, out);
  } else {
    merge_heap(piece, out);
  }
}

int64_t GPT2Tokenizer::rank_of(std::string_view bytes) const {
  const auto it = bytes_to_id_.find(std::string(bytes));
  return it == bytes_to_id_.end() ? kNoRank : it->second;
}

// Parts as a list of start offsets; each merge scans every pair for the lowest rank and erases
// one start: O(n^2) for a piece of n bytes, with little else to do.
void GPT2Tokenizer::merge_simple(std::string_view piece, std::vector<int64_t>& out) const {
  std::vector<std::size_t> starts(piece.size() + 1);  // part k is [starts[k], starts[k + 1])
  for (std::size_t k = 0; k <= piece.size(); ++k) starts[k] = k;
  auto pair_rank = [&](std::size_t k) -> int64_t {  // parts k and k + 1 merged
    if (k + 2 >= starts.size()) return kNoRank;
    return rank_of(piece.substr(starts[k], starts[k + 2] - starts[k]));
  };
  std::vector<int64_t> ranks(starts.size());
  for (std::size_t k = 0; k < ranks.size(); ++k) ranks[k] = pair_rank(k);
  while (starts.size() > 2) {
    std::size_t best = 0;
    for (std::size_t k = 1; k + 2 < starts.size(); ++k)
      if (ranks[k] < ranks[best]) best = k;
    if (ranks[best] == kNoRank) break;
    starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks[best] = pair_rank(best);
    if (best > 0) ranks[best - 1] = pair_rank(best - 1);
  }
  for (std::size_t k = 0; k + 1 < starts.size(); ++k)
    out.push_back(bytes_to_id_.at(std::string(piece.substr(starts[k], starts[k + 1] - starts[k]))));
}

// The same merges in O(n log n): the parts form a doubly linked list (a part is named by the
// offset where it starts), and a min-heap holds every adjacent pair that is a token as (rank,
// left part's start, right part's end). The heap's top is the lowest rank, the leftmost among
// equal ranks (starts grow from left to right), as the simple loop picks. A merge makes the pairs
// through its two parts stale; they stay in the heap and are dropped when popped (their left part
// is gone, or its right neighbour no longer ends where the pair did), while the merged part's
// pairs with its neighbours are pushed anew.
void GPT2Tokenizer::merge_heap(std::string_view piece, std::vector<int64_t>& out) const {
  const std::size_t n = piece.size();
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> next(n), prev(n);  // part k is [k, next[k]); next[k] == n: the last
  std::vector<char> alive(n, 1);              // k starts a part
  for (std::size_t k = 0; k < n; ++k) {
    next[k] = k + 1;
    prev[k] = k == 0 ? kNone : k - 1;
  }
  struct Pair {
    int64_t rank;
    std::size_t left, end;  // parts [left, next[left]) and [next[left], end)
  };
  auto after = [](const Pair& a, const Pair& b) {  // the heap's order: b pops before a
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  std::vector<Pair> storage;
  storage.reserve(n);
  std::priority_queue<Pair, std::vector<Pair>, decltype(after)> heap(after, std::move(storage));
  auto push = [&](std::size_t left) {  // the pair of part `left` and the part after it
    if (left == kNone || next[left] >= n) return;
    const std::size_t end = next[next[left]];
    const int64_t rank = rank_of(piece.substr(left, end - left));
    if (rank != kNoRank) heap.push({rank, left, end});
  };
  for (std::size_t k = 0; k + 1 < n; ++k) push(k);
  while (!heap.empty()) {
    const Pair p = heap.top();
    heap.pop();
    if (!alive[p.left] || next[p.left] >= n || next[next[p.left]] != p.end) continue;  // stale
    alive[next[p.left]] = 0;
    next[p.left] = p.end;
    if (p.end < n) prev[p.end] = p.left;
    push(prev[p.left]);
    push(p.left);
  }
  for (std::size_t k = 0; k < n; k = next[k])
    out.push_back(bytes_to_id_.at(std::string(piece.substr(k, next[k] - k))));
}

std::vector<int64_t> GPT2Tokenizer::merge_simple(std::string_view piece) const {
  std::vector<int64_t> ids;
  merge_simple(piece, ids);
  return ids;
}

std::vector<int64_t> GPT2Tokenizer::merge_heap(std::string_view piece) const {
  std::vector<int64_t> ids;
  merge_heap(piece, ids);
  return ids;
}

std::vector<int64_t> GPT2Tokenizer::encode(std::string_view text, bool allow_endoftext) const {
  std::vector<int64_t> ids;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t special = text.find(kEndOfTextStr, start);
    const std::string_view part = text.substr(
        start, special == std::string_view::npos ? std::string_view::npos : special - start);
    if (special != std::string_view::npos) {
      check(allow_endoftext, "GPT2Tokenizer::encode: the text contains the special token ",
            kEndOfTextStr, " at byte offset ", special,
            " and it is not allowed (pass allow_endoftext = true to encode it as id ", kEndOfText,
            ")");
    }
    pretokenize(part, "GPT2Tokenizer::encode", start,
                [&](std::string_view piece) { encode_piece(piece, ids); });
    if (special == std::string_view::npos) break;
    ids.push_back(kEndOfText);
    start = special + kEndOfTextStr.size();
  }
  return ids;
}

namespace {

// The tokens' bytes joined; an id outside the vocabulary is an Error naming `op`.
std::string join_tokens(const std::vector<std::string>& vocabulary, const std::vector<int64_t>& ids,
                        const char* op) {
  const auto n_vocab = static_cast<int64_t>(vocabulary.size());
  std::string out;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    check(ids[k] >= 0 && ids[k] < n_vocab, op, ": id ", ids[k], " at position ", k,
          " is outside the vocabulary [0, ", n_vocab, ")");
    out += vocabulary[static_cast<std::size_t>(ids[k])];
  }
  return out;
}

}  // namespace

std::string GPT2Tokenizer::decode_bytes(const std::vector<int64_t>& ids) const {
  return join_tokens(id_to_bytes_, ids, "GPT2Tokenizer::decode_bytes");
}

std::string GPT2Tokenizer::decode(const std::vector<int64_t>& ids) const {
  return utf8_replace_invalid(join_tokens(id_to_bytes_, ids, "GPT2Tokenizer::decode"));
}

}  // namespace ember::nn
