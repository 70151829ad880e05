#include "nn/data.h"

#include <mutex>
#include <numeric>
#include <utility>

#include "core/base/allocator.h"
#include "core/base/error.h"
#include "core/base/shape.h"
#include "core/tensor/options.h"

namespace ember::nn {

int64_t random_int64_full(Generator& gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  // uniform_int_distribution<int64_t>: random64() % (int64 max + 1).
  return static_cast<int64_t>(gen.random64() % (static_cast<uint64_t>(INT64_MAX) + 1));
}

std::vector<int64_t> randperm(int64_t n, Generator& gen) {
  check(n >= 0, "randperm: n must be non-negative, got ", n);
  // n numbers of 8 bytes must fit in memory (PyTorch fails with bad_alloc or is killed).
  const double physical = detail::physical_memory_bytes();
  check(static_cast<double>(n) * sizeof(int64_t) <= physical, "randperm: cannot hold n = ", n,
        " int64 numbers (more than the ", static_cast<int64_t>(physical / (1 << 20)),
        " MiB of memory this machine has)");
  std::vector<int64_t> r;
  try {
    r.resize(static_cast<std::size_t>(n));
  } catch (const std::exception&) {  // std::length_error or std::bad_alloc
    fail("randperm: cannot hold n = ", n, " int64 numbers (not enough memory)");
  }
  std::iota(r.begin(), r.end(), int64_t{0});
  std::lock_guard<std::mutex> lock(gen.mutex());
  for (int64_t i = 0; i + 1 < n; ++i) {
    const auto z = static_cast<int64_t>(gen.random() % static_cast<uint64_t>(n - i));
    std::swap(r[static_cast<std::size_t>(i)], r[static_cast<std::size_t>(z + i)]);
  }
  return r;
}

GPTDataset::GPTDataset(std::vector<int64_t> token_ids, int64_t max_length, int64_t stride)
    : ids_(std::move(token_ids)), max_length_(max_length), stride_(stride) {
  check(max_length > 0, "GPTDataset: max_length must be positive, got ", max_length);
  check(stride > 0, "GPTDataset: stride must be positive, got ", stride);
  const auto n = static_cast<int64_t>(ids_.size());
  check(n > max_length, "GPTDataset: ", n, " token ids do not fill one window of max_length ",
        max_length, " (an input and its target shifted by one need max_length + 1 ids)");
  // len(range(0, n - max_length, stride)): the starts 0, stride, ... below n - max_length, that
  // is ceil((n - max_length) / stride), written so that no step can overflow (a stride near
  // INT64_MAX is one window).
  num_windows_ = (n - max_length - 1) / stride + 1;
}

int64_t GPTDataset::start(int64_t i) const {
  check(i >= 0 && i < num_windows_, "GPTDataset: index ", i, " out of range for ", num_windows_,
        " windows");
  return i * stride_;  // at most the last window's start: no overflow
}

std::pair<Tensor, Tensor> GPTDataset::get(int64_t i) const {
  const auto begin = ids_.begin() + start(i);
  std::vector<int64_t> input(begin, begin + max_length_),
      target(begin + 1, begin + max_length_ + 1);
  return {from_vector(input, {max_length_}), from_vector(target, {max_length_})};
}

DataLoader::DataLoader(std::shared_ptr<const GPTDataset> dataset, int64_t batch_size, bool shuffle,
                       bool drop_last, Generator* gen)
    : dataset_(std::move(dataset)),
      batch_size_(batch_size),
      shuffle_(shuffle),
      drop_last_(drop_last),
      gen_(gen) {
  check(dataset_ != nullptr, "DataLoader: the dataset is null");
  check(batch_size > 0, "DataLoader: batch_size must be positive, got ", batch_size);
}

int64_t DataLoader::size() const {
  // n >= 1 windows (GPTDataset holds at least one); ceil(n / batch_size) without n + batch_size,
  // which overflows for a batch_size near INT64_MAX.
  const int64_t n = dataset_->size();
  return drop_last_ ? n / batch_size_ : (n - 1) / batch_size_ + 1;
}

Generator& DataLoader::generator() const { return gen_ != nullptr ? *gen_ : default_generator(); }

DataLoader::Pass DataLoader::iter() const {
  random_int64_full(generator());  // the base seed, unused with no worker processes
  return Pass(*this);
}

std::optional<Batch> DataLoader::Pass::next() {
  const Pass& l = *this;
  const int64_t n = l.dataset_->size();
  if (!started_) {
    started_ = true;
    if (l.shuffle_) {
      Generator& gen = gen_ != nullptr ? *gen_ : default_generator();
      Generator sampler(static_cast<uint64_t>(random_int64_full(gen)));
      order_ = randperm(n, sampler);
    } else {
      order_.resize(static_cast<std::size_t>(n));
      std::iota(order_.begin(), order_.end(), int64_t{0});
    }
  }
  const int64_t left = n - position_;
  if (left <= 0 || (l.drop_last_ && left < l.batch_size_)) return std::nullopt;
  const int64_t b = std::min(l.batch_size_, left);
  const int64_t len = l.dataset_->max_length();
  const auto& ids = l.dataset_->token_ids();
  std::vector<int64_t> input, target;
  const auto ids_per_batch = static_cast<std::size_t>(checked_mul(b, len, "DataLoader"));
  input.reserve(ids_per_batch);
  target.reserve(ids_per_batch);
  for (int64_t k = 0; k < b; ++k) {
    const auto begin =
        ids.begin() + l.dataset_->start(order_[static_cast<std::size_t>(position_ + k)]);
    input.insert(input.end(), begin, begin + len);
    target.insert(target.end(), begin + 1, begin + len + 1);
  }
  position_ += b;
  return Batch{from_vector(input, {b, len}), from_vector(target, {b, len})};
}

}  // namespace ember::nn
