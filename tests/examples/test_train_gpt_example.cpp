// The train_gpt example (examples/train_gpt.cpp), chapter 5 of the book, run as a program:
//  - the book's run for its first epoch (9 steps, evaluations at steps 0 and 5, the epoch's
//    sample) against PyTorch 1.13's run of the book's notebook (tests/fixtures/ch05.txt, from
//    scripts/fixtures/gen_ch05.py): the untrained model's text, the initial losses, every step's
//    loss and every evaluation's losses to 1e-5 relative, and every printed line exactly;
//  - the whole 10-epoch run (90 steps, 18 evaluations, 28 printed lines, then the greedy and the
//    top-k samples) the same way, and against the book's printed log: TrainGptBookRun, with the
//    ctest label `long` (minutes of CPU: `ctest --preset long`; the CI presets leave it out);
//  - --stop-after-epoch then --resume prints the same lines as an uninterrupted run (a small
//    model); so does Ctrl-C (a checkpoint within an epoch) then --resume; --save-every's saves;
//  - bad input (a text too short for one window, weights that do not fit) is a message and exit
//    code 2.
#include "tests/examples/run_program.h"
#include "tests/fixtures.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifndef EMBER_TRAIN_GPT_BINARY
#error "EMBER_TRAIN_GPT_BINARY must be defined (the path of the train_gpt example)"
#endif

