// GPT-2's tokenizer (nn/tokenizer.h) against tiktoken's "gpt2" encoding: the ids of The Verdict
// and of ~60 hard strings, and decodings of bytes that are not UTF-8, from
// tests/fixtures/tokenizer.txt (scripts/fixtures/gen_tokenizer.py). The vocabulary files come
// from scripts/setup; without them these tests fail with the loader's message (never skip).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/base/error.h"
#include "nn/tokenizer.h"
#include "nn/unicode_classes.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

namespace ember::nn {
namespace {

namespace fs = std::filesystem;

const GPT2Tokenizer& tokenizer() {
  static const GPT2Tokenizer tok;
  return tok;
}

// tiktoken's ids (scripts/fixtures/gen_tokenizer.py lists the entries).
const test::Fixture& tiktoken() { return test::fixture_file("tokenizer.txt"); }

// The name of a case's entry: case_entry("encode", 3, "ids") is "encode/3/ids".
std::string case_entry(const std::string& kind, int i, const std::string& part) {
  return kind + "/" + std::to_string(i) + "/" + part;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(GPT2Tokenizer, TheBooksExamples) {
  const auto& tok = tokenizer();
  EXPECT_EQ(tok.n_vocab(), 50257);
  EXPECT_EQ(tok.encode("Hello, I am"), (std::vector<int64_t>{15496, 11, 314, 716}));
  EXPECT_EQ(tok.encode("Every effort moves you"), (std::vector<int64_t>{6109, 3626, 6100, 345}));
  EXPECT_EQ(tok.decode({15496, 11, 314, 716}), "Hello, I am");
  // Chapter 2: "Hello, do you like tea? <|endoftext|> In the sunlit terraces of someunknownPlace."
  const auto ids = tok.encode(
      "Hello, do you like tea? <|endoftext|> In the sunlit terraces of someunknownPlace.", true);
  EXPECT_EQ(ids,
            (std::vector<int64_t>{15496, 11,   466,   345,  588,  8887, 30,  220,   50256, 554,
                                  262,   4252, 18250, 8812, 2114, 286,  617, 34680, 27271, 13}));
}

TEST(GPT2Tokenizer, TheVerdictIsTiktoksIds) {
  const std::string text =
      read_text(std::string(EMBER_FIXTURES_DIR) + "/../../examples/the-verdict.txt");
  ASSERT_EQ(text.size(), 20479u);  // ASCII: characters = bytes
  const auto ids = tokenizer().encode(text);
  EXPECT_EQ(ids.size(), 5145u);
  EXPECT_EQ(ids, tiktoken().ints("verdict"));
  EXPECT_EQ(tokenizer().decode(ids), text);
}

TEST(GPT2Tokenizer, HardStringsAreTiktokensIds) {
  int i = 0;
  for (; tiktoken().has(case_entry("encode", i, "text")); ++i) {
    const std::string& text = tiktoken().text(case_entry("encode", i, "text"));
    const std::vector<int64_t>& ids = tiktoken().ints(case_entry("encode", i, "ids"));
    const bool allow_special = tiktoken().has(case_entry("encode", i, "allowed_special"));
    EXPECT_EQ(tokenizer().encode(text, allow_special), ids) << "text: " << text;
    // Valid UTF-8 round-trips.
    EXPECT_EQ(tokenizer().decode(ids), text) << "text: " << text;
  }
  EXPECT_GE(i, 50);
}

TEST(GPT2Tokenizer, DecodeReplacesInvalidUtf8AsPython) {
  int i = 0;
  for (; tiktoken().has(case_entry("decode", i, "ids")); ++i) {
    const std::vector<int64_t>& ids = tiktoken().ints(case_entry("decode", i, "ids"));
    EXPECT_EQ(tokenizer().decode(ids), tiktoken().text(case_entry("decode", i, "text")))
        << "ids[0] " << ids[0] << ", " << ids.size() << " ids";
  }
  EXPECT_GE(i, 256);
}

TEST(GPT2Tokenizer, PretokenizerPieces) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(gpt2_pretokenize("Hello, I'm  here\n\n  now 42"),
            (V{"Hello", ",", " I", "'m", " ", " here", "\n\n ", " now", " 42"}));
  EXPECT_EQ(gpt2_pretokenize("   "), (V{"   "}));
  EXPECT_EQ(gpt2_pretokenize(""), V{});
}

// The pre-tokenizer's classes are Unicode 16.0's, as tiktoken's regex engine has them: a character
// of each version since 15.0 (15.1 and 16.0 are the ones Debian's ICU 72 did not know) is a
// letter or a number, and a code point unassigned in 16.0 is neither.
TEST(GPT2Tokenizer, PretokenizerClassesAreUnicode16s) {
  using V = std::vector<std::string_view>;
  EXPECT_STREQ(unicode::kVersion, "16.0.0");
  const std::vector<std::pair<const char*, std::string>> letters = {
      {"15.0 KAWI LETTER A", "\U00011F04"},
      {"15.1 CJK UNIFIED IDEOGRAPH-2EBF0 (Extension I's first)", "\U0002EBF0"},
      {"15.1 CJK UNIFIED IDEOGRAPH-2EE5D (Extension I's last)", "\U0002EE5D"},
      {"16.0 GARAY CAPITAL LETTER A", "\U00010D50"},
      {"16.0 TODHRI LETTER A", "\U000105C0"},
      {"16.0 KIRAT RAI LETTER A", "\U00016D43"},
      {"16.0 OL ONAL LETTER O", "\U0001E5D0"}};
  for (const auto& [name, c] : letters) {
    // One run of letters with an ASCII letter on each side; "'s" after it is the contraction.
    const std::string text = "a" + c + "b" + c + "'s " + c;
    EXPECT_EQ(gpt2_pretokenize(text), (V{"a" + c + "b" + c, "'s", " " + c})) << name;
  }
  const std::vector<std::pair<const char*, std::string>> numbers = {
      {"15.0 KAWI DIGIT ZERO", "\U00011F50"},
      {"16.0 GARAY DIGIT ZERO", "\U00010D40"},
      {"16.0 MYANMAR PAO DIGIT ZERO (Myanmar Extended-C)", "\U000116D0"},
      {"16.0 KIRAT RAI DIGIT ZERO", "\U00016D70"},
      {"16.0 OUTLINED DIGIT ZERO", "\U0001CCF0"},
      {"16.0 OL ONAL DIGIT ZERO", "\U0001E5F1"}};
  for (const auto& [name, c] : numbers) {
    const std::string text = "1" + c + "2 " + c + "x";
    EXPECT_EQ(gpt2_pretokenize(text), (V{"1" + c + "2", " " + c, "x"})) << name;
  }
  // Unassigned in 16.0 (U+2EE5E follows Extension I; U+10940 is a letter of Unicode 17.0): other
  // characters, so the apostrophe joins them and "s" is a word of its own.
  for (const std::string c : {"\U0002EE5E", "\U00010940"}) {
    EXPECT_EQ(gpt2_pretokenize("a" + c + "'s"), (V{"a", c + "'", "s"}));
  }
  // White_Space: each of its 25 code points other than U+0020 is a piece of its own between two
  // letters (only U+0020 joins the word after it); ZERO WIDTH SPACE, MONGOLIAN VOWEL SEPARATOR
  // (White_Space before 6.3) and ZERO WIDTH NO-BREAK SPACE are other characters.
  for (const std::string w :
       {"\t", "\n", "\v", "\f", "\r", "\u0085", "\u00A0", "\u1680", "\u2000", "\u2005", "\u200A",
        "\u2028", "\u2029", "\u202F", "\u205F", "\u3000"}) {
    EXPECT_EQ(gpt2_pretokenize("a" + w + w + "b"), (V{"a", w, w, "b"})) << "bytes " << w.size();
  }
  for (const std::string o : {"\u200B", "\u180E", "\uFEFF"}) {
    EXPECT_EQ(gpt2_pretokenize("a" + o + o + "b"), (V{"a", o + o, "b"})) << "bytes " << o.size();
  }
}

// The ids of a 16.0 letter followed by "'s": the split is the thing under test, so the expected
// ids are Ember's own BPE of each piece (tiktoken is not at hand): the letter's bytes, then "'s"
// (id 338). With 15.0's classes the apostrophe went with the character (then "other").
TEST(GPT2Tokenizer, ANewLetterKeepsItsContraction) {
  const auto& tok = tokenizer();
  for (const std::string c : {"\U0002EBF0", "\U000105C0", "\U0001E5D0"}) {
    std::vector<int64_t> expected = tok.encode(c);
    expected.push_back(338);
    EXPECT_EQ(tok.encode(c + "'s"), expected);
  }
  EXPECT_EQ(tok.encode("'s"), std::vector<int64_t>{338});
}

// encode's two merge loops (the simple one for short pieces, the heap for long ones) give the
// same ids on random pieces made of fragments that merge in many ways, and on runs of one
// character (where every pair ties with its neighbours); the ids spell the piece's bytes.
TEST(GPT2Tokenizer, TheMergeLoopsAgree) {
  const auto& tok = tokenizer();
  const std::vector<std::string> fragments = {
      "a", "b", "e", "t",    "h",  "the",  "ing",  " ",        "  ", "7",  "42", "000", "\n", "'s",
      ".", "é", "ü", "日本", "語", "🙂", "\xff", "\xc4\xa0", "ab", "aa", "Ω",  "\t",  "-",  "x"};
  auto check_piece = [&](const std::string& piece) {
    const std::vector<int64_t> simple = tok.merge_simple(piece);
    EXPECT_EQ(tok.merge_heap(piece), simple) << "piece: " << piece;
    EXPECT_EQ(tok.decode_bytes(simple), piece);
  };
  std::mt19937 rng(2024);
  for (int i = 0; i < 1600; ++i) {
    const std::size_t parts = i < 1500 ? 1 + rng() % 40 : 100 + rng() % 100;
    std::uniform_int_distribution<std::size_t> pick_fragment(0, fragments.size() - 1);
    // Some pieces draw from only two or three fragments, for long repeats.
    const std::size_t few = rng() % 2 == 0 ? 3 : fragments.size();
    std::string piece;
    for (std::size_t k = 0; k < parts; ++k) piece += fragments[pick_fragment(rng) % few];
    check_piece(piece);
  }
  for (const std::string unit : {"a", "7", " ", "é", "ab", "🙂", "\n", "aab", "0", "日"}) {
    for (std::size_t count :
         {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 127, 128, 129, 250}) {
      std::string piece;
      for (std::size_t k = 0; k < count; ++k) piece += unit;
      check_piece(piece);
    }
  }
  check_piece("");
  // A long piece goes through the heap, and encode gives what the simple loop gives.
  const std::string digits(300, '7');
  EXPECT_EQ(tok.encode(digits), tok.merge_simple(digits));
  const std::string letters = "x" + std::string(299, 'a');
  EXPECT_EQ(tok.encode(letters), tok.merge_simple(letters));
}

// One pre-token piece of a million bytes encodes (the simple loop, rescanning the piece at every
// merge, would not finish), and decodes back.
TEST(GPT2Tokenizer, AMillionBytePieceEncodes) {
  const auto& tok = tokenizer();
  for (const auto& [c, size] : {std::pair{'a', 1'000'000}, std::pair{'7', 500'000}}) {
    const std::string text(static_cast<std::size_t>(size), c);
    ASSERT_EQ(gpt2_pretokenize(text).size(), 1u);
    const std::vector<int64_t> ids = tok.encode(text);
    EXPECT_LE(ids.size(), text.size() / 2);  // "77" is a token, "777" is not
    EXPECT_EQ(tok.decode(ids), text);
  }
}

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM": the resident memory, its peak).
int64_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  ADD_FAILURE() << "no " << field << " in /proc/self/status";
  return 0;
}

// encode keeps no copy of the text, nor of its code points or pieces: the memory it adds at its
// peak is the ids' (8 bytes a token, about 2 a byte of English text) and their vector's growth,
// under 8 bytes per byte of text. (Keeping the code points and pieces whole took over 40.)
TEST(GPT2Tokenizer, EncodeAddsLittleMemoryToTheText) {
  const auto& tok = tokenizer();
  const std::string verdict =
      read_text(std::string(EMBER_FIXTURES_DIR) + "/../../examples/the-verdict.txt");
  std::string text;
  while (text.size() < (std::size_t{16} << 20)) text += verdict + "\n";
  {
    std::ofstream reset("/proc/self/clear_refs");  // the peak (VmHWM) starts again from VmRSS
    reset << "5";
  }
  const int64_t before = status_bytes("VmRSS");
  const std::vector<int64_t> ids = tok.encode(text);
  const int64_t added = status_bytes("VmHWM") - before;
  EXPECT_LT(static_cast<double>(added) / static_cast<double>(text.size()), 8.0)
      << added << " bytes for " << text.size() << " bytes of text";
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(GPT2Tokenizer, BadInputIsAnError) {
  const auto& tok = tokenizer();
  // Not UTF-8: a lone continuation byte, a truncated sequence, an encoded surrogate (what a
  // Python str's lone surrogate would be; tiktoken replaces it, a UTF-8 text cannot hold one),
  // an overlong encoding, a byte that never occurs in UTF-8.
  for (const std::string bad : {"a\x80", "ab\xE4\xB8", "\xED\xA0\x80", "\xC0\xAF", "x\xFF"}) {
    try {
      tok.encode(bad);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not valid UTF-8: byte offset"), std::string::npos)
          << e.what();
    }
  }
  // The offset is the bad byte's in the whole text, also after an allowed special token.
  for (const auto& [bad, offset] :
       {std::pair<std::string, int>{"<|endoftext|>ab\xFF", 15},
        std::pair<std::string, int>{"x<|endoftext|>y<|endoftext|>\xC0\xAF", 28}}) {
    try {
      tok.encode(bad, /*allow_endoftext=*/true);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("byte offset " + std::to_string(offset) + " ("),
                std::string::npos)
          << e.what();
    }
  }
  // Each public function names itself: the pre-tokenizer called alone, decode_bytes.
  test::expect_error([] { gpt2_pretokenize("ab\xFF"); },
                     "gpt2_pretokenize: the text is not valid UTF-8: byte offset 2 (0xff)");
  test::expect_error(
      [&] {
        tok.decode_bytes({15496, -1});
      },
      "GPT2Tokenizer::decode_bytes: id -1 at position 1 is outside the vocabulary");
  // The special token where it is not allowed (tiktoken's default).
  try {
    tok.encode("a <|endoftext|>");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("<|endoftext|> at byte offset 2"), std::string::npos)
        << e.what();
  }
  // Ids outside the vocabulary.
  for (const int64_t id : {int64_t{-1}, int64_t{50257}, int64_t{1} << 40}) {
    try {
      tok.decode({15496, id});
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("id " + std::to_string(id) + " at position 1"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(GPT2Tokenizer, MissingOrCorruptFilesNameThePathAndChecksum) {
  const fs::path dir = fs::temp_directory_path() / "ember_gpt2_tokenizer_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  try {
    GPT2Tokenizer tok(dir.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find((dir / "encoder.json").string()), std::string::npos) << m;
    EXPECT_NE(m.find(kGPT2EncoderJsonMd5), std::string::npos) << m;
  }
  // A copy with one byte changed.
  fs::copy_file(fs::path(default_gpt2_dir()) / "encoder.json", dir / "encoder.json");
  std::string vocab = read_text(default_gpt2_dir() + "/vocab.bpe");
  vocab[100] = static_cast<char>(vocab[100] ^ 1);
  std::ofstream(dir / "vocab.bpe", std::ios::binary) << vocab;
  try {
    GPT2Tokenizer tok(dir.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find((dir / "vocab.bpe").string()), std::string::npos) << m;
    EXPECT_NE(m.find(kGPT2VocabBpeMd5), std::string::npos) << m;
    EXPECT_NE(m.find(file_md5((dir / "vocab.bpe").string())), std::string::npos) << m;
  }
  // A huge file (sparse: no disk used) is refused by its size, before it is read; so is what is
  // not a regular file (here a directory; a FIFO would block the read, /dev/zero never end it).
  fs::remove(dir / "vocab.bpe");
  { std::ofstream touch(dir / "vocab.bpe"); }
  fs::resize_file(dir / "vocab.bpe", std::uintmax_t{1} << 30);
  test::expect_error([&] { GPT2Tokenizer tok(dir.string()); },
                     (dir / "vocab.bpe").string() + " is 1073741824 bytes, expected 456318");
  fs::remove(dir / "vocab.bpe");
  fs::create_directory(dir / "vocab.bpe");
  test::expect_error([&] { GPT2Tokenizer tok(dir.string()); },
                     (dir / "vocab.bpe").string() + " is not a regular file");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ember::nn
