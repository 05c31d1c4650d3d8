// core/shape.h — the extents of a Tensor, outermost first (row-major).
//
// A Shape is a short list of non-negative sizes. Shape{} is a 0-d (scalar) shape with one element.
// Axis arguments may be negative, counting from the end as in NumPy: axis -1 is the last axis.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace moelab {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> sizes) : sizes_(sizes) {}
  explicit Shape(std::vector<std::int64_t> sizes) : sizes_(std::move(sizes)) {}

  int rank() const { return static_cast<int>(sizes_.size()); }
  std::int64_t operator[](int axis) const { return sizes_[static_cast<std::size_t>(axis)]; }
  std::int64_t& operator[](int axis) { return sizes_[static_cast<std::size_t>(axis)]; }
  std::int64_t numel() const;
  const std::vector<std::int64_t>& sizes() const { return sizes_; }
  std::int64_t back() const { return sizes_.back(); }

  // The size of the axis (negative counts from the end); throws moelab::Error naming `op` if out of range.
  std::int64_t size(int axis, const char* op = "shape") const;
  // Normalises a possibly negative axis to 0..rank-1, or throws moelab::Error naming `op`.
  int normalize_axis(int axis, const char* op) const;

  // Product of the sizes before `axis`, and after it (used to see a tensor as [outer, n, inner]).
  std::int64_t outer(int axis) const;
  std::int64_t inner(int axis) const;

  bool operator==(const Shape& other) const = default;
  std::string str() const;  // "[2, 3, 4]"

 private:
  std::vector<std::int64_t> sizes_;
};

inline std::ostream& operator<<(std::ostream& out, const Shape& shape) { return out << shape.str(); }

}  // namespace moelab
