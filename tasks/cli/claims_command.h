// tasks/cli/claims_command.h — `moelab claims DIR [--check]`: the "## Claims" section of a
// finished run folder's summary.md, recomputed from its CSV files (runner/claims.h).
//
//   moelab claims docs/results/softmoe-mnist-cpu           rewrite the section in summary.md
//   moelab claims --check docs/results/softmoe-mnist-cpu   exit 1 if summary.md holds another one
//
// The folder's config.json names the experiment, its settings and its seed; the experiment's
// claims function reads the CSVs the report wrote. Nothing else in the folder changes; summary.md
// is replaced whole (written aside, then renamed). It takes no run lock (so it leaves no lock file
// in a recorded folder): run it on a finished folder, not while a run there writes its report.
// Exit status:
// 0 done (or the section is current), 1 the section differs (--check) or a file cannot be read,
// 2 no such folder, no config.json, or an experiment that states no paper claims.
#pragma once

#include <string>
#include <vector>

#include "runner/experiment.h"

namespace moelab {

int run_claims_command(const std::vector<Experiment>& experiments, const std::string& dir, bool check);

}  // namespace moelab
