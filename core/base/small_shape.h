// Shape: the sizes (or the strides) of a tensor, a list of int64.
//
// It behaves as a std::vector<int64_t> (and converts to and from one), but keeps up to kInline
// dims inside the object: making a tensor, a view, or a graph node does not allocate its shapes.
// With vectors, a tiny op (the book's 2 x 6 x 3 attention) spends a third of its time in
// malloc/free, mostly for shapes and strides of two or three dims. More dims than kInline go to
// the heap, as a vector would; nothing else changes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <new>
#include <stdexcept>
#include <vector>

namespace ember {

class Shape {
 public:
  using value_type = int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  static constexpr size_type kInline = 6;

  Shape() noexcept = default;
  explicit Shape(size_type n) { assign(n, 0); }
  Shape(size_type n, int64_t value) { assign(n, value); }
  Shape(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  template <std::input_iterator It>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit
  Shape(const Shape& other) { assign(other.begin(), other.end()); }
  Shape(Shape&& other) noexcept { take(other); }
  ~Shape() { release(); }

  Shape& operator=(const Shape& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  // The list as a std::vector (what Shape was before it kept small lists inline).
  operator std::vector<int64_t>() const { return {begin(), end()}; }  // NOLINT: implicit

  size_type size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_type capacity() const noexcept { return capacity_; }
  int64_t* data() noexcept { return data_; }
  const int64_t* data() const noexcept { return data_; }

  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  int64_t& operator[](size_type i) noexcept { return data_[i]; }
  const int64_t& operator[](size_type i) const noexcept { return data_[i]; }
  int64_t& at(size_type i) {
    if (i >= size_) throw std::out_of_range("Shape::at: index out of range");
    return data_[i];
  }
  const int64_t& at(size_type i) const {
    if (i >= size_) throw std::out_of_range("Shape::at: index out of range");
    return data_[i];
  }
  int64_t& front() noexcept { return data_[0]; }
  const int64_t& front() const noexcept { return data_[0]; }
  int64_t& back() noexcept { return data_[size_ - 1]; }
  const int64_t& back() const noexcept { return data_[size_ - 1]; }

  void reserve(size_type n) {
    if (n > capacity_) grow_to(n);
  }
  void clear() noexcept { size_ = 0; }
  void resize(size_type n, int64_t value = 0) {
    reserve(n);
    if (n > size_) std::fill(data_ + size_, data_ + n, value);
    size_ = n;
  }
  void push_back(int64_t value) {
    if (size_ == capacity_) grow_to(capacity_ * 2);  // `value` is a copy: safe if it was ours
    data_[size_++] = value;
  }
  void emplace_back(int64_t value) { push_back(value); }
  void pop_back() noexcept { --size_; }

  void assign(size_type n, int64_t value) {
    size_ = 0;
    resize(n, value);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    if constexpr (std::forward_iterator<It>) {
      const auto n = static_cast<size_type>(std::distance(first, last));
      if (n > capacity_) {
        Shape fresh;  // `first` may point into this shape
        fresh.grow_to(n);
        std::copy(first, last, fresh.data_);
        fresh.size_ = n;
        *this = std::move(fresh);
        return;
      }
      std::copy(first, last, data_);  // copying forward is safe within one array
      size_ = n;
    } else {
      size_ = 0;
      for (; first != last; ++first) push_back(*first);
    }
  }
  void assign(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }

  iterator insert(const_iterator pos, int64_t value) { return insert(pos, size_type{1}, value); }
  iterator insert(const_iterator pos, size_type n, int64_t value) {
    const size_type at = static_cast<size_type>(pos - data_);
    reserve(size_ + n);  // `value` is a copy: safe if it was ours
    std::move_backward(data_ + at, data_ + size_, data_ + size_ + n);
    std::fill(data_ + at, data_ + at + n, value);
    size_ += n;
    return data_ + at;
  }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const Shape values(first, last);  // a copy first: the range may be part of this shape
    const size_type at = static_cast<size_type>(pos - data_), n = values.size();
    reserve(size_ + n);
    std::move_backward(data_ + at, data_ + size_, data_ + size_ + n);
    std::copy(values.begin(), values.end(), data_ + at);
    size_ += n;
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_type a = static_cast<size_type>(first - data_);
    const size_type b = static_cast<size_type>(last - data_);
    std::copy(data_ + b, data_ + size_, data_ + a);
    size_ -= b - a;
    return data_ + a;
  }
  void swap(Shape& other) noexcept {
    Shape tmp(std::move(other));
    other = std::move(*this);
    *this = std::move(tmp);
  }

  friend bool operator==(const Shape& a, const Shape& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator<(const Shape& a, const Shape& b) noexcept {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const noexcept { return data_ != inline_; }
  void release() noexcept {
    if (on_heap()) ::operator delete(data_);
    data_ = inline_;
    size_ = 0;
    capacity_ = kInline;
  }
  // Moves `other`'s list here (this one empty and inline) and leaves `other` empty.
  void take(Shape& other) noexcept {
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
      other.data_ = other.inline_;
      other.capacity_ = kInline;
    } else {
      std::copy(other.inline_, other.inline_ + other.size_, inline_);
    }
    size_ = other.size_;
    other.size_ = 0;
  }
  void grow_to(size_type n) {
    n = std::max(n, kInline * 2);
    auto* fresh = static_cast<int64_t*>(::operator new(n * sizeof(int64_t)));
    std::copy(data_, data_ + size_, fresh);
    if (on_heap()) ::operator delete(data_);
    data_ = fresh;
    capacity_ = n;
  }

  int64_t* data_ = inline_;
  size_type size_ = 0;
  size_type capacity_ = kInline;
  int64_t inline_[kInline];
};

inline void swap(Shape& a, Shape& b) noexcept { a.swap(b); }

}  // namespace ember
