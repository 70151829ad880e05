// GPT-2's tokenizer (nn/tokenizer.h) against tiktoken's "gpt2" encoding: the ids of The Verdict
// and of ~60 hard strings, and decodings of bytes that are not UTF-8, from
// tests/fixtures/tokenizer.txt (scripts/fixtures/gen_tokenizer.py). The vocabulary files come
// from scripts/setup; without them these tests fail with the loader's message (never skip).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "nn/tokenizer.h"
#include "tests/fixtures.h"

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
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ember::nn
