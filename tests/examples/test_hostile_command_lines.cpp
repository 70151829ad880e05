// The example programs against a hostile command line: for each program a table of bad flags,
// bad files (missing, empty, a directory, /dev/zero, truncated, bit-flipped, another model's
// checkpoint, hostile safetensors), bad texts (too short, boundary lengths, invalid UTF-8) and
// interrupted runs, each with its exit code and a fragment of its message. A case fails on a
// signal (an abort, SIGFPE), a sanitizer report, a refusal that is not one line
// "<program>: <what>" on stderr, or a refused run that started training. Small settings: a few
// seconds per program, also under ASan + UBSan.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/ember.h"
#include "core/io/safetensors.h"
#include "tests/examples/run_program.h"

#if !defined(EMBER_TRAIN_CHARS_BINARY) || !defined(EMBER_TRAIN_GPT_BINARY) ||  \
    !defined(EMBER_TRAIN_TOY_BINARY) || !defined(EMBER_SECOND_ORDER_BINARY) || \
    !defined(EMBER_CH03_BINARY) || !defined(EMBER_BACKPROP_BINARY) ||          \
    !defined(EMBER_CORE_TOUR_BINARY)
#error "the EMBER_*_BINARY paths of the example programs must be defined"
#endif

namespace {

namespace fs = std::filesystem;
using ember::testing_examples::TempDir;

struct Outcome {
  int exit_code = -1;  // -1: killed by a signal
  std::string out, err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Runs `binary args` in `dir` with stdout and stderr kept apart.
Outcome run(const fs::path& dir, const std::string& binary, const std::string& args) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string command = "cd '" + dir.string() + "' && '" + binary + "' " + args + " >'" +
                              out.string() + "' 2>'" + err.string() + "' </dev/null";
  const int status = std::system(command.c_str());
  Outcome r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// What a run must never show: a sanitizer report or an uncaught exception's abort message.
void expect_clean(const Outcome& r, const std::string& what) {
  for (const char* bad : {"Sanitizer", "runtime error:", "terminate called", "Aborted"}) {
    EXPECT_EQ(r.err.find(bad), std::string::npos) << what << ": " << bad << "\n" << r.err;
  }
}

// Lines that only a run that trains prints, or a benchmark that runs (its JSON line, bench_gemm's
// table).
bool started_training(const std::string& out) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    for (const char* start :
         {"step ", "Ep ", "wrote ", "{\"impl\"", "{\"shape\"", "| ", "Ember GEMM"}) {
      if (line.rfind(start, 0) == 0) return true;
    }
  }
  return false;
}

// `args` followed by each of `defaults` ("--flag value" pieces) whose flag `args` does not give
// (CLI11 refuses a flag given twice).
std::string with_defaults(const std::string& args, const std::vector<std::string>& defaults) {
  std::string out = args;
  for (const std::string& d : defaults) {
    const std::string flag = d.substr(0, d.find(' '));
    if ((" " + args + " ").find(" " + flag + " ") == std::string::npos &&
        (" " + args).find(" " + flag + "=") == std::string::npos) {
      out += " " + d;
    }
  }
  return out;
}

struct Case {
  std::string args;
  int exit_code;         // 2: refused
  std::string fragment;  // in stderr (refused) or stdout
};

// Runs each case of `table`; a refusal (exit code 2) must be one line "<program>: ..." on stderr
// holding the fragment, with no training before it.
void run_table(const fs::path& dir, const std::string& binary, const std::string& program,
               const std::vector<Case>& table) {
  for (const Case& c : table) {
    const std::string what = program + " " + c.args;
    const Outcome r = run(dir, binary, c.args);
    ASSERT_NE(r.exit_code, -1) << what << ": killed by a signal\n" << r.out << r.err;
    EXPECT_EQ(r.exit_code, c.exit_code) << what << "\n" << r.out << r.err;
    expect_clean(r, what);
    if (c.exit_code == 2) {
      EXPECT_EQ(r.err.rfind(program + ": ", 0), 0u) << what << "\n" << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\n" << r.err;
      EXPECT_NE(r.err.find(c.fragment), std::string::npos) << what << "\n" << r.err;
      EXPECT_FALSE(started_training(r.out)) << what << "\n" << r.out;
    } else {
      EXPECT_NE((r.out + r.err).find(c.fragment), std::string::npos) << what << "\n"
                                                                     << r.out << r.err;
    }
  }
}

// The files every program is handed: an empty file, a directory, a FIFO that no program writes
// to, a sparse file of 100 GB, garbage and hostile safetensors.
struct HostileFiles {
  explicit HostileFiles(const fs::path& dir) : dir(dir) {
    write(dir / "empty.txt", "");
    fs::create_directories(dir / "a_directory");
    EXPECT_EQ(::mkfifo((dir / "a_fifo").c_str(), 0600), 0);
    write(dir / "sparse.txt", "x");
    fs::resize_file(dir / "sparse.txt", uintmax_t{100} << 30);
    write(dir / "garbage.safetensors", "this is not a safetensors file at all");
    // A header length of 2^64 - 1.
    write(dir / "huge_header.safetensors", std::string(8, '\xff') + "{}");
    // A header whose tensor claims bytes past the end of the file.
    const std::string header =
        R"({"model.tok_emb.weight":{"dtype":"F32","shape":[1000000,1000],"data_offsets":[0,4000000000]}})";
    std::string length(8, '\0');
    for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    write(dir / "past_the_end.safetensors", length + header + "abcd");
    write(dir / "a_file", "x");
    fs::create_directories(dir / "out_svg" / "loss.svg");
    fs::create_directories(dir / "out_fifo");
    EXPECT_EQ(::mkfifo((dir / "out_fifo" / "loss.svg").c_str(), 0600), 0);
    fs::create_directories(dir / "out_checkpoint" / "checkpoint.safetensors");
    fs::create_directories(dir / "out_model" / "model.safetensors");
  }
  fs::path dir;
};

// A copy of the safetensors file `from` at `to`, changed by `edit` (its tensors, its metadata).
template <class Edit>
void edited(const fs::path& from, const fs::path& to, Edit edit) {
  ember::SafetensorsFile file = ember::load_safetensors(from.string());
  edit(file);
  ember::save_safetensors(file.tensors, to.string(), file.metadata);
}

