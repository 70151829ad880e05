// Shape (core/base/small_shape.h) behaves as std::vector<int64_t>: every operation is checked against a
// vector doing the same, at sizes on both sides of the inline capacity (where the list moves to
// the heap) and with ranges taken from the shape itself.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "core/base/shape.h"

namespace {

using ember::Shape;
using Vec = std::vector<int64_t>;

Vec iota(std::size_t n, int64_t from = 1) {
  Vec v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = from + static_cast<int64_t>(i);
  return v;
}

void expect_same(const Shape& s, const Vec& v) {
  ASSERT_EQ(s.size(), v.size());
  EXPECT_EQ(s.empty(), v.empty());
  EXPECT_GE(s.capacity(), s.size());
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(s[i], v[i]) << "at " << i;
  EXPECT_EQ(static_cast<Vec>(s), v);
}

const std::size_t kSizes[] = {0,
                              1,
                              2,
                              Shape::kInline - 1,
                              Shape::kInline,
                              Shape::kInline + 1,
                              2 * Shape::kInline,
                              2 * Shape::kInline + 1,
                              40};

TEST(SmallShape, ConstructsAsAVector) {
  for (std::size_t n : kSizes) {
    SCOPED_TRACE(n);
    const Vec v = iota(n);
    expect_same(Shape(v), v);
    expect_same(Shape(v.begin(), v.end()), v);
    expect_same(Shape(n), Vec(n));
    expect_same(Shape(n, -7), Vec(n, -7));
  }
  expect_same(Shape{}, Vec{});
  expect_same(Shape{4}, Vec{4});  // a list of one size, as vector{4}; not four zeros
  expect_same(Shape{2, 0, -1}, Vec{2, 0, -1});
}

TEST(SmallShape, CopiesAndMovesOnBothSidesOfTheInlineCapacity) {
  for (std::size_t n : kSizes) {
    for (std::size_t m : kSizes) {
      SCOPED_TRACE(testing::Message() << n << " <- " << m);
      const Vec a = iota(n), b = iota(m, 100);
      Shape s(a);
      Shape t(b);
      Shape copy(s);
      expect_same(copy, a);
      copy = t;  // copy-assign over a list of another size
      expect_same(copy, b);
      expect_same(t, b);
      Shape moved(std::move(copy));
      expect_same(moved, b);
      expect_same(copy, Vec{});  // NOLINT: a moved-from Shape is empty and usable
      copy.push_back(5);
      expect_same(copy, Vec{5});
      s = std::move(moved);
      expect_same(s, b);
      s = s;  // self-assignment keeps the list
      expect_same(s, b);
      s.swap(t);
      expect_same(s, b);
      Shape u(a);
      swap(s, u);
      expect_same(s, a);
      expect_same(u, b);
    }
  }
}

TEST(SmallShape, GrowsAndShrinksAsAVector) {
  Shape s;
  Vec v;
  for (int64_t i = 0; i < 50; ++i) {
    s.push_back(i * 3);
    v.push_back(i * 3);
    expect_same(s, v);
  }
  while (!v.empty()) {
    s.pop_back();
    v.pop_back();
    expect_same(s, v);
  }
  for (std::size_t n : kSizes) {
    s.resize(n, 9);
    v.resize(n, 9);
    expect_same(s, v);
  }
  s.resize(3);
  v.resize(3);
  s.resize(8);  // new elements are zero, not what the heap buffer held before
  v.resize(8);
  expect_same(s, v);
  s.clear();
  expect_same(s, Vec{});
  s.reserve(100);
  EXPECT_GE(s.capacity(), 100u);
  expect_same(s, Vec{});
}

TEST(SmallShape, InsertsAndErasesAsAVector) {
  for (std::size_t n : kSizes) {
    for (std::size_t at = 0; at <= n; at += (n > 8 ? 5 : 1)) {
      SCOPED_TRACE(testing::Message() << "size " << n << " at " << at);
      const Vec base = iota(n);
      {
        Shape s(base);
        Vec v = base;
        s.insert(s.begin() + at, int64_t{-1});
        v.insert(v.begin() + at, int64_t{-1});
        expect_same(s, v);
        s.erase(s.begin() + at);
        v.erase(v.begin() + at);
        expect_same(s, v);
      }
      {
        Shape s(base);
        Vec v = base;
        s.insert(s.begin() + at, {7, 8, 9});
        v.insert(v.begin() + at, {7, 8, 9});
        expect_same(s, v);
        s.insert(s.begin() + at, 4, int64_t{-2});
        v.insert(v.begin() + at, 4, int64_t{-2});
        expect_same(s, v);
        s.erase(s.begin() + at, s.begin() + at + 5);
        v.erase(v.begin() + at, v.begin() + at + 5);
        expect_same(s, v);
      }
      {
        // A range of the shape itself, inserted into it (it may move to the heap meanwhile).
        Shape s(base);
        Vec v = base;
        const Vec own(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n - at));
        s.insert(s.begin() + at, s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n - at));
        v.insert(v.begin() + at, own.begin(), own.end());
        expect_same(s, v);
        // An element of the shape itself, pushed and inserted.
        if (n > 0) {
          s.push_back(s[0]);
          v.push_back(v[0]);
          s.insert(s.begin(), s.back());
          v.insert(v.begin(), v.back());
          expect_same(s, v);
        }
      }
    }
  }
}

TEST(SmallShape, AssignsFromItsOwnElements) {
  for (std::size_t n : kSizes) {
    SCOPED_TRACE(n);
    Shape s(iota(n));
    const Vec tail(s.begin() + static_cast<std::ptrdiff_t>(n / 2), s.end());
    s.assign(s.begin() + static_cast<std::ptrdiff_t>(n / 2), s.end());
    expect_same(s, tail);
    s.assign(3, 4);
    expect_same(s, Vec(3, 4));
    s = {1, 2};
    expect_same(s, Vec{1, 2});
  }
}

TEST(SmallShape, ComparesAndConvertsAsAVector) {
  const Shape a{2, 3}, b{2, 3}, c{2, 4}, d{2, 3, 1};
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a != b);
  EXPECT_TRUE(a != c);
  EXPECT_TRUE(a != d);
  EXPECT_TRUE(a < c);
  EXPECT_TRUE(a < d);
  EXPECT_FALSE(c < a);
  EXPECT_TRUE(a == (Vec{2, 3}));  // a vector converts to a Shape for comparison
  const Vec v = a;                // and a Shape to a vector
  EXPECT_EQ(v, (Vec{2, 3}));
  EXPECT_EQ(Shape(iota(20)), Shape(iota(20)));  // on the heap, by value
  EXPECT_EQ(a.front(), 2);
  EXPECT_EQ(a.back(), 3);
  EXPECT_EQ(a.at(1), 3);
  EXPECT_THROW(static_cast<void>(a.at(2)), std::out_of_range);
  EXPECT_EQ(Vec(a.rbegin(), a.rend()), (Vec{3, 2}));
  EXPECT_EQ(ember::shape_str(Shape(iota(8))), "[1, 2, 3, 4, 5, 6, 7, 8]");
}

}  // namespace
