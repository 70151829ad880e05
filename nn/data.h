// Chapter 2's data pipeline with torch.utils.data's meaning: the book's GPTDatasetV1 (sliding
// windows of token ids) and a DataLoader (batch_size, shuffle, drop_last) whose shuffle draws
// exactly what PyTorch 1.13's draws, so a training run sees PyTorch's batches:
//
//   auto ds = std::make_shared<nn::GPTDataset>(tokenizer.encode(text, true), 256, 256);
//   nn::DataLoader loader(ds, /*batch_size=*/2, /*shuffle=*/true, /*drop_last=*/true);
//   for (auto pass = loader.iter(); auto batch = pass.next();)  // for x, y in loader:
//     ... batch->input, batch->target: int64 [2, 256]
//
// What one pass draws from the global generator (or the loader's), in PyTorch's order
// (torch/utils/data/dataloader.py and sampler.py of 1.13, num_workers 0):
//  1. iter(loader): the iterator's base seed (for worker processes; drawn even with none):
//     torch.empty((), dtype=torch.int64).random_(), one random64() (random_int64_full below);
//  2. the first next(), only with shuffle: RandomSampler draws its own seed the same way, seeds a
//     fresh torch.Generator with it and takes torch.randperm(n, generator) as the order.
// The rest of the pass draws nothing. Without shuffle the order is 0, 1, ..., n - 1.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/base/generator.h"
#include "core/tensor/tensor.h"

namespace ember::nn {

// torch.empty((), dtype=torch.int64).random_(generator): random64() % 2^63 (PyTorch's
// uniform_int_distribution over the whole non-negative int64 range).
int64_t random_int64_full(Generator& gen);

// torch.randperm(n, generator=gen) on the CPU in PyTorch 1.13 (randperm_cpu): start from
// 0..n-1; for i = 0..n-2 swap element i with element i + random() % (n - i) (a Fisher-Yates
// shuffle from the front, one 32-bit draw per swap). n >= 0.
std::vector<int64_t> randperm(int64_t n, Generator& gen);

// The book's GPTDatasetV1: for i in range(0, len(ids) - max_length, stride), the input window
// ids[i : i + max_length] and the target window, shifted by one, ids[i + 1 : i + max_length + 1].
// max_length and stride must be positive, and the ids must fill at least one window (more than
// max_length ids): otherwise an ember::Error (PyTorch would give an empty dataset, and a loader
// over it would train on nothing).
class GPTDataset {
 public:
  GPTDataset(std::vector<int64_t> token_ids, int64_t max_length, int64_t stride);

  int64_t size() const { return num_windows_; }  // len(dataset)
  int64_t max_length() const { return max_length_; }
  // dataset[i]: (input, target), each int64 [max_length].
  std::pair<Tensor, Tensor> get(int64_t i) const;
  // The window's first id's position in the token ids; i must be in [0, size()), as for get.
  int64_t start(int64_t i) const;
  const std::vector<int64_t>& token_ids() const { return ids_; }

 private:
  std::vector<int64_t> ids_;
  int64_t max_length_, stride_, num_windows_;
};

struct Batch {
  Tensor input;   // int64 [batch, max_length]
  Tensor target;  // int64 [batch, max_length]
};

class DataLoader {
 public:
  // gen null: the default generator (PyTorch's DataLoader(generator=None) draws from the global
  // one). batch_size must be positive.
  DataLoader(std::shared_ptr<const GPTDataset> dataset, int64_t batch_size, bool shuffle,
             bool drop_last, Generator* gen = nullptr);

  // len(loader): the number of batches of a pass.
  int64_t size() const;
  int64_t batch_size() const { return batch_size_; }
  const GPTDataset& dataset() const { return *dataset_; }

  // One pass over the data, PyTorch's _SingleProcessDataLoaderIter. It keeps what it reads (the
  // dataset, the batch size, the flags, the generator's address), so it may outlive its loader:
  // `auto pass = DataLoader(ds, 2, true, true).iter();` is valid, as PyTorch's iterator holds its
  // loader.
  class Pass {
   public:
    std::optional<Batch> next();  // the next batch; nullopt at the end

   private:
    friend class DataLoader;
    explicit Pass(const DataLoader& loader)
        : dataset_(loader.dataset_),
          batch_size_(loader.batch_size_),
          shuffle_(loader.shuffle_),
          drop_last_(loader.drop_last_),
          gen_(loader.gen_) {}
    std::shared_ptr<const GPTDataset> dataset_;
    int64_t batch_size_;
    bool shuffle_, drop_last_;
    Generator* gen_;
    std::vector<int64_t> order_;
    bool started_ = false;
    int64_t position_ = 0;  // in order_
  };
  // iter(loader): draws the base seed now, the shuffle's seed at the first next().
  Pass iter() const;

 private:
  Generator& generator() const;
  std::shared_ptr<const GPTDataset> dataset_;
  int64_t batch_size_;
  bool shuffle_, drop_last_;
  Generator* gen_;
};

}  // namespace ember::nn
