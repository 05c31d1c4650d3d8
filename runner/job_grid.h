// runner/job_grid.h — an experiment's grid as independent jobs: point names, one result
// file per point, and the modes that run a sweep on one machine or spread it over many.
//
// A sweep (models x sizes x seeds ...) is a list of grid points. Each point has a name that says
// what it is ("moe-d64-16e-N2000-seed1"), depends on nothing but its own name and the run's
// settings (its data, initial weights and sampling come from its own seeds, never from the order
// of the points or from another point), and leaves one result file, points/<name>.json, written
// whole and renamed (runner/checked_file.h) as the very last thing it does: the file's
// presence means the point is done, and a point that is done is never run again. A point may
// also write points/<name>.csv (its training curve); it is removed before the point (re)starts,
// so an interrupted try leaves no rows behind.
//
// The report reads the result files in grid order (never in the order they were written), so
// the same finished points give the same report, byte for byte (timings aside), whether they ran
// in one process (mode=all) or as jobs in any order on any number of machines.
//
// The modes (`--set mode=...`, declared by add_job_settings):
//   all     (default) run every missing point in grid order, then write the report
//   train   run every missing point, no report
//   list    print one command line per missing point on stdout (a count on stderr), e.g.
//             moelab phonebook --preset cpu --set mode=list | parallel -j 8
//           each line is `moelab <experiment> --preset P [--set k=v]... --out=DIR --seed S
//           --threads 1 --set mode=point --set point=NAME`, every word quoted for POSIX shells
//           and none holding a newline (a line is one job): the --set options are the settings
//           that differ from the preset's, so a line reproduces this run's settings exactly
//           (the program's name is RunContext::program: moelab_with_hash lists moelab_with_hash)
//   point   run the one point named by `--set point=NAME` (nothing when it is done)
//   report  only gather the finished points into the report (missing ones are said to be)
// After the report (modes all and report), the experiment's claims (Experiment::claims) go into
// summary.md's "## Claims" section.
//
// An experiment may skip points that the finished ones make pointless (the phone-book sweep stops
// trying larger books after a model fails): JobGrid::needed. mode=all asks it before every point;
// mode=list leaves out the points it already rules out; the report applies the same rule, so
// the answer is the same whether the skipped points ran or not.
//
// Seeds: `seeds` lists the replicates of every cell (0,1,2: three). Replicate t of a run with
// --seed S draws from replicate_seed(S, t) = S + t * 0x9E3779B97F4A7C15 (mod 2^64): replicate 0
// is the run's own seed, so a one-seed run is the same run as before seeds existed, and distinct
// replicates of one run never share a seed.
//
//   JobGrid g = job_grid_for(phonebook_experiment());  // its name, settings and presets
//   g.points = {"dense-d64-N250-seed0", ...};
//   g.run_point = [&](std::size_t i) { ...train...; write_point(ctx.dir, g.points[i], result); };
//   g.report = [&] { ... read_point(ctx.dir, name) for every done name, in grid order ... };
//   return run_job_grid(ctx, g);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runner/experiment.h"

namespace moelab {

// Declares `mode` (all, train, list, point, report) and `point` (an example name for the help), and
// marks both as settings a resumed run may change (they choose what to run, not what a point gives).
void add_job_settings(Settings& s, const std::string& example_point);

// UsageError unless mode and point agree (a point with mode=point only, and then one), and the
// point's name is a plain file name (letters, digits, '.', '_', '-'; it names a lock file). Needs
// no grid: the command line checks it before anything is written.
void check_job_point(const Settings& s);

// UsageError unless mode=point names one of `points` (listing some of them), or another mode comes
// without a point.
void validate_job_settings(const Settings& s, const std::vector<std::string>& points);

// The run seed of replicate `seed` (see above).
std::uint64_t replicate_seed(std::uint64_t run_seed, std::int64_t seed);

// "points/<name>.json" and "points/<name>.csv" (relative to the run folder), and
// "points/<name>.resume.safetensors": where a point that saves itself while it trains keeps its
// checkpoint until it is done (tasks/common/train.h's TrainResume; pretrain's points do).
std::string point_file(const std::string& name);
std::string point_curve_file(const std::string& name);
std::string point_resume_file(const std::string& name);
bool point_done(const RunDir& dir, const std::string& name);
// For experiments whose points save a file the report needs (a checkpoint): a finished point whose
// file (relative to the run folder) is gone is marked not done, so that it runs again, and says so.
void redo_point_without(const RunDir& dir, const std::string& name, const std::string& needed_file);
// The result of a point, written whole and renamed (last: it marks the point done).
void write_point(const RunDir& dir, const std::string& name, const nlohmann::ordered_json& result);
// The result of a finished point; nothing when it is not done; moelab::Error naming the file
// when it cannot be parsed.
std::optional<nlohmann::json> read_point(const RunDir& dir, const std::string& name);

// The curves of the finished points among `names`, in that order, as one CSV: the header line of
// the first curve file, then every file's rows. Empty when no point has a curve.
std::string gather_curves(const RunDir& dir, const std::vector<std::string>& names);
// results.csv's text from the finished points of `names` (in that order): the header line, then
// each point's "row" object (its cells as strings, written by the point) in the header's order.
std::string gather_rows(const RunDir& dir, const std::vector<std::string>& names,
                        const std::vector<std::string>& header);

// A word for the shell: as it is when it holds only safe characters, else in single quotes.
std::string shell_word(const std::string& word);

struct JobGrid {
  std::string experiment;           // the command's name: moelab <experiment>
  std::vector<std::string> points;  // every point of the grid, in grid (report) order
  // Runs points[i]; ends with write_point(ctx.dir, points[i], ...).
  std::function<void(std::size_t)> run_point;
  // Optional: false when the finished points make points[i] pointless (see above).
  std::function<bool(std::size_t)> needed;
  std::function<void()> report;
  // The experiment's settings and presets, to write the --set options of mode=list's lines.
  std::function<Settings()> settings;
  std::vector<Preset> presets;
  // Optional: the experiment's paper claims, written into summary.md after the report.
  ClaimsFunction claims;
};

// The grid of experiment e with no points yet: e's name, settings and presets (what mode=list
// writes its command lines from), so the two cannot disagree.
JobGrid job_grid_for(const Experiment& e);

// Does what the mode says (see above); returns the exit status (0).
int run_job_grid(const RunContext& ctx, const JobGrid& grid);

}  // namespace moelab
