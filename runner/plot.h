// runner/plot.h — line plots as PNG files, drawn by gnuplot (Debian's gnuplot-nox).
//
// A plot is a few named series of (x, y) points. plot_lines writes, into the run folder,
//   <stem>.dat   the points, one gnuplot data block per series (readable, also for other tools)
//   <stem>.gp    the gnuplot script that draws them
// and runs `gnuplot <stem>.gp` in that folder to make <stem>.png (with no shell: the folder's name
// may hold any character; runner/subprocess.h). Without gnuplot on the PATH the run does not
// fail: the function returns false with a message saying so, and the .dat/.gp files stay, so
// `gnuplot <stem>.gp` can draw the picture later on a machine that has it. Anything else that goes
// wrong throws moelab::Error naming the file: the .dat or .gp cannot be written (a full disk:
// runner/checked_file.h), gnuplot exits with an error (its log's first lines are in the
// message), or the PNG it leaves is not complete. gnuplot exits with status 0 when it could not
// write the whole picture, so the PNG is checked: the PNG signature first, the IEND chunk last; a
// cut PNG is removed.
//
//   LinePlot p{.title = "Largest book memorized", .xlabel = "total parameters", .ylabel = "entries",
//              .log_x = true};
//   p.series.push_back({"dense", {1e5, 2e5}, {500, 1000}});
//   p.series.push_back({"moe", {1e5, 2e5}, {600, 1500}, {500, 1000}, {1000, 1500}});  // with bars
//   PlotResult r = plot_lines(p, run_dir.path(), "fig4a_total");
//
// A plot with no point to draw writes its .dat and .gp files but no PNG (gnuplot refuses an empty
// plot): drawn is false and the message says why.
//
// heat_map draws a matrix of values (rows and columns with labels) the same way, numbers printed
// in the cells unless show_values is false (a wide map, e.g. expert load over many steps); an
// empty column label leaves that column's tic unlabelled.
#pragma once

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace moelab {

struct Series {
  std::string title;
  std::vector<double> x, y;
  // Optional error bars, as absolute bounds (mean - std and mean + std, or a range over seeds):
  // empty for none, else one per point. Drawn as gnuplot's yerrorlines.
  std::vector<double> y_low, y_high;
  bool has_bars() const { return !y_low.empty() && y_low.size() == y.size() && y_high.size() == y.size(); }
};

struct LinePlot {
  std::string title, xlabel, ylabel;
  bool log_x = false, log_y = false;
  std::vector<Series> series;
};

struct HeatMap {
  std::string title, xlabel, ylabel;
  std::vector<std::string> column_labels, row_labels;
  std::vector<std::vector<double>> values;  // [rows][columns]; NaN for a missing cell
  bool show_values = true;                  // print each cell's value in it
  // Optional, the shape of values: each cell's spread (the std over seeds), printed under its value
  // as "± 0.004" when show_values (the papers' maps with seed error bars); empty for none.
  std::vector<std::vector<double>> spread = {};
  double color_min = NAN, color_max = NAN;  // the colour scale's range (NaN: the data's), so that
                                            // maps drawn side by side share one scale
};

struct PlotResult {
  bool drawn = false;            // the PNG exists
  std::filesystem::path png;     // <dir>/<stem>.png
  std::string message;           // why not, when not drawn
};

// True when path is a whole PNG file: the 8-byte signature first and the IEND chunk last.
bool png_complete(const std::filesystem::path& path);

// True when a `gnuplot` program is on the PATH (checked once).
bool have_gnuplot();

PlotResult plot_lines(const LinePlot& plot, const std::filesystem::path& dir, const std::string& stem);
PlotResult plot_heat_map(const HeatMap& map, const std::filesystem::path& dir, const std::string& stem);

}  // namespace moelab