namespace {

namespace fs = std::filesystem;

const std::string kVerdict = std::string(EMBER_FIXTURES_DIR) + "/../../examples/the-verdict.txt";

std::string run(const std::string& args, int& exit_code) {
  return ember::testing_examples::run_command(
      std::string("'") + EMBER_TRAIN_GPT_BINARY + "' " + args, exit_code);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

fs::path temp_dir(const char* name) {
  std::string pattern = (fs::temp_directory_path() / (std::string(name) + "_XXXXXX")).string();
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

// The lines the book's program prints (evaluations and samples), and the full-precision losses.
struct Printed {
  std::vector<std::string> book_lines;              // "Ep ..." and "Every effort moves you..."
  std::map<long, double> step_loss;                 // step -> loss
  std::map<long, std::pair<double, double>> evals;  // step -> (train, val)
};

Printed parse(const std::string& output) {
  Printed p;
  for (const std::string& line : lines_of(output)) {
    if (line.rfind("Ep ", 0) == 0 || line.rfind("Every effort moves you", 0) == 0) {
      p.book_lines.push_back(line);
    } else if (line.rfind("step ", 0) == 0 && line.find(" loss ") != std::string::npos &&
               line.find('|') == std::string::npos) {
      std::istringstream in(line);
      std::string word;
      long step;
      double loss;
      in >> word >> step >> word >> loss;
      p.step_loss[step] = loss;
    } else if (line.rfind("eval ", 0) == 0) {
      std::istringstream in(line);
      std::string word;
      long step;
      double a, b;
      in >> word >> step >> a >> b;
      p.evals[step] = {a, b};
    }
  }
  return p;
}

// What two runs printed, as one run's output (a run stopped early, then its resumption): the book's
// lines in order, the losses and the evaluations by step.
Printed joined(const Printed& first, const Printed& rest) {
  Printed p = first;
  p.book_lines.insert(p.book_lines.end(), rest.book_lines.begin(), rest.book_lines.end());
  p.step_loss.insert(rest.step_loss.begin(), rest.step_loss.end());
  p.evals.insert(rest.evals.begin(), rest.evals.end());
  return p;
}

void expect_rel(double got, double want, double tol, const std::string& what) {
  EXPECT_LE(std::abs(got - want), tol * std::abs(want))
      << what << ": " << std::setprecision(17) << got << " vs PyTorch's " << want << " (relative "
      << std::setprecision(3) << std::abs(got - want) / std::abs(want) << ")";
}

// PyTorch's run of the notebook (tests/fixtures/ch05.txt; scripts/fixtures/gen_ch05.py lists the
// entries).
struct TorchRun {
  std::string untrained, greedy25, topk25;
  double initial_train = 0, initial_val = 0;
  Printed printed;
};

TorchRun read_torch_run() {
  const ember::test::Fixture& f = ember::test::fixture_file("ch05.txt");
  TorchRun t;
  t.untrained = f.text("untrained");
  t.greedy25 = f.text("greedy25");
  t.topk25 = f.text("topk25");
  const std::vector<double> initial = f.tensor("initial_loss").to_vector<double>();
  t.initial_train = initial.at(0);
  t.initial_val = initial.at(1);
  for (const std::string& name : f.names()) {
    // step/<global_step> (the loss), eval/<global_step> (train and validation losses).
    if (name.rfind("step/", 0) == 0) {
      t.printed.step_loss[std::stol(name.substr(5))] = f.tensor(name).item();
    } else if (name.rfind("eval/", 0) == 0) {
      const std::vector<double> losses = f.tensor(name).to_vector<double>();
      t.printed.evals[std::stol(name.substr(5))] = {losses.at(0), losses.at(1)};
    }
  }
  for (int i = 0; f.has("print/" + std::to_string(i)); ++i) {
    t.printed.book_lines.push_back(f.text("print/" + std::to_string(i)));
  }
  return t;
}

// Cells 15 and 71: the untrained model's text and the initial losses, against PyTorch's and the
// book's printed digits.
void expect_untrained_and_initial_losses(const std::string& output, const TorchRun& torch) {
  EXPECT_NE(output.find("Output text:\n " + torch.untrained + "\n"), std::string::npos) << output;
  EXPECT_NE(output.find(" Every effort moves you rentingetic wasnم refres RexMeCHicular stren\n"),
            std::string::npos);
  double train0 = 0, val0 = 0;
  for (const std::string& line : lines_of(output)) {
    if (line.rfind("Training loss: ", 0) == 0) train0 = std::stod(line.substr(15));
    if (line.rfind("Validation loss: ", 0) == 0) val0 = std::stod(line.substr(17));
  }
  expect_rel(train0, torch.initial_train, 1e-5, "initial train loss");
  expect_rel(val0, torch.initial_val, 1e-5, "initial validation loss");
  EXPECT_NE(output.find("Training loss: 10.98758"), std::string::npos);  // the book's digits
  EXPECT_NE(output.find("Validation loss: 10.98110"), std::string::npos);
}

// Cell 77: every step's loss and every evaluation's losses to 1e-5 relative, and every printed
// line exactly, for the steps Ember ran (which must be `steps` steps, `evals` evaluations and
// `lines` printed lines).
void expect_steps_as_pytorchs(const Printed& ember, const Printed& torch, std::size_t steps,
                              std::size_t evals, std::size_t lines) {
  ASSERT_EQ(ember.step_loss.size(), steps);
  ASSERT_EQ(ember.evals.size(), evals);
  ASSERT_EQ(ember.book_lines.size(), lines);
  ASSERT_GE(torch.step_loss.size(), steps) << "tests/fixtures/ch05.txt is too short";
  ASSERT_GE(torch.evals.size(), evals) << "tests/fixtures/ch05.txt is too short";
  ASSERT_GE(torch.book_lines.size(), lines) << "tests/fixtures/ch05.txt is too short";
  long want_step = 0;
  for (const auto& [step, loss] : ember.step_loss) {
    ASSERT_EQ(step, want_step++);
    expect_rel(loss, torch.step_loss.at(step), 1e-5, "step " + std::to_string(step));
  }
  for (const auto& [step, losses] : ember.evals) {
    ASSERT_EQ(torch.evals.count(step), 1u) << "no PyTorch evaluation at step " << step;
    expect_rel(losses.first, torch.evals.at(step).first, 1e-5,
               "train loss at step " + std::to_string(step));
    expect_rel(losses.second, torch.evals.at(step).second, 1e-5,
               "val loss at step " + std::to_string(step));
  }
  for (std::size_t i = 0; i < lines; ++i) {
    EXPECT_EQ(ember.book_lines[i], torch.book_lines[i]) << "printed line " << i;
  }
}

// train_gpt's two lines on its job (item 1 of its benchmark): the products' TFLOP over the wall
// time is the GFLOP/s printed, that over the GEMM rate is the share, the rate is the higher of
// its two measures; the parts' products add up to the job's and their times (with the rest) to
// its wall time; the memory figures are ordered (in use <= peak).
void expect_consistent_job_lines(const std::string& output) {
  double tflop = 0, seconds = 0, gflops = 0, share = 0, rate = 0, before = 0, after = 0;
  double peak = 0, cached = 0, in_use = 0, rss = 0;
  const std::size_t at = output.find("train_gpt: job ");
  ASSERT_NE(at, std::string::npos) << output;
  ASSERT_EQ(std::sscanf(output.c_str() + at,
                        "train_gpt: job %lf TFLOP of products in %lf s: %lf GFLOP/s, %lf%% of the "
                        "GEMM rate (%lf GFLOP/s), the higher of its measures before and after the "
                        "job (%lf, %lf) | memory: peak %lf GB, cached %lf GB, in use %lf GB; peak "
                        "RSS %lf GB",
                        &tflop, &seconds, &gflops, &share, &rate, &before, &after, &peak, &cached,
                        &in_use, &rss),
            11)
      << output.substr(at, 300);
  ASSERT_GT(tflop, 0);
  ASSERT_GT(seconds, 0);
  EXPECT_NEAR(tflop * 1000 / seconds, gflops, 0.01 * gflops);  // printed to 2 and 1 decimals
  EXPECT_NEAR(100 * gflops / rate, share, 1.0);
  EXPECT_NEAR(rate, std::max(before, after), 0.1);
  EXPECT_GT(std::min(before, after), 0);
  EXPECT_LE(in_use, peak + 0.01);
  EXPECT_GT(rss, 0);

  const std::size_t where = output.find("train_gpt: where the time went: ");
  ASSERT_NE(where, std::string::npos) << output;
  const std::string line = output.substr(where, output.find('\n', where) - where);
  double part_tflop = 0, part_seconds = 0;
  for (const char* part : {"training steps ", "evaluations ", "samples ", "saving ", "the rest "}) {
    const std::size_t p = line.find(part);
    ASSERT_NE(p, std::string::npos) << part << " in " << line;
    double s = 0, t = 0;
    const int got = std::sscanf(line.c_str() + p + std::strlen(part), "%lf s (%lf TFLOP", &s, &t);
    ASSERT_GE(got, 1) << line;
    part_seconds += s;
    if (got == 2) part_tflop += t;
  }
  EXPECT_NEAR(part_tflop, tflop, 0.02) << line;
  EXPECT_NEAR(part_seconds, seconds, 0.3) << line;
}

TEST(TrainGptExample, TheBooksFirstEpochIsPyTorchs) {
  const TorchRun torch = read_torch_run();
  ASSERT_GE(torch.printed.step_loss.size(), 9u);

  const fs::path dir = temp_dir("ember_train_gpt_book");
  int code = -1;
  const std::string output =
      run("'" + kVerdict + "' --max-steps 9 --threads 2 --print-losses --print-every 3 --no-save " +
              "--out '" + dir.string() + "'",
          code);
  ASSERT_EQ(code, 0) << output;
  // --no-save: the run needs no room for the 1.95 GB checkpoint (the model and AdamW's moments).
  EXPECT_NE(output.find("stopped after step 8; no checkpoint (--no-save)"), std::string::npos)
      << output;
  EXPECT_FALSE(fs::exists(dir / "checkpoint.safetensors"));
  expect_consistent_job_lines(output);
  expect_untrained_and_initial_losses(output, torch);

  // Cell 77, the first epoch: every step's loss, every evaluation, every printed line.
  const Printed ember = parse(output);
  ASSERT_NO_FATAL_FAILURE(expect_steps_as_pytorchs(ember, torch.printed, 9, 2, 3)) << output;
  ASSERT_EQ(ember.book_lines.size(), 3u) << output;
  // The book's printed lines (chapter 5).
  EXPECT_EQ(ember.book_lines[0], "Ep 1 (Step 000000): Train loss 9.781, Val loss 9.933");
  EXPECT_EQ(ember.book_lines[1], "Ep 1 (Step 000005): Train loss 8.111, Val loss 8.339");
  EXPECT_EQ(ember.book_lines[2].substr(0, 35), "Every effort moves you,,,,,,,,,,,,.");
  // Progress with an ETA, and the plot.
  EXPECT_NE(output.find("ETA "), std::string::npos);
  std::ifstream svg(dir / "loss.svg");
  const std::string plot((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  for (const char* label : {"Epochs", "Loss", "Tokens seen", "Training loss", "Validation loss"}) {
    EXPECT_NE(plot.find(label), std::string::npos) << label;
  }
  fs::remove_all(dir);
}

// The book's printed log of cell 77 (chapter 5, train_model_simple with num_epochs=10), as the book
// prints it; its samples end in spaces that the book's page drops, so the lines are compared
// without trailing spaces.
const std::vector<std::string> kBooksLog = {
    "Ep 1 (Step 000000): Train loss 9.781, Val loss 9.933",
    "Ep 1 (Step 000005): Train loss 8.111, Val loss 8.339",
    "Every effort moves you,,,,,,,,,,,,.",
    "Ep 2 (Step 000010): Train loss 6.661, Val loss 7.048",
    "Ep 2 (Step 000015): Train loss 5.961, Val loss 6.616",
    "Every effort moves you, and, and, and, and, and, and, and, and, and, and, and, and, and, and, "
    "and, and, and, and, and, and, and, and,, and, and,",
    "Ep 3 (Step 000020): Train loss 5.726, Val loss 6.600",
    "Ep 3 (Step 000025): Train loss 5.201, Val loss 6.348",
    "Every effort moves you, and I had been.",
    "Ep 4 (Step 000030): Train loss 4.417, Val loss 6.278",
    "Ep 4 (Step 000035): Train loss 4.069, Val loss 6.226",
    "Every effort moves you know the                          \"I he had the donkey and I had the "
    "and I had the donkey and down the room, I had",
    "Ep 5 (Step 000040): Train loss 3.732, Val loss 6.160",
    "Every effort moves you know it was not that the picture--I had the fact by the last I had "
    "been--his, and in the            \"Oh, and he said, and down the room, and in",
    "Ep 6 (Step 000045): Train loss 2.850, Val loss 6.179",
    "Ep 6 (Step 000050): Train loss 2.427, Val loss 6.141",
    "Every effort moves you know,\" was one of the picture. The--I had a little of a little: "
    "\"Yes, and in fact, and in the picture was, and I had been at my elbow and as his pictures, "
    "and down the room, I had",
    "Ep 7 (Step 000055): Train loss 2.104, Val loss 6.134",
    "Ep 7 (Step 000060): Train loss 1.882, Val loss 6.233",
    "Every effort moves you know,\" was one of the picture for nothing--I told Mrs.  \"I was "
    "no--as! The women had been, in the moment--as Jack himself, as once one had been the donkey, "
    "and were, and in his",
    "Ep 8 (Step 000065): Train loss 1.320, Val loss 6.238",
    "Ep 8 (Step 000070): Train loss 0.985, Val loss 6.242",
    "Every effort moves you know,\" was one of the axioms he had been the tips of a self-confident "
    "moustache, I felt to see a smile behind his close grayish beard--as if he had the donkey. "
    "\"strongest,\" as his",
    "Ep 9 (Step 000075): Train loss 0.717, Val loss 6.293",
    "Ep 9 (Step 000080): Train loss 0.541, Val loss 6.393",
    "Every effort moves you?\"  \"Yes--quite insensible to the irony. She wanted him "
    "vindicated--and by me!\"  He laughed again, and threw back the window-curtains, I had the "
    "donkey. \"There were days when I",
    "Ep 10 (Step 000085): Train loss 0.391, Val loss 6.452",
    "Every effort moves you know,\" was one of the axioms he laid down across the Sevres and "
    "silver of an exquisitely appointed luncheon-table, when, on a later day, I had again run over "
    "from Monte Carlo; and Mrs. Gis",
};

std::string without_trailing_spaces(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// The text a program printed after `header` up to the next line that starts with `next_header`
// (or the end).
std::string printed_text(const std::string& output, const std::string& header,
                         const std::string& next_header) {
  const std::size_t start = output.find(header);
  if (start == std::string::npos) return "(no \"" + header + "\" in the output)";
  const std::size_t from = start + header.size();
  std::size_t to = next_header.empty() ? output.size() : output.find("\n" + next_header, from);
  if (to == std::string::npos) to = output.size();
  std::string text = output.substr(from, to - from);
  if (next_header.empty() && !text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// The whole run of the book, all 10 epochs (90 steps, 18 evaluations, 10 samples, then cells 86
// and 115), against PyTorch 1.13's: minutes of CPU, so not in CI's test presets. It has the ctest
// label `long`: `ctest --preset long` runs it (tests/README.md).
TEST(TrainGptBookRun, TheBooksTenEpochsArePyTorchs) {
  const TorchRun torch = read_torch_run();
  ASSERT_EQ(torch.printed.step_loss.size(), 90u) << "tests/fixtures/ch05.txt is not complete";
  ASSERT_EQ(torch.printed.evals.size(), 18u);
  ASSERT_EQ(torch.printed.book_lines.size(), 28u);

  const fs::path dir = temp_dir("ember_train_gpt_book_run");
  int code = -1;
  const std::string output = run(
      "'" + kVerdict + "' --threads 2 --print-losses --no-save --out '" + dir.string() + "'", code);
  ASSERT_EQ(code, 0) << output;
  expect_untrained_and_initial_losses(output, torch);

  // Cell 77: 90 steps, 18 evaluations, 28 printed lines, each as PyTorch's.
  const Printed ember = parse(output);
  ASSERT_NO_FATAL_FAILURE(expect_steps_as_pytorchs(ember, torch.printed, 90, 18, 28)) << output;
  // ...and as the book prints them.
  ASSERT_EQ(kBooksLog.size(), 28u);
  for (std::size_t i = 0; i < kBooksLog.size(); ++i) {
    EXPECT_EQ(without_trailing_spaces(ember.book_lines[i]), kBooksLog[i]) << "line " << i;
  }
  // Cell 86 (25 greedy tokens) and cell 115 (seed 123, temperature 1.4, top-k 25).
  EXPECT_EQ(printed_text(output, "Output text (greedy):\n ", "Output text (temperature"),
            torch.greedy25);
  EXPECT_EQ(printed_text(output, "Output text (temperature 1.4, top-k 25):\n ", ""), torch.topk25);
  EXPECT_NE(output.find("wrote " + (dir / "loss.svg").string()), std::string::npos);
  fs::remove_all(dir);
}

TEST(TrainGptExample, ResumePrintsTheLinesOfAnUninterruptedRun) {
  const fs::path dir = temp_dir("ember_train_gpt_resume");
  const std::string common = "'" + kVerdict +
                             "' --emb-dim 16 --layers 1 --heads 2 --context 16 --batch 5 "
                             "--train-ratio 0.05 --epochs 3 --eval-freq 2 --eval-iter 1 "
                             "--skip-initial --print-losses --threads 1 --temperature 1.0 "
                             "--top-k 5 ";
  int code = -1;
  const std::string whole = run(common + "--out '" + (dir / "a").string() + "'", code);
  ASSERT_EQ(code, 0) << whole;
  const std::string first =
      run(common + "--stop-after-epoch 1 --out '" + (dir / "b").string() + "'", code);
  ASSERT_EQ(code, 0) << first;
  EXPECT_NE(first.find("stopped after epoch 1"), std::string::npos) << first;
  const std::string rest = run(common + "--out '" + (dir / "b").string() + "' --resume '" +
                                   (dir / "b" / "checkpoint.safetensors").string() + "'",
                               code);
  ASSERT_EQ(code, 0) << rest;
  EXPECT_NE(rest.find("resumed from"), std::string::npos) << rest;
  const Printed a = parse(whole), both = joined(parse(first), parse(rest));
  EXPECT_EQ(both.book_lines, a.book_lines);
  EXPECT_GE(a.book_lines.size(), 6u);
  EXPECT_EQ(both.step_loss, a.step_loss);  // bit for bit: the same draws in the same order
  EXPECT_EQ(a.step_loss.size(), 9u);
  // The final sample (temperature and top-k) is the same too.
  const auto tail = [](const std::string& s) {
    return s.substr(s.find("Output text (temperature"));
  };
  EXPECT_EQ(tail(rest), tail(whole));
  fs::remove_all(dir);
}

// Ctrl-C (SIGINT, sent once step 3 is printed) finishes the step under way, saves a checkpoint
// within the epoch and exits with 130; --resume from it continues with the epoch's next batch:
// the steps' and evaluations' losses of both parts are those of an uninterrupted run, bit for bit.
TEST(TrainGptExample, CtrlCSavesACheckpointThatResumesAsIfUninterrupted) {
  const fs::path dir = temp_dir("ember_train_gpt_sigint");
  // 57 batches an epoch, 20 epochs: far more than the interrupted run can do before the signal.
  const std::string common = "'" + kVerdict +
                             "' --emb-dim 16 --layers 1 --heads 2 --context 16 --batch 5 "
                             "--train-ratio 0.9 --epochs 20 --eval-freq 2 --eval-iter 1 "
                             "--skip-initial --print-losses --threads 1 ";
  int code = -1;
  const std::string whole =
      run(common + "--max-steps 40 --out '" + (dir / "a").string() + "'", code);
  ASSERT_EQ(code, 0) << whole;
  // The program in the background, interrupted by the shell once it prints step 3.
  const std::string first =
      ember::testing_examples::run_interrupted("'" + std::string(EMBER_TRAIN_GPT_BINARY) + "' " +
                                                   common + "--out '" + (dir / "b").string() + "'",
                                               "step 3 loss", (dir / "first.txt").string(), code);
  ASSERT_EQ(code, 0) << first;
  EXPECT_NE(first.find("exit status 130"), std::string::npos) << first;
  EXPECT_NE(first.find("interrupted (Ctrl-C) after step"), std::string::npos) << first;
  const std::string rest =
      run(common + "--max-steps 40 --out '" + (dir / "b").string() + "' --resume '" +
              (dir / "b" / "checkpoint.safetensors").string() + "'",
          code);
  ASSERT_EQ(code, 0) << rest;
  EXPECT_NE(rest.find("resumed from"), std::string::npos) << rest;
  EXPECT_NE(rest.find("in epoch 1 after batch"), std::string::npos) << rest;  // within the epoch
  const Printed a = parse(whole), b = parse(first), c = parse(rest);
  ASSERT_GE(b.step_loss.size(), 4u);
  ASSERT_LT(b.step_loss.rbegin()->first, 39) << "the signal came after the run's end";
  const Printed both = joined(b, c);
  EXPECT_EQ(both.step_loss, a.step_loss);
  EXPECT_EQ(a.step_loss.size(), 40u);
  EXPECT_EQ(both.evals, a.evals);
  EXPECT_EQ(both.book_lines, a.book_lines);
  fs::remove_all(dir);
}

// Once the training's checkpoint is written, a Ctrl-C ends the program at once (it was put off
// to the end of the final samples): exit status 130, no final sample, the checkpoint whole.
TEST(TrainGptExample, CtrlCAfterTheLastSaveEndsTheProgram) {
  ember::testing_examples::TempDir dir("ember_train_gpt_sigint_end");
  const std::string out = (dir.path() / "out").string();
  int code = -1;
  const std::string output = ember::testing_examples::run_interrupted(
      "'" + std::string(EMBER_TRAIN_GPT_BINARY) + "' '" + kVerdict +
          "' --emb-dim 16 --layers 1 --heads 2 --context 16 --batch 5 --train-ratio 0.05 "
          "--epochs 1 --eval-freq 2 --eval-iter 1 --skip-initial --threads 1 --out '" +
          out + "'",
      "wrote " + out + "/checkpoint", (dir.path() / "log.txt").string(), code);
  ASSERT_EQ(code, 0) << output;
  EXPECT_NE(output.find("exit status 130"), std::string::npos) << output;
  EXPECT_EQ(output.find("Output text (greedy)"), std::string::npos) << output;
  int resumed = -1;
  const std::string again =
      run("'" + kVerdict +
              "' --emb-dim 16 --layers 1 --heads 2 --context 16 --batch 5 --train-ratio 0.05 "
              "--epochs 2 --eval-freq 2 --eval-iter 1 --skip-initial --threads 1 --out '" +
              out + "' --resume '" + out + "/checkpoint.safetensors'",
          resumed);
  EXPECT_EQ(resumed, 0) << again;
  EXPECT_NE(again.find("resumed from"), std::string::npos) << again;
}

// Ctrl-C in the run's last sample (an epoch of one batch, stopped once its progress line is
// printed) or its last step (--max-steps 1, stopped once the step's loss is printed) ends the run
// as done: the checkpoint is the end's, and the program does not say that --resume continues it
// (which --resume would then refuse). After the last sample it exits with 130 without the final
// samples; after the last step it stops as --max-steps does. Whatever it says, a resume it names
// works.
TEST(TrainGptExample, CtrlCInTheLastSampleOrStepEndsTheRunAsDone) {
  ember::testing_examples::TempDir dir("ember_train_gpt_sigint_last");
  struct Case {
    std::string args, line, expected;
  };
  const std::vector<Case> cases = {
      {"--batch 16 --train-ratio 0.05 --epochs 1 --no-kv-cache", "step ",
       "interrupted (Ctrl-C) after the run's last save: no final samples"},
      {"--batch 4 --train-ratio 0.2 --epochs 2 --eval-iter 4 --print-losses --max-steps 1",
       "step 0 loss", "stopped after step 0"}};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].args);
    const std::string out = (dir.path() / ("out" + std::to_string(i))).string();
    const std::string common = "'" + kVerdict +
                               "' --emb-dim 128 --layers 1 --heads 2 --context 16 --eval-freq 5 "
                               "--skip-initial --threads 1 " +
                               cases[i].args + " --out '" + out + "'";
    int code = -1;
    const std::string output = ember::testing_examples::run_interrupted(
        "'" + std::string(EMBER_TRAIN_GPT_BINARY) + "' " + common, cases[i].line,
        (dir.path() / ("log" + std::to_string(i) + ".txt")).string(), code);
    ASSERT_EQ(code, 0) << output;
    EXPECT_EQ(output.find("continues the run"), std::string::npos) << output;
    EXPECT_NE(output.find(cases[i].expected), std::string::npos) << output;
    EXPECT_NE(output.find("wrote " + out + "/checkpoint.safetensors"), std::string::npos) << output;
    EXPECT_EQ(output.find("Output text (greedy)"), std::string::npos) << output;
    if (output.find("continues the run") != std::string::npos) {
      const std::string resumed =
          run(common + " --resume '" + out + "/checkpoint.safetensors'", code);
      EXPECT_EQ(code, 0) << resumed;
    }
  }
}

// --max-steps ends the run with a checkpoint, at an epoch's first batch (step 3: 3 batches an
// epoch) or within an epoch (step 4); --resume from either gives the uninterrupted run's losses.
TEST(TrainGptExample, MaxStepsSavesACheckpointThatResumes) {
  const fs::path dir = temp_dir("ember_train_gpt_max_steps");
  const std::string common = "'" + kVerdict +
                             "' --emb-dim 16 --layers 1 --heads 2 --context 16 --batch 5 "
                             "--train-ratio 0.05 --epochs 3 --eval-freq 2 --eval-iter 1 "
                             "--skip-initial --print-losses --threads 1 ";
  int code = -1;
  const Printed whole = parse(run(common + "--out '" + (dir / "a").string() + "'", code));
  ASSERT_EQ(code, 0);
  ASSERT_EQ(whole.step_loss.size(), 9u);
  for (const int stop : {3, 4}) {
    SCOPED_TRACE(stop);
    const std::string out = (dir / ("b" + std::to_string(stop))).string();
    const std::string first =
        run(common + "--max-steps " + std::to_string(stop) + " --out '" + out + "'", code);
    ASSERT_EQ(code, 0) << first;
    EXPECT_NE(first.find("stopped after step " + std::to_string(stop - 1)), std::string::npos)
        << first;
    const std::string rest =
        run(common + "--out '" + out + "' --resume '" + out + "/checkpoint.safetensors'", code);
    ASSERT_EQ(code, 0) << rest;
    const Printed both = joined(parse(first), parse(rest));
    EXPECT_EQ(both.step_loss, whole.step_loss);
    EXPECT_EQ(both.book_lines, whole.book_lines);
  }
  fs::remove_all(dir);
}

// The checkpoint is written once, at the end, as the book saves (no "saved" line); --save-every 2
// also writes it after epoch 2 (and 4), and then at the end; --no-save writes none (and cannot go
// with --save-every).
TEST(TrainGptExample, SaveEveryWritesAtItsEpochsAndNoSaveNone) {
  const fs::path dir = temp_dir("ember_train_gpt_save_every");
  const std::string common = "'" + kVerdict +
                             "' --emb-dim 16 --layers 1 --heads 2 --context 16 --batch 5 "
                             "--train-ratio 0.05 --epochs 5 --eval-freq 2 --eval-iter 1 "
                             "--skip-initial --threads 1 --out '" +
                             dir.string() + "' ";
  const std::string checkpoint = (dir / "checkpoint.safetensors").string();
  int code = -1;
  const std::string plain = run(common, code);
  ASSERT_EQ(code, 0) << plain;
  EXPECT_EQ(plain.find("saved the checkpoint"), std::string::npos) << plain;
  EXPECT_NE(plain.find("wrote " + checkpoint), std::string::npos) << plain;
  const std::string every = run(common + "--save-every 2", code);
  ASSERT_EQ(code, 0) << every;
  std::vector<std::string> saved;
  for (const std::string& line : lines_of(every)) {
    if (line.rfind("saved the checkpoint", 0) == 0) saved.push_back(line);
  }
  EXPECT_EQ(saved, (std::vector<std::string>{"saved the checkpoint after epoch 2",
                                             "saved the checkpoint after epoch 4"}));
  EXPECT_NE(every.find("wrote " + checkpoint), std::string::npos) << every;

  fs::remove(checkpoint);
  const std::string none = run(common + "--no-save", code);
  ASSERT_EQ(code, 0) << none;
  EXPECT_NE(none.find("\nno checkpoint (--no-save)\n"), std::string::npos) << none;
  EXPECT_FALSE(fs::exists(checkpoint));
  EXPECT_TRUE(fs::exists(dir / "loss.svg"));
  const std::string both = run(common + "--no-save --save-every 2", code);
  EXPECT_EQ(code, 2) << both;
  EXPECT_NE(both.find(" excludes --"), std::string::npos) << both;
  fs::remove_all(dir);
}

TEST(TrainGptExample, BadInputIsAMessage) {
  const fs::path dir = temp_dir("ember_train_gpt_bad");
  std::ofstream(dir / "short.txt") << "Far too short a text for a context of 256 tokens.";
  int code = -1;
  std::string out =
      run("'" + (dir / "short.txt").string() + "' --out '" + dir.string() + "'", code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("not enough text for the training loader"), std::string::npos) << out;
  EXPECT_NE(out.find("do not fill one window of max_length 256"), std::string::npos) << out;
  out = run("--weights '" + std::string(EMBER_FIXTURES_DIR) +
                "/gpt2_tiny.safetensors' --generate 'Every effort moves you'",
            code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("wte.weight has shape [96, 12], expected [50257, 768]"), std::string::npos)
      << out;
  out = run("--weights '" + (dir / "missing.safetensors").string() + "'", code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("missing.safetensors"), std::string::npos) << out;
  fs::remove_all(dir);
}

}  // namespace

// Logs go to stderr (core/autograd/log.h): with EMBER_LOG=debug, whose trace logs every backward
// step, stdout holds the program's lines only, and stderr the trace.
TEST(TrainGptExample, EmberLogWritesToStderrNotIntoTheOutput) {
  const fs::path dir = temp_dir("ember_train_gpt_log");
  const std::string command = "EMBER_LOG=debug '" + std::string(EMBER_TRAIN_GPT_BINARY) + "' '" +
                              kVerdict +
                              "' --emb-dim 16 --layers 1 --heads 2 --context 16 --max-steps 1 "
                              "--epochs 1 --no-save --skip-initial --out '" +
                              dir.string() + "'";
  int code = -1;
  const std::string out =
      ember::testing_examples::run_command("(" + command + " 2>/dev/null)", code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("Ep 1 (Step 000000): Train loss "), std::string::npos) << out;
  EXPECT_EQ(out.find("[debug]"), std::string::npos) << out;
  const std::string err =
      ember::testing_examples::run_command("(" + command + " >/dev/null)", code);
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(err.find("[debug] backward "), std::string::npos) << err;
  fs::remove_all(dir);
}
