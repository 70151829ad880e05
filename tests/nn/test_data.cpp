// nn/data.h against torch.utils.data in PyTorch 1.13: random_() of an int64 scalar, randperm,
// and whole DataLoader passes (the batches and the generator's state after them), from
// tests/fixtures/data.txt (scripts/fixtures/gen_data.py).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/error.h"
#include "core/tensor/random.h"
#include "nn/data.h"
#include "tests/fixtures.h"
#include "tests/test_helpers.h"

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

// A pass keeps what it reads, so it outlives its loader (and the caller's handle on the
// dataset), as PyTorch's iterator holds its loader: iter(DataLoader(ds, 1)) then next().
TEST(Data, APassOutlivesItsLoader) {
  std::vector<int64_t> ids(10);
  for (int64_t k = 0; k < 10; ++k) ids[static_cast<std::size_t>(k)] = 100 + k;
  auto ds = std::make_shared<GPTDataset>(ids, 4, 3);  // windows at 0 and 3
  auto loader = std::make_unique<DataLoader>(ds, 1, /*shuffle=*/false, /*drop_last=*/false);
  DataLoader::Pass pass = loader->iter();
  loader.reset();
  ds.reset();
  // Memory the loader and the dataset's ids held is reused by what comes next.
  std::vector<std::vector<int64_t>> filler(64, std::vector<int64_t>(16, -1));
  std::optional<Batch> first = pass.next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->input.to_vector<int64_t>(), (std::vector<int64_t>{100, 101, 102, 103}));
  EXPECT_EQ(first->target.to_vector<int64_t>(), (std::vector<int64_t>{101, 102, 103, 104}));
  std::optional<Batch> second = pass.next();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->input.to_vector<int64_t>(), (std::vector<int64_t>{103, 104, 105, 106}));
  EXPECT_FALSE(pass.next().has_value());
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
  // start(i) takes the indices get takes: no position past the ids (nor an overflowed product).
  EXPECT_EQ(ds->start(3), 12);
  expect_error([&] { ds->start(4); }, "index 4 out of range for 4 windows");
  expect_error([&] { ds->start(-1); }, "index -1 out of range for 4 windows");
  expect_error([&] { ds->start(INT64_MAX); }, "out of range for 4 windows");
  Generator g;
  expect_error([&] { randperm(-1, g); }, "n must be non-negative, got -1");
}

// Sizes at the int64 limits: every count is exact (no intermediate sum overflows) or an Error.
TEST(Data, SizesAtTheLimits) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> ids(20);
  for (int64_t k = 0; k < 20; ++k) ids[static_cast<std::size_t>(k)] = k;
  for (const int64_t bad : {int64_t{0}, int64_t{-1}, kMin}) {
    EXPECT_NE(test::error_of([&] { GPTDataset(ids, bad, 1); }).find("max_length must be positive"),
              std::string::npos);
    EXPECT_NE(test::error_of([&] { GPTDataset(ids, 4, bad); }).find("stride must be positive"),
              std::string::npos);
  }
  // A max_length of INT64_MAX never fits (its message once computed max_length + 1).
  EXPECT_EQ(test::error_of([&] { GPTDataset(ids, kMax, 1); }),
            "GPTDataset: 20 token ids do not fill one window of max_length 9223372036854775807 "
            "(an input and its target shifted by one need max_length + 1 ids)");
  // range(0, 20 - 4, stride): 16 starts for stride 1, 1 for any stride from 16 to INT64_MAX.
  EXPECT_EQ(GPTDataset(ids, 4, 1).size(), 16);
  EXPECT_EQ(GPTDataset(ids, 4, 15).size(), 2);
  for (const int64_t stride : {int64_t{16}, kMax - 1, kMax}) {
    GPTDataset ds(ids, 4, stride);
    ASSERT_EQ(ds.size(), 1) << stride;
    EXPECT_EQ(ds.get(0).second.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4}));
  }
  EXPECT_EQ(GPTDataset(ids, 19, kMax).size(), 1);
  // len(loader) with a batch of up to INT64_MAX: ceil(16 / batch), or 16 // batch with drop_last.
  auto ds = std::make_shared<GPTDataset>(ids, 4, 1);
  for (const auto& [batch, all, whole] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 16, 16}, {5, 4, 3}, {16, 1, 1}, {17, 1, 0}, {kMax - 1, 1, 0}, {kMax, 1, 0}}) {
    EXPECT_EQ(DataLoader(ds, batch, false, false).size(), all) << batch;
    EXPECT_EQ(DataLoader(ds, batch, false, true).size(), whole) << batch;
  }
  // A pass with a batch of INT64_MAX: one batch of all 16 windows; with drop_last none.
  const DataLoader all_at_once(ds, kMax, false, false), none(ds, kMax, false, true);
  auto pass = all_at_once.iter();  // a pass reads its loader: the loader must outlive it
  const auto batch = pass.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->input.shape(), (Shape{16, 4}));
  EXPECT_FALSE(pass.next().has_value());
  EXPECT_FALSE(none.iter().next().has_value());
  for (const int64_t bad : {int64_t{0}, int64_t{-1}, kMin}) {
    EXPECT_NE(test::error_of([&] {
                DataLoader(ds, bad, false, false);
              }).find("batch_size must be positive, got " + std::to_string(bad)),
              std::string::npos);
  }
  // Indices at the limits.
  for (const int64_t i : {int64_t{-1}, int64_t{16}, kMax, kMin}) {
    EXPECT_NE(test::error_of([&] { ds->get(i); }).find("out of range for 16 windows"),
              std::string::npos)
        << i;
  }
  Generator g;
  EXPECT_NE(test::error_of([&] { randperm(kMin, g); }).find("n must be non-negative"),
            std::string::npos);
  EXPECT_TRUE(randperm(0, g).empty());
  // An order that cannot fit in memory is refused before anything is allocated (not
  // std::length_error, std::bad_alloc, or an out-of-memory kill while it is filled).
  for (const int64_t n : {kMax, int64_t{1} << 60, int64_t{1} << 50}) {
    EXPECT_NE(test::error_of([&] {
                randperm(n, g);
              }).find("randperm: cannot hold n = " + std::to_string(n) + " int64 numbers"),
              std::string::npos)
        << n;
  }
}

}  // namespace
}  // namespace ember::nn