// The tensor `name` of `file` (which must hold it), and the same removed.
ember::Tensor& tensor_of(ember::SafetensorsFile& file, const std::string& name) {
  for (auto& [n, t] : file.tensors) {
    if (n == name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  static ember::Tensor none;
  return none;
}
void erase_tensor(ember::SafetensorsFile& file, const std::string& name) {
  std::erase_if(file.tensors, [&](const auto& entry) { return entry.first == name; });
}

// A train_gpt checkpoint's counters (tokens seen, global step, epochs done[, batches]).
std::vector<int64_t> counters_of(const fs::path& checkpoint) {
  ember::SafetensorsFile file = ember::load_safetensors(checkpoint.string());
  return tensor_of(file, "model.train_gpt.counters").contiguous().to_vector<int64_t>();
}

// A checkpoint of a training program without the settings it records ("<program>.settings"): one
// written before the programs recorded them.
void without_settings(const fs::path& from, const fs::path& to, const std::string& program) {
  edited(from, to,
         [&](ember::SafetensorsFile& file) { file.metadata.erase(program + ".settings"); });
}

// A copy of `file` cut to half its length, and one with a bit of its header flipped.
void damaged_copies(const fs::path& file, const fs::path& truncated, const fs::path& flipped) {
  std::string bytes = slurp(file);
  write(truncated, bytes.substr(0, bytes.size() / 2));
  bytes[20] = static_cast<char>(bytes[20] ^ 0x04);  // inside the JSON header
  write(flipped, bytes);
}

// The flags every training program shares, each class of bad value once.
std::vector<Case> shared_flag_cases(const fs::path& dir) {
  const std::string file = (dir / "a_file").string();
  return {
      {"--steps 0", 2, "--steps: expected an integer in (0, "},
      {"--steps -3", 2, "--steps"},
      {"--steps abc", 2, "--steps"},
      {"--steps 9223372036854775807", 2, "--steps: expected an integer"},
      {"--steps 99999999999999999999", 2, "--steps"},
      // Not read as octal (8) or hexadecimal: refused, not a run of another length.
      {"--steps 010", 2, "--steps: expected an integer in (0, "},
      {"--seed 0x10", 2, "--seed: expected an integer"},
      {"--seed 18446744073709551616", 2, "--seed: expected an integer in [0, "},
      {"--seed -1", 2, "--seed"},
      {"--lr nan", 2, "--lr: expected a finite number"},
      {"--lr inf", 2, "--lr"},
      {"--lr -0.1", 2, "--lr"},
      {"--batch 0", 2, "--batch"},
      {"--threads 100000", 2, "--threads: expected an integer in (0, 256]"},
      {"--threads 0", 2, "--threads"},
      {"--print-every 0", 2, "--print-every"},
      {"--no-such-flag", 2, "no-such-flag"},
      {"--steps", 2, "--steps"},
      {"--out '" + file + "'", 2, "--out"},
      {"--out '" + file + "/under'", 2, "--out"},
      {"--out /proc/ember_no_such_dir", 2, "--out: cannot make"},
      {"--out ''", 2, "--out"},
      // An output file that is a directory: refused before the training, not at its end.
      {"--out out_svg", 2, "--out: 'out_svg/loss.svg' is a directory"},
      // One that is a FIFO: no wait at the run's end for a reader that may never come.
      {"--out out_fifo", 2, "--out: 'out_fifo/loss.svg' is a FIFO; the run writes its loss.svg"},
  };
}

TEST(HostileCommandLines, TrainChars) {
  TempDir tmp("ember_hostile_chars");
  const fs::path dir = tmp.path();
  const HostileFiles files(dir);
  const std::string bin = EMBER_TRAIN_CHARS_BINARY;
  const std::vector<std::string> small = {"--context 4",     "--batch 2",        "--steps 2",
                                          "--print-every 1", "--sample-every 2", "--out resumed"};

  // A checkpoint to damage, and one to resume: a run of 4 steps stopped at step 2.
  const Outcome made = run(dir, bin, with_defaults("--steps 4 --stop-at 2 --out good", small));
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  const fs::path good = dir / "good" / "checkpoint.safetensors";
  damaged_copies(good, dir / "truncated.safetensors", dir / "flipped.safetensors");
  without_settings(good, dir / "no_settings.safetensors", "train_chars");
  // The schedule at another step than the optimizer; a tensor no run writes; an infinite weight.
  edited(good, dir / "other_schedule.safetensors", [](ember::SafetensorsFile& file) {
    std::string& text = file.metadata["scheduler"];
    const std::size_t at = text.find("\"last_epoch\":[2");
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, 15, "\"last_epoch\":[1");
  });
  edited(good, dir / "extra_tensor.safetensors", [](ember::SafetensorsFile& file) {
    file.tensors.emplace_back("model.train_chars.extra", ember::zeros({2}));
  });
  edited(good, dir / "other_base_lr.safetensors", [](ember::SafetensorsFile& file) {
    std::string& text = file.metadata["scheduler"];
    const std::size_t at = text.find("\"base_lrs\":[0.003]");
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, 18, "\"base_lrs\":[0.03]");
  });
  edited(good, dir / "inf_weight.safetensors", [](ember::SafetensorsFile& file) {
    ember::Tensor& w = tensor_of(file, "model.final_norm.scale");
    w = ember::full_like(w, std::numeric_limits<double>::infinity());
  });
  // Another model's checkpoint: a wider context.
  ASSERT_EQ(run(dir, bin, with_defaults("--context 8 --out other", small)).exit_code, 0);
  const fs::path other = dir / "other" / "checkpoint.safetensors";
  // Texts: boundary lengths for --context 4 (at least 10 x 5 + 1 = 51 bytes), few distinct
  // bytes, invalid UTF-8.
  write(dir / "t50.txt", std::string(25, 'a') + std::string(25, 'b'));
  write(dir / "t51.txt", std::string(26, 'a') + std::string(25, 'b'));
  write(dir / "ab.txt", std::string(400, 'a') + std::string(400, 'b'));
  std::string invalid;
  for (int i = 0; i < 400; ++i) invalid += static_cast<char>(i % 7 == 0 ? 0xff : 'a' + i % 13);
  write(dir / "invalid.txt", invalid);

  std::vector<Case> table = shared_flag_cases(dir);
  const std::vector<Case> own = {
      {"--context 3", 2, "--context: expected an integer in [4, 256]"},
      {"--context 100000", 2, "--context"},
      {"--temperature nan", 2, "--temperature: expected a finite number"},
      {"--temperature -1", 2, "--temperature"},
      // Temperatures that float32 logits cannot be divided by (0 in float32, subnormal, inf, or
      // quotients that overflow): refused at the flag, not at the first sample after training.
      {"--temperature 1e-300", 2,
       "--temperature: expected a finite number, 0 (greedy) or in [1e-06, 1e+06], got '1e-300'"},
      {"--temperature 1e-40", 2, "--temperature"},
      {"--temperature 1e300", 2, "--temperature"},
      {"--temperature 1e-6 --top-k 1", 0, "train_chars: steps 1-2"},
      {"--top-k 0", 2, "--top-k"},
      {"--top-k 300", 2, "--top-k: expected at most the text's"},
      {"--stop-at 0", 2, "--stop-at"},
      {"--sample-every 0", 2, "--sample-every"},
      {"--batch 100000", 2, "--batch: expected at most the"},
      // A step that needs more memory than the machine has (50000 windows of 256 characters):
      // refused before the model is built, not ended by the OOM killer.
      {"--batch 50000 --context 256", 2,
       "--batch, --context: training this model (context 256, emb 64, 4 heads, 2 layers, "
       "vocabulary 31) on batches of 50000 needs at least "},
      // Files as the text.
      {"no_such_file.txt", 2, "text: cannot read 'no_such_file.txt'"},
      {"empty.txt", 2, "the text has 0 characters"},
      {"a_directory", 2, "is a directory"},
      {"/dev/zero", 2, "is larger than 64 MiB"},
      {"sparse.txt", 2, "text: 'sparse.txt' is larger than 64 MiB"},
      {"a_fifo", 2, "text: 'a_fifo' is a FIFO that gave no bytes (no program writes to it)"},
      // An empty name is refused, not taken for the flag's absence (the default corpus).
      {"''", 2, "text: expected a file name, got ''"},
      {"t50.txt", 2, "the text has 50 characters; at least 51 are needed for --context 4"},
      {"t51.txt --top-k 1", 0, "train_chars: steps 1-2"},
      {"ab.txt", 2, "--top-k: expected at most the text's 2 distinct characters, got 10"},
      {"ab.txt --top-k 2", 0, "train_chars: steps 1-2"},
      {"invalid.txt --top-k 3 --html", 0, "train_chars: steps 1-2"},
      {"--out out_checkpoint", 2, "--out: 'out_checkpoint/checkpoint.safetensors' is a directory"},
      // Files as the checkpoint.
      {"--resume no_such.safetensors", 2, "--resume: cannot read"},
      {"--resume a_directory", 2, "--resume: 'a_directory' is not a regular file"},
      {"--resume /dev/zero", 2, "--resume"},
      {"--resume a_fifo", 2, "--resume: 'a_fifo' is not a regular file"},
      // An empty name is refused, not taken for the flag's absence (a run from scratch).
      {"--resume ''", 2, "--resume: expected a file name, got ''"},
      {"--resume empty.txt", 2, "safetensors"},
      {"--resume garbage.safetensors", 2, "safetensors"},
      {"--resume huge_header.safetensors", 2, "safetensors"},
      {"--resume past_the_end.safetensors", 2, "safetensors"},
      {"--resume truncated.safetensors", 2, "safetensors"},
      {"--resume flipped.safetensors", 2, "safetensors"},
      {"--resume '" + other.string() + "'", 2,
       "continues a run with other settings: --context 8 (this run: 4)"},
      {"--resume no_settings.safetensors --steps 4", 2,
       "--resume: 'no_settings.safetensors' records no settings of a train_chars run"},
      {"--resume other_schedule.safetensors --steps 4", 2,
       "the learning-rate schedule is at step 1, the checkpoint's step is 2"},
      {"--resume other_base_lr.safetensors --steps 4", 2,
       "the learning-rate schedule's base rates are not this run's --lr"},
      {"--resume extra_tensor.safetensors --steps 4", 2,
       "has a tensor 'train_chars.extra' this program does not write"},
      {"--resume inf_weight.safetensors --steps 4", 2,
       "'model.final_norm.scale' holds inf (element 0): a run that diverged, or a damaged file"},
      // Other settings than the run's: refused, each flag named with both values.
      {"--resume '" + good.string() + "' --steps 3", 2,
       "continues a run with other settings: --steps 4 (this run: 3)"},
      {"--resume '" + good.string() + "' --steps 4 --lr 0.01 --batch 3", 2,
       "--batch 2 (this run: 3), --lr 0.003 (this run: 0.01)"},
      {"--resume '" + good.string() + "' --steps 4 --seed 7", 2, "--seed 123 (this run: 7)"},
      {"ab.txt --top-k 2 --resume '" + good.string() + "' --steps 4", 2,
       "continues a run with other settings: text "},
      // An interrupted run resumed past the requested end trains nothing: refused.
      {"--resume '" + good.string() + "' --steps 4 --stop-at 1", 2,
       "--resume: the checkpoint is at step 2, expected one before this run's last step 1"},
      {"--resume '" + good.string() + "' --steps 4 --stop-at 2", 2, "--stop-at"},
      {"--resume '" + good.string() + "' --steps 4 --threads 2", 0, "train_chars: steps 3-4"},
  };
  table.insert(table.end(), own.begin(), own.end());
  for (Case& c : table) c.args = with_defaults(c.args, small);
  run_table(dir, bin, "train_chars", table);
}

