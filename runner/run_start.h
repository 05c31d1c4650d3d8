// runner/run_start.h — starting or resuming a run in its folder, before anything is written.
//
// The `moelab` command line (tasks/cli/moelab_main.cpp) resolves and checks the settings, the seed and
// the inputs, and only then touches the run folder:
//
//   const std::uint64_t seed = parse_seed(text);  // UsageError: -1, 2^64, 12x
//   const RunDir dir = open_run_folder(out);      // UsageError: "", cannot be created or written
//   const auto config = run_config(e.name, preset, seed, threads, device, command_line, settings);
//   begin_run(dir, config, settings);              // UsageError: the folder holds other settings;
//                                                  // else writes config.json
//   e.run(ctx);
//
// Resuming. The same command with the same folder resumes a sweep: the experiments skip the jobs
// whose results are there. That is right only when those results came from the same settings, so
// begin_run compares the folder's config.json (written by the earlier run) with this run before it
// writes anything. Compared: the experiment, the seed, and every setting except those the
// experiment declared with Settings::may_change_on_resume (a mode, or a sweep's list whose jobs
// do not depend on each other: they choose which jobs run, not what a job gives). Not compared:
// threads and device (they change the speed; CPU and CUDA agree to rounding), the preset's name
// (a preset only sets settings, and those are compared), the command line and the start time.
// A setting missing from the folder's record (a key added to the code after that run) counts as
// its default, the value the code used before the key existed: the folder resumes unless this run
// sets the key to something else.
// Any difference is a UsageError (exit status 2) naming every differing key with the folder's
// value and this run's; config.json keeps the earlier run's record.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "runner/run_dir.h"
#include "runner/settings.h"

namespace moelab {

// --seed's text as a number: decimal digits only, 0 to 2^64 - 1; UsageError for anything else (a
// sign, -1, an overflow, trailing characters), naming the text.
std::uint64_t parse_seed(const std::string& text);

// The run folder, created if need be; UsageError naming it when `path` is empty, not UTF-8 or holds
// a control character (settings.h: check_plain_text), cannot be created, is not a folder, holds
// links, special files or files of the user's (run_folder_check.h), or a file cannot be written
// in it (with the system's reason). Nothing is written before these checks pass.
RunDir open_run_folder(const std::string& path);

// What config.json records: experiment, preset, seed, threads, device, cpu, command, started (local
// time), settings.
nlohmann::ordered_json run_config(const std::string& experiment, const std::string& preset, std::uint64_t seed,
                                  int threads, const std::string& device, const std::string& command,
                                  const Settings& settings);

// UsageError when the folder's config.json records a run whose results-changing settings differ
// from `config` (see above) or cannot be read; nothing when there is no config.json.
void check_resume(const RunDir& dir, const nlohmann::ordered_json& config, const Settings& settings);

// check_resume, then config.json := config.
void begin_run(const RunDir& dir, const nlohmann::ordered_json& config, const Settings& settings);

}  // namespace moelab
