// core/tensor_print.cpp — format_tensor and operator<< (see the header for the layout).
#include "core/tensor_print.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace moelab {
namespace {

constexpr std::int64_t kGap = -1;  // "..." in a list of kept indices
constexpr std::int64_t kPrefix = 7;  // "tensor("

// The indices of one dimension that are printed: all of them, or the first and last `edge` with a
// gap between when eliding (and the dimension is longer than 2 * edge).
std::vector<std::int64_t> kept(std::int64_t n, bool elide, std::int64_t edge) {
  std::vector<std::int64_t> out;
  if (!elide || n <= 2 * edge) {
    for (std::int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  for (std::int64_t i = 0; i < edge; ++i) out.push_back(i);
  out.push_back(kGap);
  for (std::int64_t i = n - edge; i < n; ++i) out.push_back(i);
  return out;
}

class Printer {
 public:
  Printer(const Tensor& t, const PrintOptions& o) : o_(o), shape_(t.shape().sizes()), integer_(t.dtype() == DType::Int32) {
    const Tensor host = t.to(Device::cpu());
    if (t.dtype() == DType::Float64) {
      values_ = host.to_vector<double>();
    } else if (t.dtype() == DType::Float32 || t.dtype() == DType::BFloat16) {  // bfloat16 widens exactly
      const std::vector<float> v = host.to_vector<float>();
      values_.assign(v.begin(), v.end());
    } else {
      const std::vector<std::int32_t> v = host.to_vector<std::int32_t>();
      values_.assign(v.begin(), v.end());
    }
    elide_ = t.numel() > o.threshold;
    strides_.assign(shape_.size(), 1);
    for (std::size_t d = shape_.size(); d-- > 1;) strides_[d - 1] = strides_[d] * shape_[d];
    // Fixed or scientific notation, and one width for every element that is shown.
    std::vector<double> shown;
    collect(0, 0, shown);
    for (double v : shown)
      if (!integer_ && std::isfinite(v) && v != 0 && (std::fabs(v) < 1e-4 || std::fabs(v) >= 1e8)) scientific_ = true;
    for (double v : shown) width_ = std::max<std::int64_t>(width_, static_cast<std::int64_t>(number(v).size()));
  }

  std::string body() {
    if (shape_.empty()) return pad(number(values_.empty() ? 0.0 : values_[0]));
    std::string out;
    render(0, 0, out);
    return out;
  }

 private:
  void collect(std::size_t dim, std::int64_t offset, std::vector<double>& out) const {
    if (shape_.empty()) {
      if (!values_.empty()) out.push_back(values_[0]);
      return;
    }
    for (std::int64_t i : kept(shape_[dim], elide_, o_.edge_items)) {
      if (i == kGap) continue;
      if (dim + 1 == shape_.size()) out.push_back(values_[static_cast<std::size_t>(offset + i)]);
      else collect(dim + 1, offset + i * strides_[dim], out);
    }
  }

  std::string number(double v) const {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[64];
    if (integer_) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    else std::snprintf(buf, sizeof buf, scientific_ ? "%.*e" : "%.*f", o_.precision, v);
    return buf;
  }

  std::string pad(const std::string& s) const {
    return std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, width_ - static_cast<std::int64_t>(s.size()))),
                       ' ') + s;
  }

  // Dimension `dim` of the block at `offset`, written where column kPrefix + dim holds its '['.
  void render(std::size_t dim, std::int64_t offset, std::string& out) const {
    out += '[';
    const std::vector<std::int64_t> idx = kept(shape_[dim], elide_, o_.edge_items);
    const std::int64_t column = kPrefix + static_cast<std::int64_t>(dim) + 1;  // where this level's items start
    if (dim + 1 == shape_.size()) {
      std::int64_t at = column;
      for (std::size_t j = 0; j < idx.size(); ++j) {
        const std::string item = idx[j] == kGap ? std::string("...") : pad(number(values_[static_cast<std::size_t>(offset + idx[j])]));
        if (j > 0) {
          if (at + 2 + static_cast<std::int64_t>(item.size()) + 1 > o_.line_width) {
            out += ",\n" + std::string(static_cast<std::size_t>(column), ' ');
            at = column;
          } else {
            out += ", ";
            at += 2;
          }
        }
        out += item;
        at += static_cast<std::int64_t>(item.size());
      }
    } else {
      // Between blocks: one line break per dimension below this one's children.
      const std::string separator = "," + std::string(shape_.size() - dim - 1, '\n') +
                                    std::string(static_cast<std::size_t>(column), ' ');
      for (std::size_t j = 0; j < idx.size(); ++j) {
        if (j > 0) out += separator;
        if (idx[j] == kGap) out += "...";
        else render(dim + 1, offset + idx[j] * strides_[dim], out);
      }
    }
    out += ']';
  }

  const PrintOptions& o_;
  std::vector<std::int64_t> shape_;  // the sizes, [] for a 0-d tensor
  bool integer_ = false, elide_ = false, scientific_ = false;
  std::vector<double> values_;
  std::vector<std::int64_t> strides_;
  std::int64_t width_ = 0;
};

}  // namespace

std::string format_tensor(const Tensor& t, const PrintOptions& options) {
  if (!t.defined()) return "tensor(undefined)";
  MOELAB_CHECK(options.precision >= 0 && options.precision <= 30 && options.edge_items >= 1 && options.threshold >= 0,
               "format_tensor", "print options out of range: precision ", options.precision, " (0-30), edge_items ",
               options.edge_items, " (>= 1), threshold ", options.threshold, " (>= 0)");
  std::ostringstream suffix;
  if (t.dtype() != DType::Float32) suffix << ", dtype=" << t.dtype();
  if (!t.device().is_cpu()) suffix << ", device=" << t.device();
  if (t.numel() == 0) return "tensor([], size=" + t.shape().str() + suffix.str() + ")";
  return "tensor(" + Printer(t, options).body() + suffix.str() + ")";
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << format_tensor(t); }

}  // namespace moelab