// A train_gpt checkpoint with its counters replaced by `counters`.
void with_counters(const fs::path& from, const fs::path& to, const std::vector<int64_t>& counters) {
  edited(from, to, [&](ember::SafetensorsFile& file) {
    for (auto& [name, t] : file.tensors) {
      if (name.find("train_gpt.counters") != std::string::npos) {
        t = ember::from_vector(counters, {static_cast<int64_t>(counters.size())});
      }
    }
  });
}

TEST(HostileCommandLines, TrainGpt) {
  TempDir tmp("ember_hostile_gpt");
  const fs::path dir = tmp.path();
  const HostileFiles files(dir);
  const std::string bin = EMBER_TRAIN_GPT_BINARY;
  // A short text (about 150 tokens) and a tiny model: a few steps an epoch.
  std::string text;
  for (int i = 0; i < 40; ++i) text += "Every effort moves you forward, step by step. ";
  write(dir / "text.txt", text);
  write(dir / "invalid.txt", text + "\xff\xfe\xc3(" + text);
  const std::vector<std::string> small = {"--emb-dim 8",   "--layers 1",        "--heads 2",
                                          "--context 8",   "--batch 2",         "--eval-freq 4",
                                          "--eval-iter 1", "--skip-initial",    "--epochs 1",
                                          "--out resumed", "--max-new-tokens 2"};

  const Outcome made = run(dir, bin, with_defaults("text.txt --out good", small));
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  const fs::path good = dir / "good" / "checkpoint.safetensors";
  damaged_copies(good, dir / "truncated.safetensors", dir / "flipped.safetensors");
  with_counters(good, dir / "two_counters.safetensors", {100, 7});
  with_counters(good, dir / "step_max.safetensors", {100, INT64_MAX, 1});
  with_counters(good, dir / "negative.safetensors", {-5, 7, 1});
  without_settings(good, dir / "no_settings.safetensors", "train_gpt");
  // Checkpoints whose parts do not fit together or hold what no run writes: the counters against
  // the step and this run's epochs, the history, the program's tensors, the optimizer's numbers.
  const std::vector<int64_t> counters = counters_of(good);
  ASSERT_EQ(counters.size(), 3u);
  with_counters(good, dir / "other_step.safetensors", {counters[0], 0, counters[2]});
  with_counters(good, dir / "other_epoch.safetensors", {counters[0], counters[1], counters[2] + 1});
  with_counters(good, dir / "other_tokens.safetensors",
                {counters[0] + 1, counters[1], counters[2]});
  edited(good, dir / "batch_past_the_epoch.safetensors", [&](ember::SafetensorsFile& file) {
    const std::vector<int64_t> within{counters[0], counters[1], counters[2], 1000};
    for (auto& [name, t] : file.tensors) {
      if (name == "model.train_gpt.counters") t = ember::from_vector(within, {4});
    }
    file.tensors.emplace_back("model.train_gpt.epoch_rng", tensor_of(file, "model.train_gpt.rng"));
  });
  edited(good, dir / "no_rng.safetensors",
         [](ember::SafetensorsFile& file) { erase_tensor(file, "model.train_gpt.rng"); });
  edited(good, dir / "extra_tensor.safetensors", [](ember::SafetensorsFile& file) {
    file.tensors.emplace_back("model.train_gpt.extra", ember::zeros({2}));
  });
  edited(good, dir / "short_history.safetensors", [](ember::SafetensorsFile& file) {
    tensor_of(file, "model.train_gpt.history") = ember::zeros({0, 3}, ember::DType::Float64);
  });
  edited(good, dir / "nan_moment.safetensors", [](ember::SafetensorsFile& file) {
    ember::Tensor& m = tensor_of(file, "optimizer.state.3.exp_avg");
    m = ember::full_like(m, std::nan(""));
  });
  edited(good, dir / "negative_moment.safetensors", [](ember::SafetensorsFile& file) {
    ember::Tensor& m = tensor_of(file, "optimizer.state.3.exp_avg_sq");
    m = ember::full_like(m, -1.0);
  });
  edited(good, dir / "other_beta.safetensors", [](ember::SafetensorsFile& file) {
    std::string& groups = file.metadata["optimizer.param_groups"];
    const std::size_t at = groups.find("\"beta2\":0.999");
    ASSERT_NE(at, std::string::npos) << groups;
    groups.replace(at, 13, "\"beta2\":0.5");
  });
  edited(good, dir / "float64_weight.safetensors", [](ember::SafetensorsFile& file) {
    ember::Tensor& w = tensor_of(file, "model.final_norm.scale");
    w = w.to(ember::DType::Float64);
  });
  edited(good, dir / "bool_mask.safetensors", [](ember::SafetensorsFile& file) {
    ember::Tensor& m = tensor_of(file, "model.trf_blocks.0.att.mask");
    m = m.to(ember::DType::Bool);
  });
  edited(good, dir / "float64_moment.safetensors", [](ember::SafetensorsFile& file) {
    ember::Tensor& m = tensor_of(file, "optimizer.state.3.exp_avg");
    m = m.to(ember::DType::Float64);
  });
  edited(good, dir / "other_meta_step.safetensors",
         [](ember::SafetensorsFile& file) { file.metadata["ember.step"] = "1"; });
  edited(good, dir / "no_mask.safetensors", [](ember::SafetensorsFile& file) {
    ember::Tensor& m = tensor_of(file, "model.trf_blocks.0.att.mask");
    m = ember::zeros_like(m);
  });
  write(dir / "text2.txt", text + "And one more sentence.");
  ASSERT_EQ(run(dir, bin, with_defaults("text.txt --emb-dim 16 --out other", small)).exit_code, 0);
  const fs::path other = dir / "other" / "checkpoint.safetensors";

  std::vector<Case> table = shared_flag_cases(dir);
  for (Case& c : table) {  // train_gpt's steps are --max-steps
    for (std::string* text : {&c.args, &c.fragment}) {
      if (text->rfind("--steps", 0) == 0) text->insert(2, "max-");
    }
  }
  const std::vector<Case> own = {
      {"--epochs 9223372036854775807", 2, "--epochs: expected an integer in (0, 1000000]"},
      {"--epochs 0", 2, "--epochs"},
      {"--train-ratio nan", 2, "--train-ratio: expected a finite number in [0, 1]"},
      {"--train-ratio 1.5", 2, "--train-ratio"},
      {"--train-ratio 0", 2, "not enough text for the training loader"},
      {"--drop-rate 1", 2, "--drop-rate"},
      {"--weight-decay -1", 2, "--weight-decay"},
      {"--temperature nan", 2, "--temperature: expected a finite number"},
      {"--temperature 1e300", 2, "--temperature: expected a finite number, 0 (greedy) or in"},
      {"--temperature 1e-45", 2, "--temperature"},
      {"--top-k 50258", 2, "--top-k: expected an integer in [0, 50257]"},
      {"--max-new-tokens 0", 2, "--max-new-tokens"},
      {"--heads 3", 2, "must be divisible by n_heads"},
      {"--context 100000000", 2, "--context"},
      {"--emb-dim 9223372036854775808", 2, "--emb-dim"},
      {"--max-steps 0", 2, "--max-steps"},
      {"--batch 100000", 2, "--batch: the training text has fewer than 100000 windows"},
      {"--generate hello", 2, "--generate: needs --weights"},
      {"--weights no_such.safetensors", 2, "--weights: cannot read"},
      {"--weights garbage.safetensors", 2, "safetensors"},
      {"--weights a_directory", 2, "--weights"},
      // An empty name or prompt is refused, not taken for the flag's absence (a training run
      // where a sample of GPT-2 was asked for, or the default prompt).
      {"--weights ''", 2, "--weights: expected a file name, got ''"},
      {"--generate ''", 2, "--generate: expected a prompt, got ''"},
      {"--resume ''", 2, "--resume: expected a file name, got ''"},
      {"''", 2, "text: expected a file name, got ''"},
      // --model names the weights' model: checked, and not ignored without --weights.
      {"--model 999M", 2, "--model: expected 124M, 355M, 774M or 1558M"},
      {"--model 355M", 2, "--model: needs --weights"},
      {"--weights garbage.safetensors --resume garbage.safetensors", 2,
       "--resume excludes --weights"},
      // Texts.
      {"no_such.txt", 2, "cannot read no_such.txt"},
      {"empty.txt", 2, "not enough text"},
      {"a_directory", 2, "is a directory"},
      {"/dev/zero", 2, "is larger than 64 MiB"},
      {"sparse.txt", 2, "text: 'sparse.txt' is larger than 64 MiB"},
      {"a_fifo", 2, "text: 'a_fifo' is a FIFO that gave no bytes (no program writes to it)"},
      {"invalid.txt", 2, "text is not valid UTF-8"},
      {"--out out_checkpoint", 2, "--out: 'out_checkpoint/checkpoint.safetensors' is a directory"},
      {"--out out_checkpoint --no-save", 0, "no checkpoint (--no-save)"},
      // Checkpoints.
      {"--resume no_such.safetensors", 2, "--resume: cannot read"},
      {"--resume a_directory", 2, "--resume"},
      {"--resume empty.txt", 2, "safetensors"},
      {"--resume garbage.safetensors", 2, "safetensors"},
      {"--resume huge_header.safetensors", 2, "safetensors"},
      {"--resume past_the_end.safetensors", 2, "safetensors"},
      {"--resume truncated.safetensors", 2, "safetensors"},
      {"--resume flipped.safetensors", 2, "safetensors"},
      {"--resume '" + other.string() + "'", 2,
       "continues a run with other settings: --emb-dim 16 (this run: 8)"},
      {"--resume no_settings.safetensors --epochs 2", 2,
       "--resume: 'no_settings.safetensors' records no settings of a train_gpt run"},
      // Other settings than the run's: refused, each flag named with both values.
      {"--resume '" + good.string() + "' --epochs 2 --heads 4", 2,
       "continues a run with other settings: --heads 2 (this run: 4)"},
      {"--resume '" + good.string() + "' --epochs 2 --batch 3 --lr 0.001 --seed 5", 2,
       "--seed 123 (this run: 5), --batch 2 (this run: 3), --lr 0.0004 (this run: 0.001)"},
      {"--resume '" + good.string() + "' --epochs 2 --weight-decay 0 --drop-rate 0 --eval-freq 3",
       2,
       "--drop-rate 0.1 (this run: 0.0), --weight-decay 0.1 (this run: 0.0), --eval-freq 4 (this "
       "run: 3)"},
      {"--resume '" + good.string() + "' --epochs 2 --train-ratio 0.8 --eval-iter 2", 2,
       "--train-ratio 0.9 (this run: 0.8), --eval-iter 1 (this run: 2)"},
      {"text2.txt --resume '" + good.string() + "' --epochs 2", 2,
       "continues a run with other settings: text "},
      {"--resume other_step.safetensors --epochs 2", 2,
       "train_gpt.counters' global step 0 is not the step before the checkpoint's step"},
      {"--resume other_epoch.safetensors --epochs 3", 2, "steps are not the 2 epoch(s) of"},
      {"--resume other_tokens.safetensors --epochs 2", 2, "tokens seen, expected"},
      {"--resume batch_past_the_epoch.safetensors --epochs 2", 2,
       "and 1000 batch(es) train_gpt.counters holds"},
      {"--resume no_rng.safetensors --epochs 2", 2, "has no tensor 'train_gpt.rng'"},
      {"--resume extra_tensor.safetensors --epochs 2", 2,
       "has a tensor 'train_gpt.extra' this program does not write"},
      {"--resume short_history.safetensors --epochs 2", 2, "train_gpt.history has shape [0, 3]"},
      {"--resume nan_moment.safetensors --epochs 2", 2,
       "'optimizer.state.3.exp_avg' holds nan (element 0)"},
      {"--resume negative_moment.safetensors --epochs 2", 2,
       "'optimizer.state.3.exp_avg_sq' holds -1 (element 0), expected a second moment >= 0"},
      {"--resume other_beta.safetensors --epochs 2", 2,
       "the checkpoint's optimizer has beta2 0.5, this run's 0.999"},
      {"--resume float64_weight.safetensors --epochs 2", 2,
       "'model.final_norm.scale' is float64, expected float32"},
      {"--resume bool_mask.safetensors --epochs 2", 2,
       "'model.trf_blocks.0.att.mask' is bool, expected float32"},
      {"--resume float64_moment.safetensors --epochs 2", 2,
       "'optimizer.state.3.exp_avg' is float64, expected float32"},
      {"--resume other_meta_step.safetensors --epochs 2", 2,
       "the optimizer's state of parameter 0 counts"},
      {"--resume no_mask.safetensors --epochs 2", 2,
       "the buffer 'trf_blocks.0.att.mask' is not the one the model computes"},
      {"--resume two_counters.safetensors", 2, "train_gpt.counters has 2 values, expected 3 or 4"},
      {"--resume step_max.safetensors", 2, "train_gpt.counters holds"},
      {"--resume negative.safetensors", 2, "train_gpt.counters holds"},
      // Interrupted after epoch 1: a resume must have an epoch left to run.
      {"--resume '" + good.string() + "' --epochs 1", 2,
       "--resume: the checkpoint is at epoch 1, expected one before this run's last epoch 1"},
      {"--resume '" + good.string() + "' --epochs 3 --stop-after-epoch 1", 2, "epoch 1"},
      {"--resume '" + good.string() + "' --epochs 2 --max-steps 2", 2, "--max-steps"},
      {"--resume '" + good.string() + "' --epochs 2", 0, "resumed from"},
  };
  table.insert(table.end(), own.begin(), own.end());
  for (Case& c : table) {
    // A case that starts with a text names its own; the others train on text.txt.
    c.args = with_defaults((c.args.rfind("--", 0) == 0 ? "text.txt " : "") + c.args, small);
  }
  run_table(dir, bin, "train_gpt", table);
}

