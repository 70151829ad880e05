// safetensors: round trips, files from PyTorch (tests/fixtures/*_pytorch.safetensors, written by
// scripts/fixtures/gen_safetensors.py), a file for PyTorch (ember_written.safetensors, read back
// by that script), a table of hostile files, Module::save/load and a training checkpoint that
// resumes bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/ember.h"
#include "core/safetensors.h"
#include "nn/attention.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "optim/optim.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;
using test::fixture_path;

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

SafetensorsFile parse(const std::string& bytes) {
  return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

const Tensor* find(const SafetensorsFile& f, const std::string& name) {
  for (const auto& [key, t] : f.tensors) {
    if (key == name) return &t;
  }
  return nullptr;
}

// The tensors ember_written.safetensors holds (the script checks the same list).
NamedTensorList ember_written_tensors() {
  Tensor w = arange(6, DType::Float32).reshape({2, 3}) / 4.0;
  return {{"weight", w},
          {"double", from_vector({0.1, -2.5}, {2}, DType::Float64)},
          {"ids", from_vector({3, -1}, {1, 2}, DType::Int64)},
          {"flags", from_vector({1, 0, 0}, {3}, DType::Bool)},
          {"transposed", w.t()}};
}

TEST(Safetensors, RoundTripEveryDtypeAndMetadata) {
  NamedTensorList tensors = ember_written_tensors();
  tensors.emplace_back("scalar", scalar_tensor(2.5, DType::Float64));
  tensors.emplace_back("empty", zeros({0, 3}));
  const std::string path = temp_path("roundtrip.safetensors");
  save_safetensors(tensors, path, {{"epoch", "3"}});
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"epoch", "3"}}));
  ASSERT_EQ(f.tensors.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    const Tensor* got = find(f, name);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->dtype(), t.dtype());
    EXPECT_EQ(got->shape(), t.shape());
    EXPECT_TRUE(equal(*got, t));
  }
  // The file is 8 + header + data bytes, the data 8-byte aligned.
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + (24 + 16 + 16 + 3 + 24 + 8 + 0));
}

// Ember writes exactly the committed file, which the Python script reads back as the same
// tensors (scripts/fixtures/gen_safetensors.py checks it).
TEST(Safetensors, WritesTheCommittedFile) {
  const std::string bytes = serialize_safetensors(ember_written_tensors(),
                                                  {{"epoch", "3"}, {"note", "written by Ember"}});
  if (std::getenv("EMBER_WRITE_FIXTURES")) {
    std::ofstream(fixture_path("ember_written.safetensors"), std::ios::binary) << bytes;
  }
  EXPECT_EQ(bytes, read_bytes(fixture_path("ember_written.safetensors")));
}

TEST(Safetensors, ReadsPyTorchDtypes) {
  SafetensorsFile f = load_safetensors(fixture_path("dtypes_pytorch.safetensors"));
  EXPECT_EQ(f.metadata.at("what"), "dtypes");
  auto expect = [&](const std::string& name, DType dtype, const Shape& shape,
                    const std::vector<double>& values) {
    SCOPED_TRACE(name);
    const Tensor* t = find(f, name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype(), dtype);
    test::expect_tensor(*t, shape, values, 0.0);
  };
  expect("f32", DType::Float32, {2, 2}, {1.5, -2.25, 0.1f, 3e38f});
  expect("f64", DType::Float64, {3}, {0.1, -1e300, 5e-324});
  expect("bool", DType::Bool, {3}, {1, 0, 1});
  expect("f16", DType::Float32, {5}, {1.0, -0.5, 65504.0, 5.9604644775390625e-08, INFINITY});
  expect("bf16", DType::Float32, {4}, {1.0, -3.140625, 9.969209968386869e+37, -INFINITY});
  expect("i32", DType::Int64, {2}, {-7, 2147483647});
  expect("u8", DType::Int64, {2}, {0, 255});
  expect("scalar", DType::Float32, {}, {2.5});
  expect("empty", DType::Float32, {0, 3}, {});
  const Tensor* i64 = find(f, "i64");
  ASSERT_NE(i64, nullptr);
  EXPECT_EQ(i64->to_vector<int64_t>(), (std::vector<int64_t>{INT64_MIN, INT64_MAX, 0, 42}));
}

