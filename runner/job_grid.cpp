// runner/job_grid.cpp — see job_grid.h.
#include "runner/job_grid.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "core/error.h"
#include "runner/json_file.h"

namespace moelab {

void add_job_settings(Settings& s, const std::string& example_point) {
  s.add_text("mode", "all",
             "all: run the missing points, then report; train: run them, no report; list: print a command per "
             "missing point; point: run one; report: only gather",
             {"all", "train", "list", "point", "report"});
  s.add_text("point", "none", "the point to run with mode=point, e.g. " + example_point + " (mode=list prints them)");
  s.may_change_on_resume({"mode", "point"});
}

void check_job_point(const Settings& s) {
  const std::string mode = s.text("mode"), point = s.text("point");
  if (mode != "point") {
    if (point != "none") throw UsageError("point is only used with mode=point (this is mode=" + mode + ")");
    return;
  }
  if (point == "none") throw UsageError("mode=point needs --set point=NAME (mode=list prints the names)");
  for (char c : point)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      throw UsageError("point '" + point + "': a point's name holds only letters, digits, '.', '_' and '-'");
  if (point.front() == '.') throw UsageError("point '" + point + "': a point's name does not start with '.'");
}

void validate_job_settings(const Settings& s, const std::vector<std::string>& points) {
  check_job_point(s);
  if (s.text("mode") != "point") return;
  const std::string point = s.text("point");
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
std::string point_resume_file(const std::string& name) { return "points/" + name + ".resume.safetensors"; }

bool point_done(const RunDir& dir, const std::string& name) {
  return std::filesystem::exists(dir.file(point_file(name)));
}

void redo_point_without(const RunDir& dir, const std::string& name, const std::string& needed_file) {
  if (!point_done(dir, name) || std::filesystem::exists(dir.file(needed_file))) return;
  std::printf("%s: its %s is gone; it will run again\n", name.c_str(), needed_file.c_str());
  std::filesystem::remove(dir.file(point_file(name)));
}

void write_point(const RunDir& dir, const std::string& name, const nlohmann::ordered_json& result) {
  dir.subfolder("points");
  dir.write_json(point_file(name), result);
}

std::optional<nlohmann::json> read_point(const RunDir& dir, const std::string& name) {
  const std::filesystem::path path = dir.file(point_file(name));
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return std::nullopt;
  return nlohmann::json(read_json_file(path, "the point result", "remove it to run the point again"));
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

std::string gather_rows(const RunDir& dir, const std::vector<std::string>& names,
                        const std::vector<std::string>& header) {
  std::string out = csv_line(header) + "\n";
  for (const std::string& name : names)
    if (const std::optional<nlohmann::json> j = read_point(dir, name)) {
      std::vector<std::string> cells;
      for (const std::string& h : header) cells.push_back(j->at("row").at(h).get<std::string>());
      out += csv_line(cells) + "\n";
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

// The JSON type of every field of a point result, `depth` levels deep: "a.b" for nested objects,
// "a[].b" for the objects in an array. A field that holds several types across an array's elements
// gets them all ("number/string"), so one damaged element shows.
void field_types(const nlohmann::json& j, const std::string& prefix, int depth,
                 std::map<std::string, std::string>& out) {
  auto note = [&](const std::string& name, const nlohmann::json& value) {
    const std::string type = value.is_number() ? "number" : value.type_name();
    std::string& seen = out[name];
    if (seen.empty()) seen = type;
    else if (("/" + seen + "/").find("/" + type + "/") == std::string::npos) seen += "/" + type;
    if (depth > 1) field_types(value, name, depth - 1, out);
  };
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) note(prefix.empty() ? key : prefix + "." + key, value);
  } else if (j.is_array()) {
    for (const auto& value : j) note(prefix + "[]", value);
  }
}

// "points/x.json: 'exact_match' is a string where 12 others have a number; ..." for the points whose
// fields differ from most others', or that cannot be read at all; "" when none stands out.
std::string damaged_points(const RunDir& dir, const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> fields;
  std::string out;
  int listed = 0;
  for (const std::string& name : names) {
    if (!point_done(dir, name)) continue;
    try {
      std::map<std::string, std::string> f;
      const nlohmann::ordered_json j =
          read_json_file(dir.file(point_file(name)), "the point result", "remove it to run the point again");
      field_types(nlohmann::json(j), "", 4, f);
      fields.emplace_back(name, std::move(f));
    } catch (const std::exception& e) {
      if (listed++ < 5) out += std::string(out.empty() ? "" : "; ") + e.what();
    }
  }
  // For each field, how many points hold it with each type.
  std::map<std::string, std::map<std::string, int>> votes;
  for (const auto& [name, f] : fields)
    for (const auto& [key, type] : f) ++votes[key][type];
  const int total = static_cast<int>(fields.size());
  for (const auto& [name, f] : fields) {
    std::string odd;
    for (const auto& [key, by_type] : votes) {
      std::string common;
      int most = 0, holders = 0;
      for (const auto& [type, n] : by_type) {
        holders += n;
        if (n > most) most = n, common = type;
      }
      if (2 * holders <= total || 2 * most <= total) continue;  // not a field most points share alike
      const auto it = f.find(key);
      if (it == f.end())
        odd += std::string(odd.empty() ? "" : ", ") + "lacks '" + key + "' (" + std::to_string(most) + " others have a " +
               common + ")";
      else if (it->second != common)
        odd += std::string(odd.empty() ? "" : ", ") + "'" + key + "' is a " + it->second + " where " +
               std::to_string(most) + " others have a " + common;
    }
    if (!odd.empty() && listed++ < 5) out += std::string(out.empty() ? "" : "; ") + point_file(name) + ": " + odd;
  }
  if (!out.empty()) return "Likely damaged: " + out + ". ";
  // No majority to go by (one or two finished points, or a field split evenly): name the files
  // whose fields' types disagree, or the one file there is.
  std::string split;
  for (const auto& [key, by_type] : votes) {
    if (by_type.size() < 2 || listed >= 5) continue;
    std::string holders;
    for (const auto& [name, f] : fields) {
      const auto it = f.find(key);
      if (it != f.end()) holders += std::string(holders.empty() ? "" : ", ") + point_file(name) + " has a " + it->second;
    }
    split += std::string(split.empty() ? "" : "; ") + "'" + key + "': " + holders;
    ++listed;
  }
  if (!split.empty()) return "The point results disagree on fields' types (" + split + "): one of them is damaged. ";
  if (fields.size() == 1)
    return "The one finished point result is " + point_file(fields.front().first) + ": it is likely damaged. ";
  return "Every finished point result has the same fields of the same types (" + std::to_string(fields.size()) +
         " files), so which one is damaged cannot be told from them. ";
}

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
  grid.claims = e.claims;
  return grid;
}

int run_job_grid(const RunContext& ctx, const JobGrid& grid) {
  const Settings& s = ctx.settings;
  validate_job_settings(s, grid.points);
  ctx.dir.subfolder("points");
  const std::string mode = s.text("mode");
  auto wanted = [&](std::size_t i) { return !point_done(ctx.dir, grid.points[i]) && (!grid.needed || grid.needed(i)); };

  if (mode == "list") {
    // One job per line, each word quoted for POSIX shells (shell_word). A line must stay one line
    // for a line-based job runner (parallel, xargs, a job array reading line N), so no word may
    // hold a newline: --out and every setting were checked for control characters when they were
    // given (settings.h: check_plain_text), and the program's name is checked here. `--out=WORD`
    // rather than `--out WORD`: a folder named `-x` is then a value, never an option.
    check_plain_text("the program's name '" + ctx.program + "'", ctx.program);
    const std::string common = shell_word(ctx.program) + " " + grid.experiment + " --preset " + shell_word(ctx.preset) +
                               differing_sets(ctx, grid) + " " + shell_word("--out=" + ctx.dir.path().string()) +
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
  // A damaged point result (a number turned into text, a field missing) would otherwise surface as
  // the JSON library's "type_error.304: cannot use at() with number", or "stod", or "map::at",
  // naming nothing. The message names the run folder, the library's reason, and the points whose
  // fields differ from most others' (the likely damaged ones), with what they hold instead.
  try {
    grid.report();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(grid.experiment + ": the report could not read the point results in '" +
                ctx.dir.file("points").string() + "' (" + e.what() + "). " + damaged_points(ctx.dir, grid.points) +
                "Remove a damaged points/<name>.json to run that point again.");
  }
  // The paper's claims, from the CSVs the report just wrote (runner/claims.h).
  if (grid.claims && std::filesystem::exists(ctx.dir.file("summary.md"))) {
    const std::vector<Claim> claims = grid.claims({ctx.dir.path(), s.to_json(), ctx.seed, ctx.device.is_cuda() ? "cuda" : "cpu"});
    write_claims_section(ctx.dir.path(), claims);
    std::printf("\n%s", claims_section(claims).c_str());
  }
  return 0;
}

}  // namespace moelab
