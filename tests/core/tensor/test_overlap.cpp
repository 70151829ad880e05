// Writes through tensors that share memory (core/tensor/overlap.h): the overlap predicates, and
// every write path's checks.
//
// PyTorch's rules: a destination with internal overlap (expand) is an Error for every write but
// fill_/zero_ (all elements get one value); a source that partially overlaps a dense destination
// is an Error; and where PyTorch cannot tell (strided views) Ember copies the source
// first, so the result is always what the out-of-place op gives.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/ember.h"
#include "core/tensor/overlap.h"
#include "core/tensor/random.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::error_of;
using test::expect_error;
using test::values;

const std::string kInternal =
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation.";
const std::string kPartial =
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to "
    "a single memory location. Please clone() the tensor before performing the operation.";

Tensor arange_f(int64_t n) { return arange(0, static_cast<double>(n), 1, DType::Float32); }

// ---- the overlap predicates themselves ----

TEST(Overlap, InternalOverlapIsExactForEveryViewKind) {
  Tensor x = arange_f(24).reshape({2, 3, 4});
  EXPECT_FALSE(has_internal_overlap(x));
  EXPECT_FALSE(has_internal_overlap(x.transpose(0, 2)));
  EXPECT_FALSE(has_internal_overlap(x.slice(2, 0, None, 2)));
  EXPECT_FALSE(has_internal_overlap(x.select(1, 2)));
  EXPECT_FALSE(has_internal_overlap(x.unsqueeze(1).expand({2, 1, 3, 4})));  // size-1 dim only
  EXPECT_TRUE(has_internal_overlap(x.unsqueeze(1).expand({2, 5, 3, 4})));
  EXPECT_TRUE(has_internal_overlap(ones({1}).expand({3})));
  EXPECT_TRUE(has_internal_overlap(ones({3, 1}).expand({3, 2}).t()));
  EXPECT_FALSE(has_internal_overlap(ones({0, 1}).expand({0, 5})));  // no elements at all
  EXPECT_FALSE(has_internal_overlap(scalar_tensor(1.0)));
}

TEST(Overlap, StatusFollowsPyTorch) {
  Tensor x = arange_f(8);
  EXPECT_EQ(overlap_status(x, x), MemOverlap::Full);
  EXPECT_EQ(overlap_status(x.slice(0, 0, 4), x.slice(0, 0, 4)), MemOverlap::Full);
  EXPECT_EQ(overlap_status(x.slice(0, 0, 4), x.slice(0, 4, 8)), MemOverlap::No);
  EXPECT_EQ(overlap_status(x.slice(0, 1, 5), x.slice(0, 0, 4)), MemOverlap::Partial);
  EXPECT_EQ(overlap_status(x.view({2, 4}), x.view({2, 4}).t().t()), MemOverlap::Full);
  EXPECT_EQ(overlap_status(x.slice(0, 0, None, 2), x.slice(0, 1, None, 2)), MemOverlap::TooHard);
  EXPECT_EQ(overlap_status(x, x.clone()), MemOverlap::No);
  EXPECT_EQ(overlap_status(x, zeros({0})), MemOverlap::No);
  Tensor sq = arange_f(9).view({3, 3});
  EXPECT_EQ(overlap_status(sq, sq.t()), MemOverlap::Partial);  // same range, other strides
}

// ---- internal overlap: every write path refuses an expanded destination ----

TEST(Overlap, EveryInPlaceOpRefusesAnExpandedDestination) {
  const std::vector<std::pair<std::string, std::function<void(Tensor&)>>> writes = {
      {"copy_", [](Tensor& d) { d.copy_(arange_f(3)); }},
      {"add_", [](Tensor& d) { d.add_(ones({3})); }},
      {"add_", [](Tensor& d) { d.add_(1.0); }},
      {"add_", [](Tensor& d) { d += ones({3}); }},
      {"sub_", [](Tensor& d) { d.sub_(ones({3}), 2); }},
      {"sub_", [](Tensor& d) { d.sub_(1.0); }},
      {"mul_", [](Tensor& d) { d.mul_(2.0); }},
      {"mul_", [](Tensor& d) { d.mul_(arange_f(3)); }},
      {"div_", [](Tensor& d) { d.div_(2.0); }},
      {"div_", [](Tensor& d) { d.div_(ones({3})); }},
      {"addcmul_", [](Tensor& d) { d.addcmul_(ones({3}), ones({3})); }},
      {"addcdiv_", [](Tensor& d) { d.addcdiv_(ones({3}), ones({3})); }},
      {"lerp_", [](Tensor& d) { d.lerp_(arange_f(3), 0.5); }},
      {"lerp_", [](Tensor& d) { d.lerp_(arange_f(3), full({3}, 0.5)); }},
      {"clamp_", [](Tensor& d) { d.clamp_(0.0, 0.5); }},
      {"sqrt_", [](Tensor& d) { d.sqrt_(); }},
      {"masked_fill_",
       [](Tensor& d) {
         d.masked_fill_(tensor({1, 0, 1}).to_bool(), 5.0);
       }},
      {"set", [](Tensor& d) { d.set({1}, 5.0); }},
  };
  for (const auto& [op, write] : writes) {
    SCOPED_TRACE(op);
    Tensor base = ones({1});
    Tensor expanded = base.expand({3});
    std::string message = error_of([&] { write(expanded); });
    EXPECT_NE(message.find(op + ": " + kInternal), std::string::npos) << message;
    EXPECT_EQ(values(base), std::vector<double>{1.0}) << "the base must be untouched";
  }
}