TEST(HostileCommandLines, TrainToy) {
  TempDir tmp("ember_hostile_toy");
  const fs::path dir = tmp.path();
  const HostileFiles files(dir);
  std::vector<Case> table = shared_flag_cases(dir);
  table.push_back({"--digits 1", 2, "--digits: expected an integer in [2, 16]"});
  table.push_back({"--digits 17", 2, "--digits"});
  table.push_back({"--eval-every 0", 2, "--eval-every"});
  table.push_back({"--out out_model", 2, "--out: 'out_model/model.safetensors' is a directory"});
  // A batch whose step needs more memory than the machine has: refused before the model is built,
  // not ended by the OOM killer (a million sequences of 32 tokens: hundreds of GB of activations).
  table.push_back({"--batch 1048576 --digits 16", 2,
                   "--batch, --digits: training this model (context 32, emb 48, 2 heads, 2 layers, "
                   "vocabulary "});
  table.push_back({"--steps 2 --digits 2 --batch 2 --eval-every 1", 0, "train_toy: 2 steps"});
  for (Case& c : table) c.args = with_defaults(c.args, {"--out out"});
  run_table(dir, EMBER_TRAIN_TOY_BINARY, "train_toy", table);
}

TEST(HostileCommandLines, SecondOrder) {
  TempDir tmp("ember_hostile_second_order");
  const fs::path dir = tmp.path();
  const HostileFiles files(dir);
  run_table(dir, EMBER_SECOND_ORDER_BINARY, "second_order",
            {{"a_file", 2, "is not a directory"},
             {"no_such_dir", 2, "is not a directory"},
             {"''", 2, "dir: expected a directory name, got ''"},
             {"a_directory another", 2, "another"},
             {"--no-such-flag", 2, "no-such-flag"},
             {"a_directory", 0, "caught"}});
}

