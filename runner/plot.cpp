// runner/plot.cpp — see plot.h.
#include "runner/plot.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "runner/checked_file.h"
#include "runner/subprocess.h"

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

// A folder of its own for one gnuplot call, made new inside `dir` (mkdtemp: a fresh name, mode
// 0700, that nobody else can have prepared), removed with what is in it when this goes away.
class PrivateFolder {
 public:
  PrivateFolder(const std::filesystem::path& dir, const std::string& stem) {
    std::string pattern = (dir / (".plot." + stem + ".XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw Error("cannot create a folder for drawing '" + stem + ".png' in '" + dir.string() + "': " +
                  std::strerror(errno));
    path_ = pattern;
  }
  ~PrivateFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  PrivateFolder(const PrivateFolder&) = delete;
  PrivateFolder& operator=(const PrivateFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

PlotResult render(const std::filesystem::path& dir, const std::string& stem, const std::string& script) {
  PlotResult r;
  r.png = dir / (stem + ".png");
  const std::filesystem::path gp = dir / (stem + ".gp"), log = dir / (stem + ".gnuplot.log");
  write_file_atomic(gp, script);  // the script a user runs to redraw: it writes stem.png
  if (!have_gnuplot()) {
    // Written into the run's summary, so it names the script by its file name alone: the summary
    // stays the same wherever the run folder is (or is moved to), as the jobs tests require.
    r.message = "gnuplot is not installed (Debian: apt-get install gnuplot-nox); the data and script are in the run "
                "folder: run `gnuplot " + gp.filename().string() + "` there to draw it";
    return r;
  }
  // gnuplot opens its output and moelab its log by name, and an open by name follows a link: a
  // run folder from someone else with `fig.gnuplot.log` linked to ~/thesis.tex would have emptied
  // the thesis. So gnuplot draws into a folder made new for this call (the same script, with only
  // its `set output` line pointing there) and writes its log there; the finished picture is then
  // renamed into the run folder, which replaces whatever entry has its name, a link included,
  // without touching a link's target. A picture that failed is removed, so an old one is never
  // taken for the new one; the log of a failure is kept beside the script.
  std::error_code ec;
  const PrivateFolder work(dir, stem);
  const std::string output_line = "set output " + gp_string(stem + ".png") + "\n";
  const std::size_t at = script.find(output_line);
  if (at == std::string::npos) throw Error("plot '" + stem + "': the script sets no output " + gp_string(stem + ".png"));
  const std::filesystem::path drawn = work.path() / (stem + ".png"), work_log = work.path() / (stem + ".gnuplot.log");
  const std::filesystem::path work_script = work.path() / (stem + ".gp");
  std::string private_script = script;
  private_script.replace(at, output_line.size(),
                         "set output " + gp_string((work.path().filename() / (stem + ".png")).string()) + "\n");
  write_file_atomic(work_script, private_script);
  // No shell: gnuplot and its one argument are handed to execv as they are, the folder is entered
  // with chdir (runner/subprocess.h), so quotes, ';', '$(...)' or newlines in the run
  // folder's name are only characters of a name. gnuplot runs in the run folder, so the script
  // names its data files without a path.
  const std::filesystem::path in_dir = work.path().filename();  // the private folder, from the run folder
  const ProgramResult run = run_program({gnuplot_path().string(), (in_dir / work_script.filename()).string()}, dir,
                                        in_dir / work_log.filename());
  auto fail = [&](const std::string& message) {
    std::filesystem::remove(r.png, ec);  // an old picture would be taken for this one
    std::rename(work_log.c_str(), log.c_str());  // kept for the user (a link at `log` is replaced)
    throw Error(message);
  };
  if (!run.ok()) fail("gnuplot failed on '" + gp.string() + "' (" + run.describe() + "): " + log_excerpt(work_log));
  // gnuplot exits with status 0 even when it could not write the whole PNG (a full disk), so the
  // PNG is checked too.
  if (!png_complete(drawn)) {
    const bool exists = std::filesystem::exists(drawn, ec);
    fail("gnuplot did not write a complete '" + r.png.string() + "' (" +
         (exists ? "the file ends before the PNG's end chunk: is the disk full?" : "no file: " + log_excerpt(work_log)) + ")");
  }
  if (std::rename(drawn.c_str(), r.png.c_str()) != 0) {
    const int error = errno;
    fail("cannot rename '" + drawn.string() + "' to '" + r.png.string() + "': " + std::strerror(error));
  }
  std::filesystem::remove(log, ec);  // the log of an earlier failure, if any (a link itself, not its target)
  r.drawn = true;
  return r;
}

std::string header(const std::string& stem, const std::string& title, const std::string& xlabel,
                   const std::string& ylabel) {
  std::ostringstream s;
  s << "# Drawn by moelab (runner/plot.cpp); run `gnuplot " << stem << ".gp` in this folder to redraw.\n"
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
