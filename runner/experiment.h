// runner/experiment.h — what the `moelab` command line needs to know about an experiment.
//
// Each experiment (tasks/<name>/) describes itself with an Experiment: its name on the command
// line, a one-line summary, its settings with defaults (runner/settings.h), its presets,
// and the function that runs it. tasks/cli/moelab_main.cpp lists the experiments and does the rest:
// parses `moelab <experiment> [--preset NAME] [--set key=value]... [--out DIR] [--threads N]
// [--device cpu|cuda] [--seed S]`, applies the preset and the --set values to the settings,
// checks them (validate), the seed and the inputs (check_inputs), then the run folder (creatable,
// writable, no earlier run with other settings in it: runner/run_start.h), writes
// config.json, and calls run().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "runner/claims.h"
#include "runner/run_dir.h"
#include "runner/settings.h"

namespace moelab {

struct RunContext {
  const Settings& settings;    // resolved: defaults, then the preset, then --set
  const RunDir& dir;           // runs/<experiment>/<preset> unless --out says otherwise
  std::string preset;
  std::uint64_t seed = 0;
  int threads = 1;
  Device device = Device::cpu();
  // The program's name, which mode=list writes at the start of each command line: "moelab", or
  // another program running the same command line (tasks/cli/moelab_main.h), e.g. one that
  // registered a router of its own, so the listed points run with that router registered too.
  std::string program = "moelab";
};

struct Experiment {
  std::string name;     // on the command line: moelab <name>
  std::string summary;  // one line for `moelab --help`
  std::string details;  // a paragraph for `moelab <name> --help`
  std::function<Settings()> settings;  // every key with its default
  std::vector<Preset> presets;
  std::string default_preset;
  // Throws UsageError for settings that cannot work together; the command line calls it before
  // it creates the run folder (run() calls it too).
  std::function<void(const Settings&)> validate;
  // Optional: checks that the inputs the run reads (data files) are there, before anything is
  // written; throws UsageError for a named input that is not there (exit 2), anything else for
  // missing data (exit 1). Cheap: it looks for the files, reading them is run()'s work.
  std::function<void(const Settings&)> check_inputs;
  // Runs the experiment; returns the process exit status (0: done). Throws UsageError for
  // settings that cannot work together (exit 2), anything else for a failure (exit 1).
  std::function<int(const RunContext&)> run;
  // Optional: the paper's claims this experiment tests, judged from a finished folder's CSVs
  // (runner/claims.h). The report writes them into summary.md's "## Claims" section, and
  // `moelab claims DIR` recomputes that section for a folder (a recorded result included).
  ClaimsFunction claims;
};

}  // namespace moelab
