// OrderedDict editing as libtorch's torch::OrderedDict: erase, pop, update, clear; the order of
// the remaining items and the key -> position index stay right.
#include <gtest/gtest.h>

#include <string>

#include "core/base/ordered_dict.h"
#include "core/ember.h"
#include "tests/test_helpers.h"

namespace ember {
namespace {

using test::expect_error;

using Dict = OrderedDict<std::string, int>;

TEST(OrderedDictEdit, EraseKeepsTheOrderAndTheIndex) {
  Dict d = {{"a", 1}, {"b", 2}, {"c", 3}, {"d", 4}};
  d.erase("b");
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"a", "c", "d"}));
  EXPECT_EQ(d["c"], 3);
  EXPECT_EQ(d["d"], 4);
  EXPECT_EQ(d[std::size_t{1}].key(), "c");
  EXPECT_FALSE(d.contains("b"));
  expect_error([&] { d.erase("b"); }, "Key 'b' is not defined");
  d.insert("b", 5);  // back, at the end
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"a", "c", "d", "b"}));
  EXPECT_EQ(d["b"], 5);
  d.erase("a");
  d.erase("b");
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(*d.find("d"), 4);
}

TEST(OrderedDictEdit, PopReturnsTheValue) {
  Dict d = {{"x", 10}, {"y", 20}};
  EXPECT_EQ(d.pop("x"), 10);
  EXPECT_EQ(d.size(), 1u);
  EXPECT_EQ(d["y"], 20);
  expect_error([&] { d.pop("x"); }, "Key 'x' is not defined");
  Dict named("Parameter");
  expect_error([&] { named.pop("w"); }, "Parameter 'w' is not defined");
}

TEST(OrderedDictEdit, UpdateAppendsAndRefusesExistingKeys) {
  Dict d = {{"a", 1}};
  Dict other = {{"b", 2}, {"c", 3}};
  d.update(other);
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(other.size(), 2u);  // copied from
  Dict clash = {{"z", 9}, {"b", 7}};
  expect_error([&] { d.update(clash); }, "Key 'b' already defined");
  EXPECT_EQ(d.size(), 3u);  // nothing changed, not even "z"
  EXPECT_FALSE(d.contains("z"));
  d.update(Dict{{"e", 5}});
  EXPECT_EQ(d["e"], 5);
  d.clear();
  EXPECT_TRUE(d.is_empty());
  EXPECT_FALSE(d.contains("a"));
  d.insert("a", 1);
  EXPECT_EQ(d["a"], 1);
}

TEST(OrderedDictEdit, TensorDictsAreEdited) {
  OrderedDict<std::string, Tensor> state = {{"w", ones({2})}, {"b", zeros({1})}};
  Tensor w = state.pop("w");
  EXPECT_EQ(w.numel(), 2);
  state.insert("weight", w);
  EXPECT_EQ(state.keys(), (std::vector<std::string>{"b", "weight"}));
}

}  // namespace
}  // namespace ember