// A file size limit (ulimit -f) too small for the checkpoint: refused before the training, as a
// disk without room is, not ended by SIGXFSZ at the save with a temporary file left behind.
TEST(HostileCommandLines, AFileSizeLimitTooSmallForTheCheckpointIsRefusedBeforeTraining) {
  TempDir tmp("ember_hostile_ulimit");
  const fs::path dir = tmp.path();
  std::string text;
  for (int i = 0; i < 40; ++i) text += "Every effort moves you forward, step by step. ";
  write(dir / "text.txt", text);
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"train_chars", std::string("'") + EMBER_TRAIN_CHARS_BINARY +
                          "' --context 4 --batch 2 --steps 2 --sample-every 2 --out out"},
      {"train_gpt", std::string("'") + EMBER_TRAIN_GPT_BINARY +
                        "' text.txt --emb-dim 8 --layers 1 --heads 2 --context 8 --batch 2 "
                        "--eval-freq 4 --eval-iter 1 --skip-initial --epochs 1 --out out "
                        "--max-new-tokens 2"}};
  for (const auto& [program, command] : runs) {
    // 100 blocks (of 512 bytes in dash, 1024 in bash): less than either checkpoint.
    const Outcome r = run(dir, "/bin/sh", "-c \"ulimit -f 100; exec " + command + "\"");
    const std::string what = program + " under ulimit -f 100";
    ASSERT_EQ(r.exit_code, 2) << what << "\n" << r.out << r.err;
    expect_clean(r, what);
    EXPECT_EQ(r.err.rfind(program + ": the checkpoint needs ", 0), 0u) << what << "\n" << r.err;
    EXPECT_NE(r.err.find("bytes) and the file size limit (ulimit -f) is "), std::string::npos)
        << what << "\n"
        << r.err;
    EXPECT_FALSE(started_training(r.out)) << what << "\n" << r.out;
    for (const auto& entry : fs::directory_iterator(dir / "out")) {
      ADD_FAILURE() << what << ": left " << entry.path();
    }
  }
}

