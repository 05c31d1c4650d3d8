// tasks/common/plot.cpp — see plot.h.
#include "tasks/common/plot.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace moelab {

namespace {

// gnuplot strings are single-quoted; a quote inside is doubled.
std::string gp_string(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

PlotResult render(const std::filesystem::path& dir, const std::string& stem, const std::string& script) {
  PlotResult r;
  r.png = dir / (stem + ".png");
  const std::filesystem::path gp = dir / (stem + ".gp");
  {
    std::ofstream out(gp, std::ios::trunc);
    out << script;
    if (!out) {
      r.message = "cannot write " + gp.string();
      return r;
    }
  }
  if (!have_gnuplot()) {
    r.message = "gnuplot is not installed (Debian: apt-get install gnuplot-nox); the data and script are in " +
                gp.string() + ", run `gnuplot " + gp.filename().string() + "` there to draw it";
    return r;
  }
  // gnuplot runs in the run folder, so the script names its files without a path.
  const std::string command = "cd '" + dir.string() + "' && gnuplot '" + gp.filename().string() + "' 2>'" +
                              stem + ".gnuplot.log'";
  if (std::system(command.c_str()) != 0 || !std::filesystem::exists(r.png)) {
    r.message = "gnuplot failed on " + gp.string() + " (see " + (dir / (stem + ".gnuplot.log")).string() + ")";
    return r;
  }
  std::filesystem::remove(dir / (stem + ".gnuplot.log"));
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

bool have_gnuplot() {
  static const bool found = std::system("command -v gnuplot >/dev/null 2>&1") == 0;
  return found;
}

PlotResult plot_lines(const LinePlot& plot, const std::filesystem::path& dir, const std::string& stem) {
  const std::string data = stem + ".dat";
  {
    std::ofstream out(dir / data, std::ios::trunc);
    out.precision(10);
    for (const Series& s : plot.series) {
      out << "# " << s.title << "\n";
      for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
        if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) out << s.x[i] << " " << s.y[i] << "\n";
      out << "\n\n";  // two blank lines end a gnuplot data block (index i)
    }
  }
  std::ostringstream s;
  s << header(stem, plot.title, plot.xlabel, plot.ylabel) << "set key outside right\nset grid\n";
  if (plot.log_x) s << "set logscale x\n";
  if (plot.log_y) s << "set logscale y\n";
  s << "plot ";
  for (std::size_t i = 0; i < plot.series.size(); ++i)
    s << (i ? ", \\\n     " : "") << gp_string(data) << " index " << i << " using 1:2 with linespoints lw 2 pt 7 title "
      << gp_string(plot.series[i].title);
  if (plot.series.empty()) s << "NaN notitle";
  s << "\n";
  return render(dir, stem, s.str());
}

PlotResult plot_heat_map(const HeatMap& map, const std::filesystem::path& dir, const std::string& stem) {
  const std::string data = stem + ".dat";
  {
    std::ofstream out(dir / data, std::ios::trunc);
    out.precision(6);
    out << "# column row value (" << map.ylabel << " by " << map.xlabel << ")\n";
    for (std::size_t r = 0; r < map.values.size(); ++r)
      for (std::size_t c = 0; c < map.values[r].size(); ++c)
        out << c << " " << r << " " << (std::isfinite(map.values[r][c]) ? map.values[r][c] : NAN) << "\n";
  }
  std::ostringstream s;
  s << header(stem, map.title, map.xlabel, map.ylabel) << "set view map\nunset key\nset palette rgb 33,13,10\n";
  s << "set xtics (";
  for (std::size_t c = 0; c < map.column_labels.size(); ++c)
    s << (c ? ", " : "") << gp_string(map.column_labels[c]) << " " << c;
  s << ")\nset ytics (";
  for (std::size_t r = 0; r < map.row_labels.size(); ++r)
    s << (r ? ", " : "") << gp_string(map.row_labels[r]) << " " << r;
  s << ")\nset xrange [-0.5:" << (map.column_labels.size() - 0.5) << "]\nset yrange [-0.5:"
    << (map.row_labels.size() - 0.5) << "]\n";
  s << "plot " << gp_string(data) << " using 1:2:3 with image, \\\n     " << gp_string(data)
    << " using 1:2:(sprintf('%.3f', $3)) with labels font 'sans,9'\n";
  return render(dir, stem, s.str());
}

}  // namespace moelab
