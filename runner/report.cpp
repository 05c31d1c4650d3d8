// runner/report.cpp — see report.h.
#include "runner/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <tuple>

namespace moelab {

namespace {

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (std::size_t t = i; t <= j; ++t) r[order[t]] = (static_cast<double>(i) + static_cast<double>(j)) / 2.0;
    i = j + 1;
  }
  return r;
}

}  // namespace

double rank_correlation(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 3) return NAN;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : NAN;
}

double median(std::vector<double> values) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

MeanStd mean_std(const std::vector<double>& values, StdKind kind) {
  MeanStd r;
  if (values.empty()) return {NAN, NAN, 0};
  r.count = static_cast<std::int64_t>(values.size());
  // Equal values: their mean is that value and their spread exactly 0. (Summed and divided, ten
  // copies of 0.1 give a mean a last bit off and a spread of 1e-17, which made a z-score of
  // "-1.00 std" out of rounding noise.)
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  if (*low == *high) return {*low, 0.0, r.count};
  r.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  if (values.size() > 1) {
    double ss = 0;
    for (double v : values) ss += (v - r.mean) * (v - r.mean);
    const std::size_t divisor = kind == StdKind::Population ? values.size() : values.size() - 1;
    r.std = std::sqrt(ss / static_cast<double>(divisor));
  }
  return r;
}

std::vector<Series> series_by_family(const std::vector<FamilyPoint>& points) {
  std::vector<Series> out;
  for (const FamilyPoint& p : points) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Series& s) { return s.title == p.family; });
    if (it == out.end()) {
      out.push_back({p.family, {}, {}, {}, {}});
      it = out.end() - 1;
    }
    it->x.push_back(p.x);
    it->y.push_back(p.y);
    it->y_low.push_back(p.low);
    it->y_high.push_back(p.high);
  }
  for (Series& s : out) {
    std::vector<std::size_t> order(s.x.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) { return s.x[i] < s.x[j]; });
    // Bars only when some point of the family has one (a bound that is not NaN).
    const bool bars = std::any_of(s.y_low.begin(), s.y_low.end(), [](double v) { return std::isfinite(v); });
    Series sorted{s.title, {}, {}, {}, {}};
    for (std::size_t i : order) {
      sorted.x.push_back(s.x[i]), sorted.y.push_back(s.y[i]);
      if (bars) sorted.y_low.push_back(s.y_low[i]), sorted.y_high.push_back(s.y_high[i]);
    }
    s = sorted;
  }
  return out;
}

std::vector<std::string> plot_against_parameters(const std::filesystem::path& dir, const std::string& stem,
                                                 const std::string& title, const std::string& ylabel,
                                                 const std::vector<FamilyPoint>& by_total,
                                                 const std::vector<FamilyPoint>& by_active) {
  std::vector<std::string> notes;
  for (const auto& [suffix, which, points] : {std::tuple{"_total", "total (non-embedding) parameters", &by_total},
                                              std::tuple{"_active", "active parameters", &by_active}}) {
    const LinePlot p{.title = title + " vs " + which,
                     .xlabel = which,
                     .ylabel = ylabel,
                     .log_x = true,
                     .log_y = false,
                     .series = series_by_family(*points)};
    const PlotResult r = plot_lines(p, dir, stem + suffix);
    notes.push_back(r.drawn ? r.png.filename().string() : "(no PNG: " + r.message + ")");
  }
  return notes;
}

std::string format_number(double value, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

}  // namespace moelab
