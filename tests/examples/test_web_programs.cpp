// The native programs of the browser pages (examples/web/: attention_live, train_live) against
// hostile settings: each refusal is one line "<program>: settings: ..." naming the key and what
// it expects, with exit code 2 and nothing on stdout; no setting is rounded, clamped or ignored;
// no number that is not finite reaches the JSON as null. The pages refuse the same settings with
// the same message (the same C++, tests/web/page_test.py).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/examples/run_program.h"

#if !defined(EMBER_ATTENTION_LIVE_BINARY) || !defined(EMBER_TRAIN_LIVE_BINARY)
#error "EMBER_ATTENTION_LIVE_BINARY and EMBER_TRAIN_LIVE_BINARY must be defined"
#endif

namespace {

struct Outcome {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// The program with its arguments, each single-quoted for the shell.
Outcome run(const std::string& binary, const std::vector<std::string>& args) {
  std::string command = "'" + binary + "'";
  for (const std::string& a : args) command += " '" + a + "'";
  Outcome r;
  r.out = ember::testing_examples::run_command(command + " </dev/null", r.exit_code);
  return r;
}

struct Refusal {
  std::vector<std::string> args;
  std::string message;  // the whole line after "<program>: "
};

void expect_refusals(const std::string& binary, const std::string& program,
                     const std::vector<Refusal>& cases) {
  for (const Refusal& c : cases) {
    const Outcome r = run(binary, c.args);
    const std::string args = c.args.empty() ? "" : c.args[0];
    EXPECT_EQ(r.exit_code, 2) << program << " " << args << "\n" << r.out;
    EXPECT_EQ(r.out, program + ": " + c.message + "\n") << program << " " << args;
  }
}

const std::string k6x3 = "[[1,2,3],[1,2,3],[1,2,3],[1,2,3],[1,2,3],";

TEST(WebPrograms, AttentionLiveRefusesHostileSettingsByName) {
  const std::string names =
      "W_query.weight, W_key.weight, W_value.weight, out_proj.weight, out_proj.bias";
  expect_refusals(
      EMBER_ATTENTION_LIVE_BINARY, "attention_live",
      {{{"{"},
        "settings: not valid JSON (parse error at line 1, column 2: syntax error while parsing "
        "object key - unexpected end of input; expected string literal)"},
       {{"[]"}, "settings: expected a JSON object {\"key\": value, ...}, got []"},
       {{"{\"heads\": 2.5}"}, "settings: \"heads\" must be an integer in [1, 2], got 2.5"},
       {{"{\"heads\": true}"}, "settings: \"heads\" must be an integer in [1, 2], got true"},
       {{"{\"heads\": \"2\"}"}, "settings: \"heads\" must be an integer in [1, 2], got \"2\""},
       {{"{\"heads\": 1e300}"}, "settings: \"heads\" must be an integer in [1, 2], got 1e+300"},
       {{"{\"dropout\": 1}"}, "settings: \"dropout\" must be true or false, got 1"},
       {{"{\"head\": 1}"},
        "settings: unknown key \"head\" (known: inputs, heads, dropout, weights)"},
       {{"{\"inputs\": " + k6x3 + "[1,2,1e39]]}"},
        "settings: inputs[5][2] must be a finite number within float32's range (|x| <= "
        "3.40282e+38), got 1e+39"},
       {{"{\"inputs\": " + k6x3 + "[1,2,null]]}"},
        "settings: inputs[5][2] must be a finite number within float32's range (|x| <= "
        "3.40282e+38), got null"},
       {{"{\"inputs\": [[1,2,3,1,2,3],[1,2,3,1,2,3],[1,2,3,1,2,3]]}"},
        "settings: inputs must be a list of 6 lists (inputs has shape [6, 3]), got "
        "[[1,2,3,1,2,3],[1,2,3,1,2,3],[1,2,3,1..."},
       {{"{\"inputs\": " + k6x3 + "[1,2,3,4]]}"},
        "settings: inputs[5] must be a list of 3 numbers (inputs has shape [6, 3]), got "
        "[1,2,3,4]"},
       {{"{\"weights\": [1]}"},
        "settings: \"weights\" must be an object {name: nested list} (" + names + "), got [1]"},
       {{"{\"weights\": {\"W_qeury.weight\": [[1,2,3],[4,5,6]]}}"},
        "settings: \"weights\" has no parameter \"W_qeury.weight\" (2 heads: " + names + ")"},
       {{"{\"weights\": {\"W_query.weight\": [1,2,3,4,5,6]}}"},
        "settings: weights.W_query.weight must be a list of 2 lists (weights.W_query.weight has "
        "shape [2, 3]), got [1,2,3,4,5,6]"},
       {{"{\"inputs\": " + std::string(5000, '[') + std::string(5000, ']') + "}"},
        "settings: nested deeper than 6 levels"},
       {{"{}", "extra"}, "expected at most one argument (the settings, JSON), got 2"}});
}

TEST(WebPrograms, AttentionLiveTakesIntegralFloatsAndWritesNonFiniteAsStrings) {
  const Outcome chapter = run(EMBER_ATTENTION_LIVE_BINARY, {});
  const Outcome integral = run(EMBER_ATTENTION_LIVE_BINARY, {"{\"heads\": 2.0}"});
  ASSERT_EQ(chapter.exit_code, 0) << chapter.out;
  EXPECT_EQ(integral.out, chapter.out);
  // 1e20 squared overflows float32: the attention weights of the first query are NaN, written as
  // "nan" (as autograd::explore_data writes it), never as null (which a page reads as 0).
  const Outcome huge =
      run(EMBER_ATTENTION_LIVE_BINARY, {"{\"inputs\": [[1e20,1e20,1e20],[1,2,3],[1,2,3],"
                                        "[1,2,3],[1,2,3],[1,2,3]]}"});
  ASSERT_EQ(huge.exit_code, 0) << huge.out;
  // (The graph, autograd::explore_data's, writes a gradient that never came as null.)
  const std::string numbers = huge.out.substr(0, huge.out.find("\"graph\":"));
  EXPECT_NE(numbers.find("\"attn_weights\":[[[\"nan\",\"nan\""), std::string::npos) << numbers;
  EXPECT_NE(numbers.find("\"loss\":\"nan\""), std::string::npos) << numbers;
  EXPECT_EQ(numbers.find("null"), std::string::npos) << numbers;
}

TEST(WebPrograms, TrainLiveRefusesHostileSettingsByName) {
  expect_refusals(
      EMBER_TRAIN_LIVE_BINARY, "train_live",
      {{{"{\"n_heads\": 0}", "1"}, "settings: \"n_heads\" must be an integer in [1, 1024], got 0"},
       {{"{\"n_heads\": 5}", "1"},
        "settings: \"emb_dim\" (48) must be a multiple of \"n_heads\" (5)"},
       {{"{\"emb_dim\": 2.5}", "1"},
        "settings: \"emb_dim\" must be an integer in [1, 1024], got 2.5"},
       {{"{\"emb_dim\": 1e12}", "1"},
        "settings: \"emb_dim\" must be an integer in [1, 1024], got 1000000000000.0"},
       {{"{\"n_layers\": 0}", "1"}, "settings: \"n_layers\" must be an integer in [1, 16], got 0"},
       {{"{\"steps\": 2.9}", "1"},
        "settings: \"steps\" must be an integer in [1, 1000000], got 2.9"},
       {{"{\"seed\": 9007199254740993}", "1"},
        "settings: \"seed\" must be an integer in [0, 9007199254740992], got 9007199254740993"},
       {{"{\"seed\": 18446744073709551615}", "1"},
        "settings: \"seed\" must be an integer in [0, 9007199254740992], got 18446744073709551615"},
       {{"{\"seed\": -1}", "1"},
        "settings: \"seed\" must be an integer in [0, 9007199254740992], got -1"},
       {{"{\"lr\": \"fast\"}", "1"},
        "settings: \"lr\" must be a finite number in [0, 1.79769e+308], got \"fast\""},
       {{"{\"batch\": 4096, \"digits\": 16, \"emb_dim\": 1024}", "1"},
        "settings: batch x context x emb_dim x n_layers = 4096 x 32 x 1024 x 2 = 268435456 is "
        "more than 2^22 (4194304): a smaller model or batch"},
       {{"{\"run\": 5}", "1"},
        "settings: unknown key \"run\" (known: digits, emb_dim, n_heads, n_layers, lr, steps, "
        "batch, seed)"},
       {{"{}", "abc"}, "STEPS must be an integer in [0, 1000000], got 'abc'"},
       {{"{}", "-3"}, "STEPS must be an integer in [0, 1000000], got '-3'"},
       {{"{}", "2x"}, "STEPS must be an integer in [0, 1000000], got '2x'"},
       // A learning rate this large makes the second loss NaN: the training stops, with no NaN
       // written as a loss.
       {{"{\"lr\": 1e308, \"digits\": 2, \"emb_dim\": 8, \"n_layers\": 1}", "5"},
        "the training diverged (the training loss is nan at step 2): start a new model, with a "
        "smaller learning rate"}});
}

}  // namespace
