// core/shape.cpp — Shape arithmetic and printing.
#include "core/shape.h"

#include "core/error.h"

namespace moelab {

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (std::int64_t s : sizes_) n *= s;
  return n;
}

int Shape::normalize_axis(int axis, const char* op) const {
  const int r = rank();
  MOELAB_CHECK(axis >= -r && axis < r, op, "axis ", axis, " is out of range for shape ", str());
  return axis < 0 ? axis + r : axis;
}

std::int64_t Shape::size(int axis, const char* op) const { return sizes_[static_cast<std::size_t>(normalize_axis(axis, op))]; }

std::int64_t Shape::outer(int axis) const {
  std::int64_t n = 1;
  for (int i = 0; i < axis; ++i) n *= sizes_[static_cast<std::size_t>(i)];
  return n;
}

std::int64_t Shape::inner(int axis) const {
  std::int64_t n = 1;
  for (int i = axis + 1; i < rank(); ++i) n *= sizes_[static_cast<std::size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (std::size_t i = 0; i < sizes_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(sizes_[i]);
  }
  return s + "]";
}

}  // namespace moelab