// The book's MultiHeadAttention saved by PyTorch loads into Ember's and gives PyTorch's output.
TEST(Safetensors, PyTorchMultiHeadAttentionLoadsAndMatches) {
  SafetensorsFile f = load_safetensors(fixture_path("mha_pytorch.safetensors"));
  EXPECT_EQ(f.metadata.at("format"), "pt");
  nn::StateDict state;
  Tensor input, output;
  for (const auto& [name, t] : f.tensors) {
    if (name == "input") {
      input = t;
    } else if (name == "output") {
      output = t;
    } else {
      state.emplace_back(name, t);
    }
  }
  nn::MultiHeadAttention mha(3, 4, 6, 0.0, 2, true);
  nn::LoadResult r = mha.load_state_dict(state);
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  NoGradGuard no_grad;
  test::expect_allclose(mha.forward(input), output, 1e-5, 1e-6);
}

TEST(Safetensors, ModuleSaveLoad) {
  manual_seed(1);
  nn::MultiHeadAttention a(3, 4, 6, 0.0, 2, true);
  manual_seed(2);
  nn::MultiHeadAttention b(3, 4, 6, 0.0, 2, true);
  const std::string path = temp_path("mha.safetensors");
  a.save(path, {{"what", "mha"}});
  EXPECT_FALSE(equal(a.W_query->weight, b.W_query->weight));
  b.load(path);
  for (std::size_t i = 0; i < a.state_dict().size(); ++i) {
    EXPECT_TRUE(equal(a.state_dict()[i].second, b.state_dict()[i].second))
        << a.state_dict()[i].first;
  }
  nn::Linear wrong(3, 5);
  expect_error([&] { wrong.load(path); }, "Error(s) in loading state_dict");
}

// ---- hostile files ----

std::string file_with(const std::string& header, const std::string& data = "",
                      int64_t size_delta = 0) {
  std::string out(8, '\0');
  const uint64_t n = header.size() + static_cast<uint64_t>(size_delta);
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

TEST(Safetensors, HostileFilesAreErrors) {
  const std::string four(4, '\0');
  const std::string deep = std::string(1000, '[') + std::string(1000, ']');
  std::string huge(8, '\0');
  const uint64_t big = 200ull << 20;
  std::memcpy(huge.data(), &big, 8);
  struct Case {
    const char* what;
    std::string bytes;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"empty file", "", "too short for the 8-byte header size"},
      {"truncated size", std::string(5, '\0'), "too short"},
      {"header larger than the file", file_with("{}", "", 10), "larger than the file"},
      {"header larger than 100 MB", huge + "{}", "larger than the limit"},
      {"not an object", file_with("[1, 2]"), "must be a JSON object"},
      {"invalid JSON", file_with("{\"a\": }"), "invalid JSON header"},
      {"invalid UTF-8", file_with("{\"\xff\xfe\": 1}"), "invalid JSON header"},
      {"deep nesting", file_with("{\"a\": " + deep + "}"), "nests deeper"},
      {"nested in shape",
       file_with(R"({"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", four),
       "nests deeper"},
      {"duplicate names",
       file_with(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
           four),
       "duplicate tensor name 'a'"},
      {"unknown dtype", file_with(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", four),
       "unknown dtype 'Q7'"},
      {"entry not an object", file_with(R"({"a":3})"), "entry 'a' must be an object"},
      {"missing offsets", file_with(R"({"a":{"dtype":"F32","shape":[1]}})", four),
       "needs data_offsets"},
      {"unknown field",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", four),
       "unknown field 'x'"},
      {"negative dim",
       file_with(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", four),
       "must be a non-negative integer"},
      {"float offset",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4.5]}})", four),
       "must be a non-negative integer"},
      {"offsets out of range",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", four),
       "out of range"},
      {"offsets reversed",
       file_with(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", four),
       "out of range"},
      {"size mismatch",
       file_with(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,4]}})", four),
       "needs 8 bytes, data_offsets give 4"},
      {"huge shape",
       file_with(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})",
                 four),
       "has too many elements"},
      {"overlapping",
       file_with(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
           std::string(8, '\0')),
       "ranges overlap or leave a hole"},
      {"hole",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0')),
       "ranges overlap or leave a hole"},
      {"trailing bytes",
       file_with(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(8, '\0')),
       "the tensors cover 4 bytes of data, the file has 8"},
      {"bool byte 2",
       file_with(R"({"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", "\x02"),
       "expected 0 or 1"},
      {"metadata not strings", file_with(R"({"__metadata__":{"a":1}})"), "must be a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    expect_error([&] { parse(c.bytes); }, c.error);
  }
  // A truncated copy of a valid file, at every length.
  const std::string good = serialize_safetensors(ember_written_tensors(), {{"a", "b"}});
  for (std::size_t len = 0; len < good.size(); ++len) {
    EXPECT_NE(test::error_of([&] { parse(good.substr(0, len)); }), "") << "length " << len;
  }
  expect_error([] { load_safetensors("/nonexistent/x.safetensors"); }, "cannot open");
  expect_error(
      [] {
        save_safetensors({{"a", Tensor()}}, temp_path("u.safetensors"));
      },
      "undefined");
  expect_error(
      [] {
        save_safetensors({{"a", ones({1})}, {"a", ones({1})}}, temp_path("d.safetensors"));
      },
      "duplicate tensor name 'a'");
}

