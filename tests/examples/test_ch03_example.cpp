// The acceptance test of the product: examples/ch03_attention prints every tensor chapter 3
// prints, with the same digits. tests/fixtures/book_ch03.txt holds the book's printed outputs
// (extracted by scripts/fixtures/extract_book_outputs.py); each must appear in the program's
// output, in order.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  pclose(pipe);
  return out;
}

struct BookCell {
  std::string name;
  std::string text;
};

std::vector<BookCell> load_book_cells() {
  std::ifstream in(std::string(EMBER_FIXTURES_DIR) + "/book_ch03.txt");
  std::vector<BookCell> cells;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("=== ", 0) == 0) {
      cells.push_back({line.substr(4), ""});
    } else if (!cells.empty()) {
      cells.back().text += line + "\n";
    }
  }
  return cells;
}

TEST(Ch03Example, PrintsEveryBookOutputInOrder) {
  const std::vector<BookCell> cells = load_book_cells();
  ASSERT_EQ(cells.size(), 38u) << "fixture book_ch03.txt is incomplete";
  const std::string output = run(EMBER_CH03_BINARY);
  ASSERT_FALSE(output.empty());
  std::size_t pos = 0;
  for (const BookCell& cell : cells) {
    std::size_t found = output.find(cell.text, pos);
    EXPECT_NE(found, std::string::npos) << "book " << cell.name << " not printed (in order):\n"
                                        << cell.text;
    if (found != std::string::npos) pos = found + cell.text.size();
  }
}

}  // namespace