TEST(Overlap, InternalOverlapHidesBehindOtherViews) {
  // An expanded dim moved, viewed or selected from still aliases.
  Tensor base = arange_f(3).reshape({3, 1});
  Tensor e = base.expand({3, 4}).t();  // [4, 3], stride 0 first
  expect_error([&] { e.add_(1.0); }, "add_: " + kInternal);
  Tensor row = base.expand({3, 4}).select(0, 1);  // [4] with stride 0
  expect_error([&] { row.mul_(2.0); }, "mul_: " + kInternal);
  Tensor v = base.expand({3, 4}).unsqueeze(0).view({1, 3, 4});
  expect_error([&] { v.copy_(zeros({3, 4})); }, "copy_: " + kInternal);
  EXPECT_EQ(values(base), (std::vector<double>{0, 1, 2}));
  // A single column of it has no overlap: writing it is fine.
  Tensor col = base.expand({3, 4}).select(1, 2);
  col.add_(10.0);
  EXPECT_EQ(values(base), (std::vector<double>{10, 11, 12}));
}

TEST(Overlap, RandomInPlaceFillsRefuseAnExpandedDestination) {
  // Each element would get its own random number, all stored in one place.
  Tensor base = zeros({1});
  Tensor e = base.expand({4});
  expect_error([&] { uniform_(e); }, "uniform_: " + kInternal);
  expect_error([&] { normal_(e); }, "normal_: " + kInternal);
  expect_error([&] { bernoulli_(e, 0.5); }, "bernoulli_: " + kInternal);
  EXPECT_EQ(values(base), std::vector<double>{0});
}

TEST(Overlap, FillOfAnExpandedTensorIsAllowedAsInPyTorch) {
  // torch.ones(1).expand(3).fill_(2) -> tensor([2., 2., 2.]): every element gets the same value.
  Tensor base = ones({1});
  Tensor e = base.expand({3});
  e.fill_(2.0);
  EXPECT_EQ(values(e), (std::vector<double>{2, 2, 2}));
  e.zero_();
  EXPECT_EQ(values(base), std::vector<double>{0});
}

// ---- partial overlap between the source and the destination ----