// ---- a training checkpoint resumes bit for bit ----

struct Trainer {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::LinearLR> warmup;
  std::unique_ptr<optim::CosineAnnealingLR> cosine;
  std::unique_ptr<optim::SequentialLR> sched;
  explicit Trainer(uint64_t seed) {
    manual_seed(seed);
    model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Linear>(4, 8));
    model->push_back(std::make_shared<nn::GELU>());
    model->push_back(std::make_shared<nn::Linear>(8, 3));
    opt = std::make_unique<optim::AdamW>(
        model->parameters(), optim::AdamWOptions(1e-2).weight_decay(0.1).betas({0.9, 0.95}));
    warmup = std::make_unique<optim::LinearLR>(*opt, 0.1, 1.0, 3);
    cosine = std::make_unique<optim::CosineAnnealingLR>(*opt, 7);
    sched = std::make_unique<optim::SequentialLR>(
        *opt, std::vector<optim::LRScheduler*>{warmup.get(), cosine.get()},
        std::vector<int64_t>{3});
  }
  void steps(int from, int to) {
    for (int s = from; s < to; ++s) {
      Tensor x = test::pattern({5, 4}, s, DType::Float32);
      Tensor y = from_vector({0, 2, 1, 1, 0}, {5}, DType::Int64);
      opt->zero_grad();
      Tensor loss = nn::functional::cross_entropy((*model)(x), y);
      loss.backward();
      optim::clip_grad_norm_(model->parameters(), 0.5);
      opt->step();
      sched->step();
    }
  }
};

TEST(Checkpoint, ResumedTrainingEqualsUninterruptedBitForBit) {
  Trainer straight(7);
  straight.steps(0, 10);

  Trainer first(7);
  first.steps(0, 4);
  const std::string path = temp_path("ckpt.safetensors");
  optim::save_checkpoint(path, first.model->state_dict(), *first.opt, first.sched.get(), 4,
                         {{"run", "test"}});

  Trainer resumed(99);  // other weights, fresh optimizer and schedulers
  NamedTensorList model_state;
  const int64_t step = optim::load_checkpoint(path, model_state, *resumed.opt, resumed.sched.get());
  EXPECT_EQ(step, 4);
  resumed.model->load_state_dict(model_state);
  resumed.steps(4, 10);
  const auto expected = straight.model->state_dict(), actual = resumed.model->state_dict();
  ASSERT_EQ(expected.size(), actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(equal(expected[i].second, actual[i].second)) << expected[i].first;
  }
  EXPECT_EQ(resumed.opt->param_groups()[0].options->get_lr(),
            straight.opt->param_groups()[0].options->get_lr());

  // A checkpoint of another optimizer kind, or a plain file, is refused.
  optim::SGD sgd(straight.model->parameters(), optim::SGDOptions(0.1));
  expect_error([&] { optim::load_checkpoint(path, model_state, sgd); },
               "holds the state of a AdamW optimizer, not of SGD");
  save_safetensors({{"a", ones({1})}}, temp_path("plain.safetensors"));
  expect_error([&] { optim::load_checkpoint(temp_path("plain.safetensors"), model_state, sgd); },
               "not a training checkpoint");
}

