// runner/report.h — small helpers the experiments' reports share: rank correlation, mean
// and standard deviation, and turning (family, x, y) points into plot lines.
//
// The papers' claims are about which parameter count a quantity follows ("memorization tracks
// total parameters"; "reasoning tracks active parameters"). With a handful of models the honest
// number for "follows" is a rank correlation: Spearman's rho between the quantity and each count.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runner/plot.h"

namespace moelab {

// Spearman rank correlation of two equally long samples (ties get their mean rank); NaN for
// fewer than 3 points or a constant sample.
double rank_correlation(const std::vector<double>& a, const std::vector<double>& b);

struct MeanStd {
  double mean = 0, std = 0;  // std: as asked (below); 0 for one value
  std::int64_t count = 0;    // how many values (seeds) the two are over: a spread needs 2
};
// Sample: the sample standard deviation, sum of squares / (n - 1) (the default: an estimate of the
// spread from a few seeds). Population: / n, what numpy's np.std computes by default, for figures
// that must match a paper's code that used it.
enum class StdKind { Sample, Population };
MeanStd mean_std(const std::vector<double>& values, StdKind kind = StdKind::Sample);

// The median: the middle value, or the mean of the two middle ones for an even count; NaN for none.
double median(std::vector<double> values);

struct FamilyPoint {
  std::string family;  // one plot line per family ("dense", "moe-d64", ...)
  double x = 0, y = 0;
  double low = NAN, high = NAN;  // an error bar's bounds (mean -+ std, a range over seeds); NaN: none
};
// One Series per family, in order of first appearance, each sorted by x; with error bars when
// some point of the family has one.
std::vector<Series> series_by_family(const std::vector<FamilyPoint>& points);

// The papers' figures: a quantity against total (non-embedding) parameters and against active
// parameters, one line per family, log x; drawn as <stem>_total.png and <stem>_active.png. Returns
// one line per plot for the summary: the PNG's file name (in dir), or why there is none.
std::vector<std::string> plot_against_parameters(const std::filesystem::path& dir, const std::string& stem,
                                                 const std::string& title, const std::string& ylabel,
                                                 const std::vector<FamilyPoint>& by_total,
                                                 const std::vector<FamilyPoint>& by_active);

// printf-style formatting of one number ("%.2f").
std::string format_number(double value, const char* format);

}  // namespace moelab
