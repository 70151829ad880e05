// nn/data.h against torch.utils.data in PyTorch 1.13: random_() of an int64 scalar, randperm,
// and whole DataLoader passes (the batches and the generator's state after them), from
// tests/fixtures/data.txt (scripts/fixtures/gen_data.py).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/tensor/random.h"
#include "nn/data.h"

namespace ember::nn {
namespace {

std::vector<std::vector<std::string>> fixture_lines() {
  std::ifstream in(std::string(EMBER_FIXTURES_DIR) + "/data.txt");
  EXPECT_TRUE(in) << "tests/fixtures/data.txt";
  std::vector<std::vector<std::string>> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    out.push_back(w);
  }
  return out;
}

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  if (text == "-") return ids;
  std::istringstream in(text);
  for (std::string id; std::getline(in, id, ',');) ids.push_back(std::stoll(id));
  return ids;
}

TEST(Data, RandomInt64AndRandpermArePyTorchs) {
  int checked = 0;
  for (const auto& w : fixture_lines()) {
    if (w[0] == "random_int64") {
      manual_seed(std::stoull(w[1]));
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(random_int64_full(default_generator()), std::stoll(w[2 + k])) << "seed " << w[1];
      ++checked;
    } else if (w[0] == "randperm") {
      Generator g(std::stoull(w[1]));
      EXPECT_EQ(randperm(std::stoll(w[2]), g), parse_ids(w[3])) << "seed " << w[1] << " n " << w[2];
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 + 24);
}

TEST(Data, LoaderPassesArePyTorchs) {
  const auto lines = fixture_lines();
  int cases = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto& w = lines[i];
    if (w[0] != "loader") continue;
    ++cases;
    const std::string name = w[1];
    const int64_t n_ids = std::stoll(w[3]), max_length = std::stoll(w[4]),
                  stride = std::stoll(w[5]), batch = std::stoll(w[6]), passes = std::stoll(w[9]);
    std::vector<int64_t> ids;
    for (int64_t k = 0; k < n_ids; ++k) ids.push_back((7 * k + k / 3) % 50257);
    manual_seed(std::stoull(w[2]));
    DataLoader loader(std::make_shared<GPTDataset>(ids, max_length, stride), batch, w[7] == "1",
                      w[8] == "1");
    std::size_t j = i + 1;
    for (int64_t p = 0; p < passes; ++p) {
      int64_t k = 0;
      for (auto pass = loader.iter(); auto b = pass.next(); ++k) {
        ASSERT_LT(j, lines.size());
        const auto& e = lines[j++];
        ASSERT_EQ(e[0], "batch") << name << " pass " << p << ": more batches than PyTorch's";
        EXPECT_EQ(e[2], std::to_string(p));
        EXPECT_EQ(e[3], std::to_string(k));
        EXPECT_EQ(e[4], std::to_string(b->input.size(0)) + "x" + std::to_string(b->input.size(1)));
        const auto first = parse_ids(e[5]);
        const int64_t* x = b->input.data_ptr<int64_t>();
        const int64_t* y = b->target.data_ptr<int64_t>();
        for (int64_t r = 0; r < b->input.size(0); ++r) {
          EXPECT_EQ(x[r * max_length], first[static_cast<std::size_t>(r)]) << name << " pass " << p;
          for (int64_t c = 0; c + 1 < max_length; ++c)
            ASSERT_EQ(y[r * max_length + c], x[r * max_length + c + 1]);
        }
        if (name == "halfpass") break;  // calc_loss_loader(num_batches=1)
      }
      if (name != "halfpass") {
        EXPECT_EQ(k, loader.size()) << name;
      }
    }
    ASSERT_EQ(lines[j][0], "after") << name << ": fewer batches than PyTorch's";
    const Tensor r = rand({});
    uint32_t bits = 0;
    std::memcpy(&bits, r.data_ptr<float>(), 4);
    EXPECT_EQ(bits, std::stoul(lines[j][2], nullptr, 16)) << name << ": generator state after";
  }
  EXPECT_EQ(cases, 7);
}

TEST(Data, DatasetWindowsAreTheBooks) {
  std::vector<int64_t> ids(10);
  for (int64_t k = 0; k < 10; ++k) ids[static_cast<std::size_t>(k)] = 100 + k;
  GPTDataset ds(ids, 4, 3);  // range(0, 6, 3): windows at 0 and 3
  ASSERT_EQ(ds.size(), 2);
  const auto [x, y] = ds.get(1);
  EXPECT_EQ(x.data_ptr<int64_t>()[0], 103);
  EXPECT_EQ(y.data_ptr<int64_t>()[3], 107);
  EXPECT_EQ(GPTDataset(ids, 9, 1).size(), 1);  // 10 ids: one window of 9 and its target
}

TEST(Data, BadInputIsAnError) {
  const std::vector<int64_t> ids(20, 1);
  auto expect_error = [](auto&& f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error, expected " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error([&] { GPTDataset(ids, 0, 1); }, "max_length must be positive, got 0");
  expect_error([&] { GPTDataset(ids, 4, 0); }, "stride must be positive, got 0");
  expect_error([&] { GPTDataset(ids, 20, 1); },
               "20 token ids do not fill one window of max_length 20");
  expect_error([&] { GPTDataset({}, 4, 1); }, "0 token ids do not fill one window");
  auto ds = std::make_shared<GPTDataset>(ids, 4, 4);
  expect_error([&] { DataLoader(ds, 0, false, false); }, "batch_size must be positive, got 0");
  expect_error([&] { ds->get(4); }, "index 4 out of range for 4 windows");
  Generator g;
  expect_error([&] { randperm(-1, g); }, "n must be non-negative, got -1");
}

}  // namespace
}  // namespace ember::nn
