// tasks/common/plot.cpp — see plot.h.
#include "tasks/common/plot.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tasks/common/checked_file.h"
#include "tasks/common/subprocess.h"

namespace moelab {

namespace {

// gnuplot strings are single-quoted; a quote inside is doubled.
std::string gp_string(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// gnuplot's path on $PATH, looked up once; empty when it is not installed.
const std::filesystem::path& gnuplot_path() {
  static const std::filesystem::path found = find_program("gnuplot").value_or(std::filesystem::path());
  return found;
}

// The first lines of a gnuplot log, for an error message.
std::string log_excerpt(const std::filesystem::path& log) {
  std::ifstream in(log);
  std::string text, line;
  for (int i = 0; i < 3 && std::getline(in, line); ++i) text += (text.empty() ? "" : " / ") + line;
  return text.empty() ? "no message" : text;
}

PlotResult render(const std::filesystem::path& dir, const std::string& stem, const std::string& script) {
  PlotResult r;
  r.png = dir / (stem + ".png");
  const std::filesystem::path gp = dir / (stem + ".gp"), log = dir / (stem + ".gnuplot.log");
  write_file_atomic(gp, script);
  if (!have_gnuplot()) {
    // Written into the run's summary, so it names the script by its file name alone: the summary
    // stays the same wherever the run folder is (or is moved to), as the jobs tests require.
    r.message = "gnuplot is not installed (Debian: apt-get install gnuplot-nox); the data and script are in the run "
                "folder: run `gnuplot " + gp.filename().string() + "` there to draw it";
    return r;
  }
  // gnuplot runs in the run folder, so the script names its files without a path. It exits with
  // status 0 even when it could not write the whole PNG (a full disk), so the PNG is checked too.
  // An old picture goes first, so it is never taken for the new one (a link is left alone).
  std::error_code ec;
  if (std::filesystem::is_regular_file(std::filesystem::symlink_status(r.png, ec))) std::filesystem::remove(r.png, ec);
  // No shell: gnuplot and its one argument are handed to execv as they are, the folder is entered
  // with chdir (tasks/common/subprocess.h), so quotes, ';', '$(...)' or newlines in the run
  // folder's name are only characters of a name.
  const ProgramResult run = run_program({gnuplot_path().string(), gp.filename().string()}, dir, log.filename());
  if (!run.ok()) {
    std::filesystem::remove(r.png, ec);
    throw Error("gnuplot failed on '" + gp.string() + "' (" + run.describe() + "): " + log_excerpt(log));
  }
  if (!png_complete(r.png)) {
    const bool exists = std::filesystem::exists(r.png, ec);
    std::filesystem::remove(r.png, ec);
    throw Error("gnuplot did not write a complete '" + r.png.string() + "' (" +
                (exists ? "the file ends before the PNG's end chunk: is the disk full?"
                        : "no file: " + log_excerpt(log)) +
                ")");
  }
  std::filesystem::remove(log, ec);
  r.drawn = true;
  return r;
}

std::string header(const std::string& stem, const std::string& title, const std::string& xlabel,
                   const std::string& ylabel) {
  std::ostringstream s;
  s << "# Drawn by moelab (tasks/common/plot.cpp); run `gnuplot " << stem << ".gp` in this folder to redraw.\n"
    << "set terminal pngcairo size 900,600 font 'sans,11'\n"
    << "set output " << gp_string(stem + ".png") << "\n"
    << "set title " << gp_string(title) << "\n"
    << "set xlabel " << gp_string(xlabel) << "\n"
    << "set ylabel " << gp_string(ylabel) << "\n";
  return s.str();
}

}  // namespace

bool png_complete(const std::filesystem::path& path) {
  static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  static const unsigned char end_chunk[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size < sizeof signature + sizeof end_chunk) return false;
  std::ifstream in(path, std::ios::binary);
  char head[8], tail[12];
  in.read(head, sizeof head);
  in.seekg(static_cast<std::streamoff>(size - sizeof tail));
  in.read(tail, sizeof tail);
  return in && std::memcmp(head, signature, sizeof head) == 0 && std::memcmp(tail, end_chunk, sizeof tail) == 0;
}

bool have_gnuplot() { return !gnuplot_path().empty(); }

PlotResult plot_lines(const LinePlot& plot, const std::filesystem::path& dir, const std::string& stem) {
  const std::string data = stem + ".dat";
  std::size_t points = 0;
  {
    std::ostringstream out;
    out.precision(10);
    for (const Series& s : plot.series) {
      out << "# " << s.title << (s.has_bars() ? " (x, y, low, high)" : "") << "\n";
      for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
        if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
        out << s.x[i] << " " << s.y[i];
        // A bar with an undefined bound (one seed: no std) is drawn as no bar.
        if (s.has_bars())
          out << " " << (std::isfinite(s.y_low[i]) ? s.y_low[i] : s.y[i]) << " "
              << (std::isfinite(s.y_high[i]) ? s.y_high[i] : s.y[i]);
        out << "\n";
        ++points;
      }
      out << "\n\n";  // two blank lines end a gnuplot data block (index i)
    }
    write_file_atomic(dir / data, out.str());
  }
  std::ostringstream s;
  s << header(stem, plot.title, plot.xlabel, plot.ylabel) << "set key outside right\nset grid\n";
  if (plot.log_x) s << "set logscale x\n";
  if (plot.log_y) s << "set logscale y\n";
  // Error bars get a margin above and below: autoscaling ends the y axis at the extreme values, so
  // a bar's cap there would be drawn on the frame and hidden by it. Only on a linear y axis (on a
  // log one the margin would stretch the axis a whole decade) and never on x (there it would push
  // the axis out to the next tic: a run of steps 0..1000 drawn from -200 to 1200).
  bool bars = false;
  for (const Series& series : plot.series) bars = bars || series.has_bars();
  if (bars && !plot.log_y) s << "set offsets 0, 0, graph 0.05, graph 0.05\n";
  s << "plot ";
  for (std::size_t i = 0; i < plot.series.size(); ++i)
    s << (i ? ", \\\n     " : "") << gp_string(data) << " index " << i
      << (plot.series[i].has_bars() ? " using 1:2:3:4 with yerrorlines lw 2 pt 7 title "
                                    : " using 1:2 with linespoints lw 2 pt 7 title ")
      << gp_string(plot.series[i].title);
  if (plot.series.empty()) s << "NaN notitle";
  s << "\n";
  if (points == 0) {
    write_file_atomic(dir / (stem + ".gp"), s.str());
    PlotResult r;
    r.png = dir / (stem + ".png");
    r.message = "no point to plot yet";
    std::filesystem::remove(r.png);  // an earlier report's picture would show other data
    return r;
  }
  return render(dir, stem, s.str());
}

PlotResult plot_heat_map(const HeatMap& map, const std::filesystem::path& dir, const std::string& stem) {
  const std::string data = stem + ".dat";
  bool spread = map.spread.size() == map.values.size();
  for (std::size_t r = 0; spread && r < map.values.size(); ++r) spread = map.spread[r].size() == map.values[r].size();
  {
    std::ostringstream out;
    out.precision(6);
    out << "# column row value" << (spread ? " spread" : "") << " (" << map.ylabel << " by " << map.xlabel << ")\n";
    for (std::size_t r = 0; r < map.values.size(); ++r)
      for (std::size_t c = 0; c < map.values[r].size(); ++c) {
        out << c << " " << r << " " << (std::isfinite(map.values[r][c]) ? map.values[r][c] : NAN);
        if (spread) out << " " << (std::isfinite(map.spread[r][c]) ? map.spread[r][c] : NAN);
        out << "\n";
      }
    write_file_atomic(dir / data, out.str());
  }
  std::ostringstream s;
  s << header(stem, map.title, map.xlabel, map.ylabel) << "set view map\nunset key\nset palette rgb 33,13,10\n";
  s << "set xtics (";
  bool first = true;
  for (std::size_t c = 0; c < map.column_labels.size(); ++c) {
    if (map.column_labels[c].empty()) continue;
    s << (first ? "" : ", ") << gp_string(map.column_labels[c]) << " " << c;
    first = false;
  }
  s << ")\nset ytics (";
  for (std::size_t r = 0; r < map.row_labels.size(); ++r)
    s << (r ? ", " : "") << gp_string(map.row_labels[r]) << " " << r;
  s << ")\nset xrange [-0.5:" << (map.column_labels.size() - 0.5) << "]\nset yrange [-0.5:"
    << (map.row_labels.size() - 0.5) << "]\n";
  if (std::isfinite(map.color_min) && std::isfinite(map.color_max) && map.color_min < map.color_max)
    s << "set cbrange [" << map.color_min << ":" << map.color_max << "]\n";
  if (!map.show_values) {
    s << "set colorbox\nplot " << gp_string(data) << " using 1:2:3 with image\n";
  } else {
    // A missing cell (nan in the data: gnuplot's valid() is false) gets no label; a cell without a
    // spread (one seed) shows its value alone.
    s << "plot " << gp_string(data) << " using 1:2:3 with image, \\\n     " << gp_string(data)
      << (spread ? " using 1:2:(!valid(3) ? '' : valid(4) ? sprintf(\"%.3f\\n± %.3f\", $3, $4) : sprintf('%.3f', $3))"
                 : " using 1:2:(!valid(3) ? '' : sprintf('%.3f', $3))")
      << " with labels font 'sans,9'\n";
  }
  return render(dir, stem, s.str());
}

}  // namespace moelab
