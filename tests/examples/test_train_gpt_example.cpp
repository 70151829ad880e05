// The train_gpt example (examples/train_gpt.cpp), chapter 5 of the book, run as a program:
//  - the book's run for its first epoch (9 steps, evaluations at steps 0 and 5, the epoch's
//    sample) against PyTorch 1.13's run of the book's notebook (tests/fixtures/ch05.txt, from
//    scripts/fixtures/gen_ch05.py): the untrained model's text, the initial losses, every step's
//    loss and every evaluation's losses to 1e-5 relative, and every printed line exactly. (The
//    whole 10-epoch run takes minutes of CPU; the README shows it, run by hand.)
//  - --stop-after-epoch then --resume prints the same lines as an uninterrupted run (a small
//    model);
//  - bad input (a text too short for one window, weights that do not fit) is a message and exit
//    code 2.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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
  std::string output;
  const std::string command = std::string("'") + EMBER_TRAIN_GPT_BINARY + "' " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return output;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = pclose(pipe);
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
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

void expect_rel(double got, double want, double tol, const std::string& what) {
  EXPECT_LE(std::abs(got - want), tol * std::abs(want)) << what << ": " << got << " vs " << want;
}

TEST(TrainGptExample, TheBooksFirstEpochIsPyTorchs) {
  // PyTorch's run of the notebook.
  std::ifstream in(std::string(EMBER_FIXTURES_DIR) + "/ch05.txt");
  ASSERT_TRUE(in) << "tests/fixtures/ch05.txt";
  std::string untrained;
  double initial_train = 0, initial_val = 0;
  Printed torch;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "untrained") untrained = line.substr(kind.size() + 1);
    if (kind == "initial_loss") words >> initial_train >> initial_val;
    if (kind == "print") torch.book_lines.push_back(line.substr(kind.size() + 1));
    if (kind == "step") {
      long step;
      std::string hex;
      double loss;
      words >> step >> hex >> loss;
      torch.step_loss[step] = loss;
    }
    if (kind == "eval") {
      long step;
      double a, b;
      words >> step >> a >> b;
      torch.evals[step] = {a, b};
    }
  }
  ASSERT_GE(torch.step_loss.size(), 9u);

  const fs::path dir = temp_dir("ember_train_gpt_book");
  int code = -1;
  const std::string output =
      run("'" + kVerdict + "' --max-steps 9 --threads 2 --print-losses --print-every 3 --out '" +
              dir.string() + "'",
          code);
  ASSERT_EQ(code, 0) << output;

  // Cell 15: the untrained model's text, and the book's own printed words.
  EXPECT_NE(output.find("Output text:\n " + untrained + "\n"), std::string::npos) << output;
  EXPECT_NE(output.find(" Every effort moves you rentingetic wasnم refres RexMeCHicular stren\n"),
            std::string::npos);
  // Cell 71: the initial losses (the book prints 10.98758 and 10.98110 to these digits).
  double train0 = 0, val0 = 0;
  for (const std::string& line : lines_of(output)) {
    if (line.rfind("Training loss: ", 0) == 0) train0 = std::stod(line.substr(15));
    if (line.rfind("Validation loss: ", 0) == 0) val0 = std::stod(line.substr(17));
  }
  expect_rel(train0, initial_train, 1e-5, "initial train loss");
  expect_rel(val0, initial_val, 1e-5, "initial validation loss");
  EXPECT_NE(output.find("Training loss: 10.98758"), std::string::npos);  // the book's digits
  EXPECT_NE(output.find("Validation loss: 10.98110"), std::string::npos);

  // Cell 77, the first epoch: every step's loss, every evaluation, every printed line.
  const Printed ember = parse(output);
  ASSERT_EQ(ember.step_loss.size(), 9u) << output;
  for (const auto& [step, loss] : ember.step_loss) {
    expect_rel(loss, torch.step_loss.at(step), 1e-5, "step " + std::to_string(step));
  }
  ASSERT_EQ(ember.evals.size(), 2u);
  for (const auto& [step, losses] : ember.evals) {
    expect_rel(losses.first, torch.evals.at(step).first, 1e-5,
               "train loss at step " + std::to_string(step));
    expect_rel(losses.second, torch.evals.at(step).second, 1e-5,
               "val loss at step " + std::to_string(step));
  }
  ASSERT_EQ(ember.book_lines.size(), 3u) << output;
  for (std::size_t i = 0; i < ember.book_lines.size(); ++i) {
    EXPECT_EQ(ember.book_lines[i], torch.book_lines.at(i));
  }
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
  const Printed a = parse(whole), b = parse(first), c = parse(rest);
  std::vector<std::string> joined = b.book_lines;
  joined.insert(joined.end(), c.book_lines.begin(), c.book_lines.end());
  EXPECT_EQ(joined, a.book_lines);
  EXPECT_GE(a.book_lines.size(), 6u);
  std::map<long, double> steps = b.step_loss;
  steps.insert(c.step_loss.begin(), c.step_loss.end());
  EXPECT_EQ(steps, a.step_loss);  // bit for bit: the same draws in the same order
  EXPECT_EQ(a.step_loss.size(), 9u);
  // The final sample (temperature and top-k) is the same too.
  const auto tail = [](const std::string& s) {
    return s.substr(s.find("Output text (temperature"));
  };
  EXPECT_EQ(tail(rest), tail(whole));
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
