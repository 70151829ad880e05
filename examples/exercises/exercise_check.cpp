// exercise_check <name>: checks the backward you wrote in examples/exercises/<name>.cpp against
// Ember's autograd on the chapter's inputs, and says what is wrong (README.md here). Built with
// your files as exercise_check, and with the reference answers (solutions/) as
// exercise_check_solutions, which CTest runs.
//
//   exercise_check softmax | attention | multihead_attention | layer_norm | cross_entropy | all
#include <cstdio>
#include <string>

#include "examples/exercises/exercises.h"

int main(int argc, char** argv) {
  using namespace exercises;
  const Candidates functions{
      [](const std::vector<Tensor>& in) { return Softmax::apply(in[0]); },
      [](const std::vector<Tensor>& in) { return CausalAttention::apply(in[0], in[1], in[2]); },
      [](const std::vector<Tensor>& in) { return LayerNorm::apply(in[0], in[1], in[2]); },
      [](const std::vector<Tensor>& in) { return CrossEntropy::apply(in[0], in[1]); }};
  const std::vector<Exercise> all = all_exercises(functions);
  const std::string wanted = argc == 2 ? argv[1] : "";
  std::string names;
  for (const Exercise& e : all) names += (names.empty() ? "" : " | ") + e.name;
  bool found = false, passed = true;
  for (const Exercise& e : all) {
    if (wanted != "all" && wanted != e.name) continue;
    found = true;
    const Outcome outcome = check(e);
    std::printf("%s%s\n", outcome.report.c_str(), outcome.passed ? "PASSED" : "NOT YET");
    passed = passed && outcome.passed;
  }
  if (!found) {
    std::fprintf(stderr, "usage: exercise_check <%s | all>\n", names.c_str());
    return 2;
  }
  return passed ? 0 : 1;
}
