// OrderedDict<Key, Value>: libtorch's torch::OrderedDict. Items keep their insertion order (so
// named_parameters() iterates in registration order, as PyTorch's), and a key finds its value
// in O(1):
//   auto params = model.named_parameters();
//   params["W_query.weight"]                 // the tensor; throws ember::Error if absent
//   if (Tensor* w = params.find("out_proj.bias")) ...   // nullptr if absent
//   params.contains("mask"); params.keys(); params.values(); params.size();
//   for (const auto& [name, tensor] : params) ...       // structured bindings, in order
//   params[0].key(), params[0].value()                  // the first item (also .first/.second)
//   params.erase("mask"); Tensor w = params.pop("w");   // edit (errors if the key is absent)
//   params.update(other); params.clear();               // append another dict's items
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/base/error.h"

namespace ember {

template <typename Key, typename Value>
class OrderedDict {
 public:
  // One (key, value) item: a std::pair (so .first/.second and structured bindings work) with
  // libtorch's key() and value().
  struct Item : std::pair<Key, Value> {
    using std::pair<Key, Value>::pair;
    const Key& key() const { return this->first; }
    Value& value() { return this->second; }
    const Value& value() const { return this->second; }
    const std::pair<Key, Value>& pair() const { return *this; }
  };
  using iterator = typename std::vector<Item>::iterator;
  using const_iterator = typename std::vector<Item>::const_iterator;

  // key_description names the keys in error messages ("Key", "Parameter", ...).
  OrderedDict() = default;
  explicit OrderedDict(std::string key_description)
      : key_description_(std::move(key_description)) {}
  OrderedDict(std::initializer_list<std::pair<Key, Value>> items) {
    for (const auto& [key, value] : items) insert(key, value);
  }
  // From and to a vector of pairs (what named tensors were before, and what the safetensors
  // writer takes), both implicit so that such code keeps compiling.
  OrderedDict(const std::vector<std::pair<Key, Value>>& items) {  // NOLINT: implicit
    for (const auto& [key, value] : items) insert(key, value);
  }
  operator std::vector<std::pair<Key, Value>>() const {  // NOLINT: implicit
    return {items_.begin(), items_.end()};
  }

  // Appends a new item; a key that is already there is an error.
  Value& insert(Key key, Value value) {
    check(index_.find(key) == index_.end(), key_description_, " '", key, "' already defined");
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().second;
  }
  // Inserts, or replaces the value of an existing key (keeping its position).
  Value& insert_or_assign(Key key, Value value) {
    if (Value* existing = find(key)) return *existing = std::move(value);
    return insert(std::move(key), std::move(value));
  }
  // std::vector's spelling of insert, kept for code written when these were vectors of pairs.
  Value& emplace_back(Key key, Value value) { return insert(std::move(key), std::move(value)); }

  // The value of `key`; throws if there is none.
  Value& operator[](const Key& key) {
    Value* value = find(key);
    check(value != nullptr, key_description_, " '", key, "' is not defined");
    return *value;
  }
  const Value& operator[](const Key& key) const { return const_cast<OrderedDict&>(*this)[key]; }
  // The index-th item, in insertion order; throws when out of range.
  Item& operator[](std::size_t index) {
    check(index < items_.size(), "OrderedDict: index ", index, " is out of range (size ",
          items_.size(), ")");
    return items_[index];
  }
  const Item& operator[](std::size_t index) const { return const_cast<OrderedDict&>(*this)[index]; }
  // A pointer to the value of `key`, or nullptr.
  Value* find(const Key& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  const Value* find(const Key& key) const { return const_cast<OrderedDict&>(*this).find(key); }
  bool contains(const Key& key) const { return index_.find(key) != index_.end(); }

  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  bool is_empty() const { return items_.empty(); }
  void clear() {
    items_.clear();
    index_.clear();
  }
  // Removes the item of `key` (the others keep their order); an error if there is none, as
  // libtorch's.
  void erase(const Key& key) { (void)pop(key); }
  // Removes the item of `key` and returns its value (Python's dict.pop); an error if none.
  Value pop(const Key& key) {
    auto it = index_.find(key);
    check(it != index_.end(), key_description_, " '", key, "' is not defined");
    const std::size_t position = it->second;
    Value value = std::move(items_[position].second);
    index_.erase(it);
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(position));
    for (std::size_t i = position; i < items_.size(); ++i) index_[items_[i].first] = i;
    return value;
  }
  // Appends every item of `other`, in its order; a key already here is an error (libtorch's
  // rule: use insert_or_assign to replace), checked before anything changes.
  void update(const OrderedDict& other) {
    for (const Item& item : other.items_) {
      check(!contains(item.first), key_description_, " '", item.first, "' already defined");
    }
    for (const Item& item : other.items_) insert(item.first, item.second);
  }
  void update(OrderedDict&& other) {
    for (const Item& item : other.items_) {
      check(!contains(item.first), key_description_, " '", item.first, "' already defined");
    }
    for (Item& item : other.items_) insert(std::move(item.first), std::move(item.second));
    other.clear();
  }

  std::vector<Key> keys() const {
    std::vector<Key> out;
    for (const Item& item : items_) out.push_back(item.first);
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    for (const Item& item : items_) out.push_back(item.second);
    return out;
  }
  const std::vector<Item>& items() const { return items_; }

  Item& front() { return (*this)[std::size_t{0}]; }
  const Item& front() const { return (*this)[std::size_t{0}]; }
  Item& back() { return (*this)[items_.size() - 1]; }
  const Item& back() const { return (*this)[items_.size() - 1]; }
  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }

 private:
  std::string key_description_ = "Key";
  std::vector<Item> items_;
  std::unordered_map<Key, std::size_t> index_;
};

}  // namespace ember
