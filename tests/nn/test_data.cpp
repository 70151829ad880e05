// nn/data.h against torch.utils.data in PyTorch 1.13: random_() of an int64 scalar, randperm,
// and whole DataLoader passes (the batches and the generator's state after them), from
// tests/fixtures/data.txt (scripts/fixtures/gen_data.py).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/tensor/random.h"
#include "nn/data.h"
#include "tests/fixtures.h"

namespace ember::nn {
namespace {

// PyTorch's draws (scripts/fixtures/gen_data.py lists the entries).
const test::Fixture& torch_data() { return test::fixture_file("data.txt"); }

// The parts of an entry's name: "randperm/0/9" -> {"randperm", "0", "9"}.
std::vector<std::string> name_parts(const std::string& name) {
  std::vector<std::string> parts(1);
  for (char c : name) {
    if (c == '/') {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

TEST(Data, RandomInt64AndRandpermArePyTorchs) {
  int checked = 0;
  for (const std::string& name : torch_data().names()) {
    const std::vector<std::string> part = name_parts(name);
    if (part[0] == "random_int64") {  // random_int64/<seed>
      manual_seed(std::stoull(part[1]));
      const std::vector<int64_t>& expected = torch_data().ints(name);
      ASSERT_EQ(expected.size(), 3u);
      for (int64_t value : expected) {
        EXPECT_EQ(random_int64_full(default_generator()), value) << name;
      }
      ++checked;
    } else if (part[0] == "randperm") {  // randperm/<seed>/<n>
      Generator g(std::stoull(part[1]));
      EXPECT_EQ(randperm(std::stoll(part[2]), g), torch_data().ints(name)) << name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 + 24);
}

TEST(Data, LoaderPassesArePyTorchs) {
  int cases = 0;
  for (const std::string& loader_name : torch_data().names()) {
    const std::vector<std::string> part = name_parts(loader_name);
    if (part[0] != "loader") continue;  // loader/<case>
    ++cases;
    const std::string name = part[1];
    const std::vector<int64_t>& w = torch_data().ints(loader_name);
    ASSERT_EQ(w.size(), 8u) << loader_name;
    const int64_t seed = w[0], n_ids = w[1], max_length = w[2], stride = w[3], batch = w[4],
                  passes = w[7];
    const bool shuffle = w[5] == 1, drop_last = w[6] == 1;
    std::vector<int64_t> ids;
    for (int64_t k = 0; k < n_ids; ++k) ids.push_back((7 * k + k / 3) % 50257);
    manual_seed(static_cast<uint64_t>(seed));
    DataLoader loader(std::make_shared<GPTDataset>(ids, max_length, stride), batch, shuffle,
                      drop_last);
    for (int64_t p = 0; p < passes; ++p) {
      const std::string pass_name = "batch/" + name + "/" + std::to_string(p) + "/";
      int64_t k = 0;  // batches taken so far
      for (auto pass = loader.iter(); auto b = pass.next();) {
        const std::string batch_name = pass_name + std::to_string(k++);
        ASSERT_TRUE(torch_data().has(batch_name))
            << name << " pass " << p << ": more batches than PyTorch's";
        // The first id of each row of PyTorch's batch; each row holds max_length ids.
        const std::vector<int64_t>& first = torch_data().ints(batch_name);
        ASSERT_EQ(b->input.size(0), static_cast<int64_t>(first.size())) << batch_name;
        ASSERT_EQ(b->input.size(1), max_length) << batch_name;
        const int64_t* x = b->input.data_ptr<int64_t>();
        const int64_t* y = b->target.data_ptr<int64_t>();
        for (int64_t r = 0; r < b->input.size(0); ++r) {
          EXPECT_EQ(x[r * max_length], first[static_cast<std::size_t>(r)]) << batch_name;
          for (int64_t c = 0; c + 1 < max_length; ++c)
            ASSERT_EQ(y[r * max_length + c], x[r * max_length + c + 1]);
        }
        if (name == "halfpass") break;  // calc_loss_loader(num_batches=1)
      }
      if (name != "halfpass") {
        EXPECT_EQ(k, loader.size()) << name;
      }
      EXPECT_FALSE(torch_data().has(pass_name + std::to_string(k)))
          << name << " pass " << p << ": fewer batches than PyTorch's";
    }
    // The generator's state after the passes.
    torch_data().expect_exact(rand({}), "after/" + name);
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
