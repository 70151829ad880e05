// The acceptance test of the product: examples/ch03_attention prints every tensor chapter 3
// prints, with the same digits. tests/fixtures/book_ch03.txt holds the book's printed outputs
// (extracted by scripts/fixtures/extract_book_outputs.py, read by tests/fixtures.h); each must
// appear in the program's output, in order.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/fixtures.h"

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

TEST(Ch03Example, PrintsEveryBookOutputInOrder) {
  const ember::test::Fixture& book = ember::test::fixture_file("book_ch03.txt");
  const std::vector<std::string>& cells = book.keys("cells");
  ASSERT_EQ(cells.size(), 38u) << "fixture book_ch03.txt is incomplete";
  const std::string output = run(EMBER_CH03_BINARY);
  ASSERT_FALSE(output.empty());
  std::size_t pos = 0;
  for (const std::string& cell : cells) {
    const std::string& text = book.text(cell);
    std::size_t found = output.find(text, pos);
    EXPECT_NE(found, std::string::npos) << "book " << cell << " not printed (in order):\n" << text;
    if (found != std::string::npos) pos = found + text.size();
  }
}

}  // namespace