TEST(Overlap, ShiftedCopyIsAnErrorAsInPyTorch) {
  // x = torch.arange(4.); x[1:].copy_(x[:-1])  -> RuntimeError: unsupported operation: some ...
  Tensor x = arange_f(4);
  expect_error([&] { x.slice(0, 1, None).copy_(x.slice(0, None, -1)); }, "copy_: " + kPartial);
  EXPECT_EQ(values(x), (std::vector<double>{0, 1, 2, 3}));
  Tensor sq = arange_f(9).view({3, 3});
  expect_error([&] { sq.copy_(sq.t()); }, "copy_: " + kPartial);  // PyTorch raises too
  expect_error([&] { sq.add_(sq.t()); }, "add_: " + kPartial);
  EXPECT_EQ(values(sq), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(Overlap, EveryInPlaceOpRefusesAPartiallyOverlappingInput) {
  // x = torch.arange(6.); x[1:4].add_(x[0:3]) -> RuntimeError (partial overlap)
  const std::vector<std::pair<std::string, std::function<void(Tensor&, const Tensor&)>>> ops = {
      {"add_", [](Tensor& d, const Tensor& s) { d.add_(s); }},
      {"sub_", [](Tensor& d, const Tensor& s) { d.sub_(s, 0.5); }},
      {"mul_", [](Tensor& d, const Tensor& s) { d.mul_(s); }},
      {"div_", [](Tensor& d, const Tensor& s) { d.div_(s); }},
      {"addcmul_", [](Tensor& d, const Tensor& s) { d.addcmul_(ones({3}), s); }},
      {"addcdiv_", [](Tensor& d, const Tensor& s) { d.addcdiv_(s, ones({3})); }},
      {"lerp_", [](Tensor& d, const Tensor& s) { d.lerp_(s, 0.25); }},
      {"lerp_", [](Tensor& d, const Tensor& s) { d.lerp_(ones({3}), s); }},
      {"copy_", [](Tensor& d, const Tensor& s) { d.copy_(s); }},
  };
  for (const auto& [op, run] : ops) {
    SCOPED_TRACE(op);
    Tensor x = arange_f(6);
    Tensor dst = x.slice(0, 1, 4);
    expect_error([&] { run(dst, x.slice(0, 0, 3)); }, op + ": " + kPartial);
    EXPECT_EQ(values(x), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  }
}

TEST(Overlap, FullOverlapIsElementwiseAndAllowed) {
  // x[:3].add_(x[:3]) -> tensor([0., 2., 4., 3., 4., 5.])
  Tensor x = arange_f(6);
  Tensor head = x.slice(0, 0, 3);
  head.add_(x.slice(0, 0, 3));
  EXPECT_EQ(values(x), (std::vector<double>{0, 2, 4, 3, 4, 5}));
  x.mul_(x);
  EXPECT_EQ(values(x), (std::vector<double>{0, 4, 16, 9, 16, 25}));
  x.copy_(x);
  EXPECT_EQ(values(x), (std::vector<double>{0, 4, 16, 9, 16, 25}));
  x.addcmul_(x, x, 0.5);
  EXPECT_EQ(values(x), (std::vector<double>{0, 12, 144, 49.5, 144, 337.5}));
}

TEST(Overlap, StridedOverlapIsCopiedFirst) {
  // x[2:6:2].copy_(x[0:4:2]): dst {2, 4}, src {0, 2}; a naive loop would copy x[0] twice.
  Tensor x = arange_f(6);
  x.slice(0, 2, 6, 2).copy_(x.slice(0, 0, 4, 2));
  EXPECT_EQ(values(x), (std::vector<double>{0, 1, 0, 3, 2, 5}));
  // The other direction, and a longer chain: every element reads its old neighbour.
  Tensor y = arange_f(10);
  y.slice(0, 1, None, 2).copy_(y.slice(0, 0, 9, 2));  // odd <- even
  y.slice(0, 2, None, 2).copy_(y.slice(0, 1, 9, 2));  // even from 2 <- odd
  EXPECT_EQ(values(y), (std::vector<double>{0, 0, 0, 2, 2, 4, 4, 6, 6, 8}));
  // A transposed square through a strided view of itself.
  Tensor m = arange_f(16).view({4, 4});
  Tensor inner = m.slice(0, 0, None, 2).slice(1, 0, None, 2);  // [[0, 2], [8, 10]]
  inner.copy_(inner.t());
  EXPECT_EQ(values(m.slice(0, 0, None, 2).slice(1, 0, None, 2)),
            (std::vector<double>{0, 8, 2, 10}));
  // A broadcast source that is one element of a strided destination.
  Tensor z = arange_f(6);
  z.slice(0, 0, None, 2).copy_(z.select(0, 2).expand({3}));
  EXPECT_EQ(values(z), (std::vector<double>{2, 1, 2, 3, 2, 5}));
  // In-place arithmetic through strided views computes out of place first.
  Tensor u = arange_f(6);
  u.slice(0, 2, 6, 2).mul_(u.slice(0, 0, 4, 2));  // {2, 4} *= {0, 2}
  EXPECT_EQ(values(u), (std::vector<double>{0, 1, 0, 3, 8, 5}));
}

TEST(Overlap, DisjointViewsOfOneStorageAreFine) {
  // x[::2].copy_(x[1::2]) -> tensor([1., 1., 3., 3., 5., 5.])
  Tensor x = arange_f(6);
  x.slice(0, 0, None, 2).copy_(x.slice(0, 1, None, 2));
  EXPECT_EQ(values(x), (std::vector<double>{1, 1, 3, 3, 5, 5}));
  Tensor y = arange_f(6);
  y.slice(0, 0, 3).add_(y.slice(0, 3, 6));
  EXPECT_EQ(values(y), (std::vector<double>{3, 5, 7, 3, 4, 5}));
}

TEST(Overlap, MaskSharingTheDestinationsMemory) {
  // A bool tensor masked by a shifted view of itself: partial overlap, as PyTorch's check.
  Tensor b = tensor({1, 0, 1, 0}).to_bool();
  expect_error([&] { b.slice(0, 1, None).masked_fill_(b.slice(0, 0, 3), 1.0); },
               "masked_fill_: " + kPartial);
}

TEST(Overlap, AutogradPathsKeepTheChecks) {
  // The differentiable copy_ and in-place ops run the same checks before recording anything.
  Tensor src = ones({3}, DType::Float32).requires_grad_();
  Tensor dst = ones({1}).expand({3});
  expect_error([&] { dst.copy_(src); }, "copy_: " + kInternal);
  Tensor y = (arange_f(6).requires_grad_() * 1.0);
  expect_error([&] { y.slice(0, 1, 4).add_(y.slice(0, 0, 3)); }, "add_: ");
}

}  // namespace
}  // namespace ember