// ReduceLROnPlateau is not an LRScheduler (nor is PyTorch's), but a checkpoint stores it too,
// including its initial best of inf, which JSON cannot hold as a number.
TEST(Checkpoint, StoresReduceLROnPlateauIncludingInfiniteBest) {
  Tensor w = ones({2}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateauOptions o;
  o.patience = 1;
  o.factor = 0.5;
  const std::string path = temp_path("plateau.safetensors");
  {
    optim::ReduceLROnPlateau fresh(opt, o);  // best = inf, no metric yet
    optim::save_checkpoint(path, {{"w", w}}, opt, &fresh, 0);
  }
  optim::ReduceLROnPlateau restored(opt, o);
  NamedTensorList state;
  EXPECT_EQ(optim::load_checkpoint(path, state, opt, &restored), 0);
  EXPECT_EQ(restored.state_dict().at("best"), std::vector<double>{INFINITY});

  // Mid-run: after a best of 1.0, two bad epochs (patience 1) have halved the lr once; an
  // optimizer and scheduler restored from the checkpoint continue exactly as the originals.
  optim::ReduceLROnPlateau original(opt, o);
  for (double metric : {1.0, 2.0, 2.0}) original.step(metric);
  EXPECT_EQ(opt.param_groups()[0].options->get_lr(), 0.5);
  optim::save_checkpoint(path, {{"w", w}}, opt, &original, 3);
  Tensor w2 = ones({2}).requires_grad_();
  optim::SGD opt2({w2}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateau resumed(opt2, o);
  EXPECT_EQ(optim::load_checkpoint(path, state, opt2, &resumed), 3);
  EXPECT_EQ(resumed.state_dict(), original.state_dict());
  EXPECT_EQ(opt2.param_groups()[0].options->get_lr(), 0.5);
  for (double metric : {3.0, 3.0, 0.5, 0.7, 0.7}) {
    original.step(metric);
    resumed.step(metric);
    EXPECT_EQ(resumed.state_dict(), original.state_dict());
    EXPECT_EQ(opt2.param_groups()[0].options->get_lr(), opt.param_groups()[0].options->get_lr());
  }
  EXPECT_EQ(opt2.param_groups()[0].options->get_lr(), 0.125);
}

// Scheduler states from a hostile file: every value is checked before anything is cast.
TEST(Checkpoint, HostileSchedulerStatesAreErrors) {
  Tensor w = ones({2}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(1.0));
  optim::StepLR step_lr(opt, 2);
  optim::SchedulerState good = step_lr.state_dict();
  for (double bad : {double{NAN}, double{INFINITY}, 1e300, 2.5, -1e19}) {
    optim::SchedulerState s = good;
    s["last_epoch"] = {bad};
    expect_error([&] { step_lr.load_state_dict(s); }, "'last_epoch' must be a whole number");
  }
  optim::SchedulerState missing = good;
  missing.erase("_step_count");
  expect_error([&] { step_lr.load_state_dict(missing); }, "missing '_step_count'");

  optim::ReduceLROnPlateau plateau(opt);
  optim::SchedulerState p = plateau.state_dict();
  p["num_bad_epochs"] = {NAN};
  expect_error([&] { plateau.load_state_dict(p); }, "'num_bad_epochs' must be a whole number");

  optim::LinearLR warm(opt, 0.5, 1.0, 2);
  optim::CosineAnnealingLR cosine(opt, 4);
  optim::SequentialLR seq(opt, {&warm, &cosine}, {2});
  for (const char* key : {"_schedulers.", "_schedulers.x.last_epoch", "_schedulers.7.last_epoch",
                          "_schedulers.99999999999999999999.a", "_schedulers.-1.a"}) {
    optim::SchedulerState s = seq.state_dict();
    s[key] = {1.0};
    expect_error([&] { seq.load_state_dict(s); }, "SequentialLR::load_state_dict: bad key");
  }
}

}  // namespace
}  // namespace ember