// A model that fits in memory but whose training does not (its gradients and AdamW's two moments
// take three times its weights): refused before any model is built, naming the flags, not ended
// by the OOM killer once the moments are written. The model is sized from this machine's memory:
// its weights take about a third of it.
TEST(HostileCommandLines, TrainGptRefusesATrainingLargerThanMemoryBeforeBuildingTheModel) {
  TempDir tmp("ember_hostile_gpt_memory");
  const fs::path dir = tmp.path();
  std::string text;
  for (int i = 0; i < 40; ++i) text += "Every effort moves you forward, step by step. ";
  write(dir / "text.txt", text);
  const double physical = ember::detail::physical_memory_bytes();
  const double E = 8192, per_layer = 4 * 12 * E * E;  // bytes of a block's weights
  const auto layers = std::max<int64_t>(2, std::llround(physical / 3 / per_layer));
  const std::string args = "text.txt --emb-dim 8192 --heads 8 --layers " + std::to_string(layers) +
                           " --context 8 --batch 2 --skip-initial --epochs 1 --out out";
  run_table(dir, EMBER_TRAIN_GPT_BINARY, "train_gpt",
            {{args, 2,
              "train_gpt: --emb-dim, --layers, --context, --batch: training this model (context "
              "8, emb 8192, 8 heads, "}});
}

