// Editing a state dict before loading it (OrderedDict's erase / pop / insert): a key removed or
// renamed shows in load_state_dict's missing / unexpected lists, as PyTorch's _IncompatibleKeys.
#include <gtest/gtest.h>

#include "core/ember.h"
#include "nn/container.h"
#include "nn/layers.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;

TEST(StateDictEdit, RemovedAndRenamedKeysAreReported) {
  manual_seed(0);
  nn::Linear source(3, 2), target(3, 2);
  nn::StateDict sd = source.state_dict();
  sd.erase("bias");
  nn::LoadResult removed = target.load_state_dict(sd, /*strict=*/false);
  EXPECT_EQ(removed.missing_keys, (std::vector<std::string>{"bias"}));
  EXPECT_TRUE(removed.unexpected_keys.empty());
  EXPECT_TRUE(equal(target.weight, source.weight));  // what was there is loaded
  EXPECT_FALSE(equal(target.bias, source.bias));

  // Renamed: "weight" -> "w" is one missing and one unexpected key.
  nn::StateDict renamed = source.state_dict();
  renamed.insert("w", renamed.pop("weight"));
  nn::LoadResult r = target.load_state_dict(renamed, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"weight"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"w"}));
  EXPECT_TRUE(equal(target.bias, source.bias));
  expect_error([&] { target.load_state_dict(renamed); },
               "Missing key(s) in state_dict: \"weight\". \n\tUnexpected key(s) in state_dict: "
               "\"w\".");
  // Put back under its name, the dict loads strictly.
  renamed.insert("weight", renamed.pop("w"));
  EXPECT_TRUE(target.load_state_dict(renamed).missing_keys.empty());
  EXPECT_TRUE(equal(target.weight, source.weight));
}

}  // namespace
}  // namespace ember
