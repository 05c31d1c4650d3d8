// tasks/common/job_grid.cpp — see job_grid.h.
#include "tasks/common/job_grid.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.h"

namespace moelab {

void add_job_settings(Settings& s, const std::string& example_point) {
  s.add_text("mode", "all",
             "all: run the missing points, then report; train: run them, no report; list: print a command per "
             "missing point; point: run one; report: only gather",
             {"all", "train", "list", "point", "report"});
  s.add_text("point", "none", "the point to run with mode=point, e.g. " + example_point + " (mode=list prints them)");
  s.may_change_on_resume({"mode", "point"});
}

void validate_job_settings(const Settings& s, const std::vector<std::string>& points) {
  const std::string mode = s.text("mode"), point = s.text("point");
  if (mode != "point") {
    if (point != "none") throw UsageError("point is only used with mode=point (this is mode=" + mode + ")");
    return;
  }
  if (point == "none") throw UsageError("mode=point needs --set point=NAME (mode=list prints the names)");
  std::string names;
  for (const std::string& p : points) {
    if (p == point) return;
    if (names.size() < 200) names += (names.empty() ? "" : ", ") + p;
  }
  throw UsageError("point '" + point + "' is not in this grid (its points: " + names +
                   (names.size() >= 200 ? ", ..." : "") + ")");
}

std::uint64_t replicate_seed(std::uint64_t run_seed, std::int64_t seed) {
  return run_seed + static_cast<std::uint64_t>(seed) * 0x9E3779B97F4A7C15ULL;
}

std::string point_file(const std::string& name) { return "points/" + name + ".json"; }
std::string point_curve_file(const std::string& name) { return "points/" + name + ".csv"; }

bool point_done(const RunDir& dir, const std::string& name) {
  return std::filesystem::exists(dir.file(point_file(name)));
}

void write_point(const RunDir& dir, const std::string& name, const nlohmann::ordered_json& result) {
  std::filesystem::create_directories(dir.file("points"));
  dir.write_json(point_file(name), result);
}

std::optional<nlohmann::json> read_point(const RunDir& dir, const std::string& name) {
  const std::filesystem::path path = dir.file(point_file(name));
  std::ifstream in(path);
  if (!in) return std::nullopt;
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw Error("cannot read the point result '" + path.string() + "': " + e.what() +
                " (remove it to run the point again)");
  }
}

std::string gather_curves(const RunDir& dir, const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    if (!point_done(dir, name)) continue;
    std::ifstream in(dir.file(point_curve_file(name)));
    if (!in) continue;
    std::string header, line;
    std::getline(in, header);
    if (out.empty()) out = header + "\n";
    while (std::getline(in, line))
      if (!line.empty()) out += line + "\n";
  }
  return out;
}

std::string shell_word(const std::string& w) {
  for (char c : w)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string("_./-=,:+").find(c) != std::string::npos)) {
      std::string q = "'";
      for (char d : w) q += d == '\'' ? std::string("'\\''") : std::string(1, d);
      return q + "'";
    }
  return w.empty() ? "''" : w;
}

namespace {

// The --set options that reproduce ctx.settings on top of ctx.preset's (mode and point left out).
std::string differing_sets(const RunContext& ctx, const JobGrid& grid) {
  Settings base = grid.settings();
  for (const Preset& p : grid.presets)
    if (p.name == ctx.preset) base.apply(p);
  const nlohmann::ordered_json mine = ctx.settings.to_json(), theirs = base.to_json();
  std::string out;
  for (const auto& [key, value] : mine.items()) {
    if (key == "mode" || key == "point" || theirs[key] == value) continue;
    std::string text;
    if (value.is_array()) {
      for (const auto& v : value) text += (text.empty() ? "" : ",") + v.dump();
    } else {
      text = value.is_string() ? value.get<std::string>() : value.dump();
    }
    out += " --set " + shell_word(key + "=" + text);
  }
  return out;
}

void run_one(const RunContext& ctx, const JobGrid& grid, std::size_t i) {
  // A curve left by an interrupted try goes first, so the point has one curve.
  std::filesystem::remove(ctx.dir.file(point_curve_file(grid.points[i])));
  grid.run_point(i);
  if (!point_done(ctx.dir, grid.points[i]))
    throw Error(grid.experiment + ": point " + grid.points[i] + " wrote no result file");
}

}  // namespace

JobGrid job_grid_for(const Experiment& e) {
  JobGrid grid;
  grid.experiment = e.name;
  grid.settings = e.settings;
  grid.presets = e.presets;
  return grid;
}

int run_job_grid(const RunContext& ctx, const JobGrid& grid) {
  const Settings& s = ctx.settings;
  validate_job_settings(s, grid.points);
  std::filesystem::create_directories(ctx.dir.file("points"));
  const std::string mode = s.text("mode");
  auto wanted = [&](std::size_t i) { return !point_done(ctx.dir, grid.points[i]) && (!grid.needed || grid.needed(i)); };

  if (mode == "list") {
    const std::string common = shell_word(ctx.program) + " " + grid.experiment + " --preset " + shell_word(ctx.preset) +
                               differing_sets(ctx, grid) + " --out " + shell_word(ctx.dir.path().string()) +
                               " --seed " + std::to_string(ctx.seed) + " --threads 1" +
                               (ctx.device.is_cuda() ? " --device cuda" : "") + " --set mode=point --set point=";
    std::size_t listed = 0, done = 0;
    for (std::size_t i = 0; i < grid.points.size(); ++i) {
      done += point_done(ctx.dir, grid.points[i]);
      if (wanted(i)) std::printf("%s%s\n", common.c_str(), shell_word(grid.points[i]).c_str()), ++listed;
    }
    std::fprintf(stderr,
                 "%s: %zu of %zu points listed (%zu done, %zu not needed after the finished ones) in %s; "
                 "afterwards gather them with --set mode=report\n",
                 grid.experiment.c_str(), listed, grid.points.size(), done, grid.points.size() - done - listed,
                 ctx.dir.path().c_str());
    return 0;
  }
  if (mode == "point") {
    for (std::size_t i = 0; i < grid.points.size(); ++i) {
      if (grid.points[i] != s.text("point")) continue;
      if (point_done(ctx.dir, grid.points[i]))
        std::printf("%s: already done (%s)\n", grid.points[i].c_str(), ctx.dir.file(point_file(grid.points[i])).c_str());
      else
        run_one(ctx, grid, i);
    }
    return 0;
  }
  if (mode == "all" || mode == "train") {
    std::size_t missing = 0;
    for (std::size_t i = 0; i < grid.points.size(); ++i) missing += !point_done(ctx.dir, grid.points[i]);
    std::printf("%s: %zu points (%zu not done yet), %d thread%s -> %s\n", grid.experiment.c_str(), grid.points.size(),
                missing, ctx.threads, ctx.threads == 1 ? "" : "s", ctx.dir.path().c_str());
    for (std::size_t i = 0; i < grid.points.size(); ++i) {
      if (point_done(ctx.dir, grid.points[i])) continue;
      if (grid.needed && !grid.needed(i)) {
        std::printf("%s: skipped (not needed after the finished points)\n", grid.points[i].c_str());
        continue;
      }
      run_one(ctx, grid, i);
    }
    if (mode == "train") return 0;
  }
  grid.report();
  return 0;
}

}  // namespace moelab