// A standard output that cannot be written (a full disk: /dev/full): the run's printed results
// are lost, which its exit code says (2, one line on stderr), not 0.
TEST(HostileCommandLines, AStandardOutputThatCannotBeWrittenIsAnError) {
  TempDir tmp("ember_hostile_stdout");
  for (const auto& [program, command] : std::vector<std::pair<std::string, std::string>>{
           {"ch03_attention", std::string("'") + EMBER_CH03_BINARY + "'"},
           {"train_chars", std::string("'") + EMBER_TRAIN_CHARS_BINARY +
                               "' --context 4 --batch 2 --steps 2 --sample-every 2 --out out"},
           {"train_toy", std::string("'") + EMBER_TRAIN_TOY_BINARY + "' --help"}}) {
    const Outcome r = run(tmp.path(), "/bin/sh", "-c \"" + command + " >/dev/full\"");
    const std::string what = program + " >/dev/full";
    EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.err;
    expect_clean(r, what);
    // (The reason is known when the last write fails, not when an earlier one did.)
    EXPECT_EQ(r.err.rfind(program + ": writing the standard output failed", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// The programs that take no flags (the chapter-3 walkthrough, the backprop study, the core tour)
// refuse any argument, before their work, and --help says what they do.
TEST(HostileCommandLines, ProgramsWithoutFlagsRefuseArguments) {
  TempDir tmp("ember_hostile_no_flags");
  for (auto [binary, program] : {std::pair{EMBER_CH03_BINARY, "ch03_attention"},
                                 std::pair{EMBER_BACKPROP_BINARY, "attention_backprop"},
                                 std::pair{EMBER_CORE_TOUR_BINARY, "core_tour"}}) {
    run_table(tmp.path(), binary, program,
              {{"--no-such-flag", 2, "no-such-flag"},
               {"stray", 2, "stray"},
               {"--help", 0, std::string(program) + ": "}});
    EXPECT_FALSE(fs::exists(tmp.path() / "core_tour.html")) << program;
  }
}

// The native programs of the browser pages (examples/web/), which the pages' tests compare with:
// --help says how to call them; an extra argument, settings that are not JSON or a STEPS that is
// not a whole number of steps in range is one line naming what was expected, before any work.
TEST(HostileCommandLines, WebPagePrograms) {
#if defined(EMBER_ATTENTION_LIVE_BINARY) && defined(EMBER_TRAIN_LIVE_BINARY)
  TempDir tmp("ember_hostile_web");
  run_table(tmp.path(), EMBER_ATTENTION_LIVE_BINARY, "attention_live",
            {{"--help", 0, "usage: attention_live [SETTINGS_JSON]"},
             {"'{}' extra", 2, "expected at most one argument (the settings, JSON), got 2"},
             {"'not json'", 2, "settings: not valid JSON ("},
             {"--no-such-flag", 2, "settings: not valid JSON ("},
             {R"('{"heads": 3}')", 2, "settings: \"heads\" must be an integer in [1, 2], got 3"},
             {R"('{"heads": 1}')", 0, R"("heads":1)"}});
  run_table(tmp.path(), EMBER_TRAIN_LIVE_BINARY, "train_live",
            {{"--help", 0, "usage: train_live [SETTINGS_JSON [STEPS]]"},
             {"'{}' abc", 2, "STEPS must be an integer in [0, 1000000], got 'abc'"},
             {"'{}' -5", 2, "STEPS must be an integer in [0, 1000000], got '-5'"},
             {"'{}' 5x", 2, "got '5x'"},
             {"'{}' ''", 2, "got ''"},
             {"'{}' 99999999999999999999", 2, "got '99999999999999999999'"},
             {"'{}' 1 2", 2, "expected at most two arguments (SETTINGS_JSON STEPS), got 3"},
             {"'{' 1", 2, "settings: not valid JSON ("},
             {R"('{"digits": 4}' 2)", 0, R"("step":2)"}});
#else
  GTEST_SKIP() << "attention_live and train_live are not built";
#endif
}

// The benchmark programs (examples/bench), built with EMBER_BUILD_BENCH: every class of bad
// value of their flags (not a number, negative, zero, too large, not an integer's worth, a bad
// list item, an unknown flag, a flag without its value) is refused before any benchmark starts;
// --help lists the flags. No benchmark runs here.

#if defined(EMBER_BENCH_ATTENTION_BINARY) || defined(EMBER_BENCH_GEMM_BINARY) || \
    defined(EMBER_BENCH_GENERATE_BINARY) || defined(EMBER_BENCH_GPT_BINARY) ||   \
    defined(EMBER_BENCH_TRAIN_BINARY)

// `binary --help` exits 0 and names each of `flags`.
void expect_help(const std::string& binary, const std::string& program,
                 const std::vector<std::string>& flags) {
  TempDir tmp("ember_hostile_help");
  const Outcome r = run(tmp.path(), binary, "--help");
  ASSERT_EQ(r.exit_code, 0) << program << " --help\n" << r.out << r.err;
  EXPECT_TRUE(r.err.empty()) << program << " --help\n" << r.err;
  EXPECT_FALSE(started_training(r.out)) << program << " --help\n" << r.out;
  for (const std::string& flag : flags) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << program << " --help: " << flag << "\n"
                                                   << r.out;
  }
}

// The cases of a flag that takes a count in (0, hi]: each class of bad value once.
std::vector<Case> count_cases(const std::string& flag, const std::string& range) {
  return {
      {flag + " abc", 2, flag + ": expected an integer in " + range + ", got 'abc'"},
      {flag + " -1", 2, flag + ": expected an integer in " + range},
      {flag + " 0", 2, flag + ": expected an integer in " + range},
      {flag + " 2.5", 2, flag},
      {flag + " 1e30", 2, flag},
      {flag + " 99999999999999999999", 2, flag},
      {flag + " 9223372036854775808", 2, flag},
      {flag, 2, flag},                        // no value
      {flag + " 1 " + flag + " 1", 2, flag},  // given twice
  };
}

// The cases every benchmark shares: --threads out of range, flags it does not know.
std::vector<Case> bench_cases(std::vector<Case> table) {
  const std::vector<Case> shared = {
      {"--threads 0", 2, "--threads"},
      {"--threads 257", 2, "--threads"},
      {"--threads 99999999999999999999", 2, "--threads"},
      {"--no-such-flag", 2, "no-such-flag"},
      {"--no-such-flag 3", 2, "no-such-flag"},
      {"stray", 2, "stray"},
  };
  table.insert(table.end(), shared.begin(), shared.end());
  return table;
}

#endif  // any benchmark built

#ifdef EMBER_BENCH_ATTENTION_BINARY
TEST(HostileCommandLines, BenchAttention) {
  TempDir tmp("ember_hostile_bench_attention");
  std::vector<Case> table;
  for (const char* flag : {"--batch", "--tokens", "--dim"}) {
    const std::vector<Case> cases = count_cases(flag, "(0, 65536]");
    table.insert(table.end(), cases.begin(), cases.end());
  }
  for (auto [flag, range] : {std::pair{"--heads", "(0, 1024]"}, std::pair{"--reps", "(0, 1000000]"},
                             std::pair{"--calls", "(0, 1000000]"}}) {
    const std::vector<Case> cases = count_cases(flag, range);
    table.insert(table.end(), cases.begin(), cases.end());
  }
  const std::vector<Case> own = {
      {"--tokens 65537", 2, "--tokens: expected an integer in (0, 65536], got '65537'"},
      {"--composite 2", 2, "--composite: expected an integer in [0, 1]"},
      {"--composite -1", 2, "--composite"},
      {"--heads 5", 2, "--heads: expected a divisor of --dim 768, got 5"},
      {"--batch 65536 --tokens 65536", 2, "--batch, --tokens, --dim, --heads: these sizes need"},
  };
  table.insert(table.end(), own.begin(), own.end());
  run_table(tmp.path(), EMBER_BENCH_ATTENTION_BINARY, "bench_attention", bench_cases(table));
  expect_help(
      EMBER_BENCH_ATTENTION_BINARY, "bench_attention",
      {"--threads", "--batch", "--tokens", "--dim", "--heads", "--reps", "--calls", "--composite"});
}
#endif

#ifdef EMBER_BENCH_GEMM_BINARY
TEST(HostileCommandLines, BenchGemm) {
  TempDir tmp("ember_hostile_bench_gemm");
  std::vector<Case> table = count_cases("--reps", "(0, 1000000]");
  const std::string threads = "--threads: expected a comma-separated list of integers in [1, 256]";
  const std::string shapes = "--shapes: expected a comma-separated list of shapes MxNxK[at][bt]";
  const std::vector<Case> own = {
      {"--threads abc", 2, threads + ", got 'abc'"},
      {"--threads -1", 2, threads + ", got '-1'"},
      {"--threads 1e30", 2, threads},
      {"--threads 1,0", 2, threads + ", got '0' in '1,0'"},
      {"--threads 1,,2", 2, threads + ", got '' in '1,,2'"},
      {"--threads 1,x", 2, threads + ", got 'x' in '1,x'"},
      {"--threads 1,99999999999999999999", 2, threads},
      {"--threads ''", 2, threads},
      {"--threads", 2, "--threads"},
      {"--threads 1 --threads 2", 2, "--threads"},
      {"--shapes 1x2", 2, shapes + ", each matrix at most 2^28 floats, got '1x2'"},
      {"--shapes 64x64x64,foo", 2, shapes},
      {"--shapes 0x5x5", 2, shapes},
      {"--shapes -1x5x5", 2, shapes},
      {"--shapes 99999999999999999999x1x1", 2, shapes},
      {"--shapes 65536x65536x1", 2, shapes},
      {"--shapes 64x64x64ta", 2, shapes},
      {"--shapes ''", 2, shapes},
      {"--shapes", 2, "--shapes"},
      {"--json 1", 2, "1"},
  };
  table.insert(table.end(), own.begin(), own.end());
  run_table(tmp.path(), EMBER_BENCH_GEMM_BINARY, "bench_gemm", bench_cases(table));
  expect_help(EMBER_BENCH_GEMM_BINARY, "bench_gemm",
              {"--threads", "--reps", "--json", "--shapes", "1024x1024x1024at"});
}
#endif

#ifdef EMBER_BENCH_GENERATE_BINARY
TEST(HostileCommandLines, BenchGenerate) {
  TempDir tmp("ember_hostile_bench_generate");
  const HostileFiles files(tmp.path());
  std::vector<Case> table = count_cases("--new-tokens", "(0, 1048576]");
  const std::vector<Case> reps = count_cases("--reps", "(0, 1000]");
  table.insert(table.end(), reps.begin(), reps.end());
  const std::vector<Case> own = {
      {"--new-tokens 1048577", 2, "--new-tokens"},
      {"--weights no_such.safetensors", 2, "--weights: cannot read 'no_such.safetensors'"},
      {"--weights a_directory", 2, "--weights: 'a_directory' is not a regular file"},
      {"--weights", 2, "--weights"},
      {"--weights ''", 2, "--weights: expected a file name, got ''"},
      {"--no-uncached 1", 2, "1"},
  };
  table.insert(table.end(), own.begin(), own.end());
  run_table(tmp.path(), EMBER_BENCH_GENERATE_BINARY, "bench_generate", bench_cases(table));
  expect_help(EMBER_BENCH_GENERATE_BINARY, "bench_generate",
              {"--threads", "--new-tokens", "--reps", "--weights", "--no-uncached"});
}
#endif

#ifdef EMBER_BENCH_GPT_BINARY
TEST(HostileCommandLines, BenchGpt) {
  TempDir tmp("ember_hostile_bench_gpt");
  std::vector<Case> table = count_cases("--reps", "(0, 1000]");
  table.push_back({"--reps 1001", 2, "--reps: expected an integer in (0, 1000], got '1001'"});
  table.push_back({"--threads abc", 2, "--threads: expected an integer in (0, 256], got 'abc'"});
  table.push_back({"--threads -2", 2, "--threads"});
  run_table(tmp.path(), EMBER_BENCH_GPT_BINARY, "bench_gpt", bench_cases(table));
  expect_help(EMBER_BENCH_GPT_BINARY, "bench_gpt", {"--threads", "--reps"});
}
#endif

#ifdef EMBER_BENCH_TRAIN_BINARY
TEST(HostileCommandLines, BenchTrain) {
  TempDir tmp("ember_hostile_bench_train");
  const fs::path dir = tmp.path();
  const HostileFiles files(dir);
  write(dir / "no_losses.json", "{\"impl\": \"torch\", \"steps\": 3}\n");
  write(dir / "bad_losses.json", "{\"impl\": \"torch\", \"losses\": [4.2, abc, 4.0]}\n");
  write(dir / "nan_losses.json", "{\"impl\": \"torch\", \"losses\": [4.2, nan]}\n");
  write(dir / "zero_losses.json", "{\"impl\": \"torch\", \"losses\": [4.2, 0]}\n");
  std::vector<Case> table;
  for (auto [flag, range] :
       {std::pair{"--batch", "(0, 1048576]"}, std::pair{"--context", "(0, 131072]"},
        std::pair{"--vocab", "(0, 1048576]"}, std::pair{"--emb", "(0, 65536]"},
        std::pair{"--heads", "(0, 1024]"}, std::pair{"--layers", "(0, 1024]"}}) {
    const std::vector<Case> cases = count_cases(flag, range);
    table.insert(table.end(), cases.begin(), cases.end());
  }
  const std::vector<Case> own = {
      // --steps: two warm-up steps and at least one timed.
      {"--steps 2", 2, "--steps: expected an integer in [3, 1000000], got '2'"},
      {"--steps 0", 2, "--steps"},
      {"--steps -3", 2, "--steps"},
      {"--steps abc", 2, "--steps"},
      {"--steps 1e30", 2, "--steps"},
      {"--steps 99999999999999999999", 2, "--steps"},
      {"--steps", 2, "--steps"},
      {"--config big", 2, "--config: expected ch5 or small, got 'big'"},
      {"--config ''", 2, "--config"},
      {"--config", 2, "--config"},
      {"--dropout 1", 2, "--dropout: expected a finite number in [0, 0.99]"},
      {"--dropout -0.1", 2, "--dropout"},
      {"--dropout nan", 2, "--dropout"},
      {"--lr 0", 2, "--lr: expected a finite number > 0"},
      {"--lr inf", 2, "--lr"},
      {"--lr abc", 2, "--lr"},
      {"--clip -1", 2, "--clip"},
      {"--clip 1e999", 2, "--clip"},
      {"--heads 5", 2, "--heads: expected a divisor of the embedding size 128 (--emb), got 5"},
      {"--config ch5 --emb 100", 2, "--heads: expected a divisor"},
      {"--batch 1048576 --context 131072", 2,
       "--batch, --context, --vocab, --emb, --heads, "
       "--layers: these sizes need"},
      {"--config ch5 --layers 1024", 2, "these sizes need"},
      {"--reference no_such.json", 2, "--reference: cannot read 'no_such.json'"},
      {"--reference a_directory", 2, "--reference: 'a_directory' is a directory"},
      {"--reference ''", 2, "--reference: expected a file name, got ''"},
      {"--reference a_fifo", 2, "--reference: 'a_fifo' is a FIFO that gave no bytes"},
      {"--reference sparse.txt", 2, "--reference: 'sparse.txt' is larger than 1 MiB"},
      {"--reference /dev/zero", 2, "--reference: '/dev/zero' is larger than 1 MiB"},
      {"--reference empty.txt", 2, "--reference: 'empty.txt' holds no \"losses\""},
      {"--reference no_losses.json", 2, "--reference: 'no_losses.json' holds no \"losses\""},
      {"--reference bad_losses.json", 2,
       "--reference: 'bad_losses.json': expected a list of "
       "finite positive losses, got 'abc'"},
      {"--reference nan_losses.json", 2, "got 'nan'"},
      {"--reference zero_losses.json", 2, "got '0'"},
      {"--profile 1", 2, "1"},
  };
  table.insert(table.end(), own.begin(), own.end());
  run_table(dir, EMBER_BENCH_TRAIN_BINARY, "bench_train", bench_cases(table));
  expect_help(
      EMBER_BENCH_TRAIN_BINARY, "bench_train",
      {"--config", "--steps", "--threads", "--reference", "--profile", "--batch", "--context",
       "--vocab", "--emb", "--heads", "--layers", "--dropout", "--lr", "--clip"});
}
#endif

// A save killed mid-write leaves "<checkpoint>.tmp-<pid>-<n>"; the next run removes those whose
// process is gone and whose header is an Ember checkpoint's, and nothing else.
TEST(HostileCommandLines, StaleTemporaryFilesOfAKilledSaveAreRemoved) {
  TempDir tmp("ember_hostile_stale");
  const fs::path dir = tmp.path();
  const std::string bin = EMBER_TRAIN_CHARS_BINARY;
  const std::string small = "--context 4 --batch 2 --steps 2 --sample-every 2 --out out";
  ASSERT_EQ(run(dir, bin, small).exit_code, 0);
  const std::string checkpoint = slurp(dir / "out" / "checkpoint.safetensors");
  // A process that has ended: its pid is free.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);
  const std::string dead = std::to_string(child), live = std::to_string(getpid());
  const fs::path out = dir / "out";
  const fs::path stale = out / ("checkpoint.safetensors.tmp-" + dead + "-0");
  const fs::path live_one = out / ("checkpoint.safetensors.tmp-" + live + "-0");
  const fs::path not_ember = out / ("checkpoint.safetensors.tmp-" + dead + "-1");
  const fs::path other_name = out / ("model.safetensors.tmp-" + dead + "-0");
  const fs::path bad_pattern = out / ("checkpoint.safetensors.tmp-" + dead + "-x");
  write(stale, checkpoint.substr(0, checkpoint.size() / 3));  // cut mid-write
  write(live_one, checkpoint);
  write(not_ember, "somebody else's file");
  write(other_name, checkpoint);
  write(bad_pattern, checkpoint);
  const Outcome r = run(dir, bin, small);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live_one));
  EXPECT_TRUE(fs::exists(not_ember));
  EXPECT_TRUE(fs::exists(other_name));
  EXPECT_TRUE(fs::exists(bad_pattern));
  // A refused run removes nothing.
  write(stale, checkpoint);
  EXPECT_EQ(run(dir, bin, small + " --lr nan").exit_code, 2);
  EXPECT_TRUE(fs::exists(stale));
}

}  // namespace
