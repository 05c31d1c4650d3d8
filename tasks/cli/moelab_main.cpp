// tasks/cli/moelab_main.cpp — the `moelab` command line: one entry point for every experiment
// (see moelab_main.h; examples/moelab.cpp is the program).
//
//   moelab --help                          the experiments
//   moelab <experiment> --help             its options, every setting with its default, its presets
//   moelab <experiment> [--preset NAME] [--set key=value]... [--out DIR] [--threads N]
//                       [--device cpu|cuda] [--seed S] [--precision fp32|bf16]
//   moelab claims [--check] DIR             a finished folder's paper claims (claims_command.h)
//
// The settings of a run are resolved in three layers: the experiment's defaults, then the preset
// (a named table of values, listed by --help), then each --set key=value in order. The run folder
// (default runs/<experiment>/<preset>) gets config.json with the resolved settings before any
// work starts; running the same command again resumes a sweep where it stopped, and a folder
// that holds a run with other settings is refused (runner/run_start.h). The order: the
// settings, the seed, the device and the inputs (data files) are checked, then the run folder
// (creatable, writable, the same settings as an earlier run in it), and only then is anything
// written. Exit status: 0 done, 1 the run failed, 2 a bad option, value or combination (nothing
// was written).
//
// Adding an experiment: write tasks/<name>/ with a function returning its Experiment
// (runner/experiment.h) and add it to experiments() below.
#include "tasks/cli/moelab_main.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/openmp_wait.h"
#include "core/parallel.h"
#include "tasks/cli/claims_command.h"
#include "runner/experiment.h"
#include "runner/job_grid.h"
#include "runner/run_lock.h"
#include "runner/run_start.h"
#include "tasks/common/precision_setting.h"
#include "tasks/phonebook/phonebook_experiment.h"
#include "tasks/pretrain/pretrain_experiment.h"
#include "tasks/shortest_path/shortest_path_experiment.h"
#include "tasks/routers/routers_experiment.h"
#include "tasks/softmoe_l2norm/l2norm_experiment.h"
#include "tasks/softmoe_mnist/softmoe_mnist_experiment.h"
#include "tasks/softmoe_vit/softmoe_vit_experiment.h"
#include "tasks/teacher_student/teacher_student_experiment.h"

namespace moelab {

namespace {

std::vector<Experiment> experiments() {
  return {phonebook_experiment(), shortest_path_experiment(), teacher_student_experiment(), softmoe_mnist_experiment(), softmoe_vit_experiment(),
          softmoe_l2norm_experiment(), routers_experiment(), pretrain_experiment()};
}

struct Common {
  std::string preset, out, device = "cpu";
  bool out_given = false;  // --out "" is an error, not the default folder
  std::vector<std::string> sets;
  int threads = num_threads();
  std::string seed = "0";  // parsed here: CLI11 would turn -1 into 2^64 - 1 without a word
  std::string precision;   // --precision: the same as --set precision=... (tasks/common/precision_setting.h)
  std::string program = "moelab";  // argv[0] without its folder: what mode=list writes
};

std::string presets_text(const Experiment& e) {
  std::string text;
  for (const Preset& p : e.presets) {
    text += "  " + p.name + (p.name == e.default_preset ? " (default)" : "") + ": " + p.description + "\n";
    for (const auto& [key, value] : p.values) text += "      " + key + "=" + value + "\n";
  }
  return text;
}

const Preset& find_preset(const Experiment& e, const std::string& name) {
  std::string all;
  for (const Preset& p : e.presets) {
    if (p.name == name) return p;
    all += (all.empty() ? "" : ", ") + p.name;
  }
  throw UsageError("no preset '" + name + "' (the presets are: " + all + ")");
}

int run_experiment(const Experiment& e, const Common& c, const std::string& command_line) {
  const std::string preset_name = c.preset.empty() ? e.default_preset : c.preset;
  const Preset& preset = find_preset(e, preset_name);
  Settings settings = e.settings();
  settings.apply(preset);
  for (const std::string& s : c.sets) settings.set_assignment(s);
  if (!c.precision.empty()) {
    const bool set_too = std::any_of(c.sets.begin(), c.sets.end(),
                                     [](const std::string& s) { return s.rfind("precision=", 0) == 0; });
    if (set_too && settings.text("precision") != c.precision)
      throw UsageError("--precision " + c.precision + " contradicts --set precision=" + settings.text("precision"));
    settings.set("precision", c.precision);
  }
  if (e.validate) e.validate(settings);
  const std::uint64_t seed = parse_seed(c.seed);

  // --device cuda needs both a build with the CUDA backend and a GPU the driver can see; which
  // one is missing decides the message (exit 2 either way, before any work).
  Device device = Device::cpu();
  if (c.device == "cuda") {
#ifdef MOELAB_HAVE_CUDA
    if (!cuda_available())
      throw UsageError("--device cuda: " + cuda_probe().description + "; use --device cpu");
#else
    throw UsageError("--device cuda: this build of moelab has no CUDA backend (reconfigure with nvcc present, "
                     "or -DMOELAB_CUDA=ON, and rebuild); use --device cpu");
#endif
    device = Device::cuda();
  }
  if (e.check_inputs) e.check_inputs(settings);
  // mode and point agree before anything is written (some experiments check the point's name
  // against their grid only once it is built, after config.json); a point's name also names its
  // lock file, so it holds only letters, digits, '.', '_', '-' (as every grid's names do).
  if (settings.has("mode") && settings.has("point")) check_job_point(settings);

  // Only now the run folder: usable, and holding no run with other settings; then config.json.
  const RunDir dir = open_run_folder(c.out_given ? c.out : "runs/" + e.name + "/" + preset_name);
  // One writer at a time (runner/run_lock.h): held until this function returns, or by the
  // kernel until the process ends however it ends.
  const RunLock lock = lock_run_folder(dir, settings.has("mode") ? settings.text("mode") : "",
                                       settings.has("point") ? settings.text("point") : "", command_line);
  begin_run(dir, run_config(e.name, preset_name, seed, c.threads, c.device, command_line, settings), settings);
  set_num_threads(c.threads);
  const RunContext ctx{settings, dir, preset_name, seed, c.threads, device, c.program};
  PrecisionScope precision(settings_precision(settings));  // the matrix products' arithmetic, for the whole run
  return e.run(ctx);
}

}  // namespace

int moelab_main(int argc, char** argv) {
  wait_passively_unless_set(argv);  // OpenMP threads sleep between regions (core/openmp_wait.h)
  const std::vector<Experiment> all = experiments();
  CLI::App app{"moelab: the experiments of three mixture-of-experts papers and a side-by-side comparison of "
                "routers, on a from-scratch C++ engine"};
  app.require_subcommand(1);
  app.footer("Run `moelab <experiment> --help` for its settings and presets.");

  Common common;
  if (argc > 0 && argv[0] != nullptr && *argv[0] != '\0') {
    const std::string path = argv[0];
    common.program = path.substr(path.find_last_of('/') + 1);  // npos + 1 = 0: no folder
  }
  std::string command_line = "moelab";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  for (const Experiment& e : all) {
    CLI::App* sub = app.add_subcommand(e.name, e.summary);
    sub->add_option("--preset", common.preset, "preset to start from (default: " + e.default_preset + ")");
    sub->add_option("--set", common.sets, "override a setting: --set key=value (repeatable; keys below)")
        ->allow_extra_args(false);
    sub->add_option("--out", common.out, "run folder (default: runs/" + e.name + "/<preset>)");
    sub->add_option("--threads", common.threads, "CPU threads")->check(CLI::Range(1, 1024))->capture_default_str();
    sub->add_option("--device", common.device, "where to compute")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
    sub->add_option("--seed", common.seed, "seed for data, initial weights and sampling (0 to 2^64 - 1)")
        ->capture_default_str();
    sub->add_option("--precision", common.precision,
                    "the matrix products' arithmetic: fp32 (default) or bf16 (--set precision=...)")
        ->check(CLI::IsMember({"fp32", "bf16"}));
    sub->footer(e.details + "\n\nSettings (--set key=value; the defaults before any preset):\n" + e.settings().describe() +
                "\nPresets (--preset NAME; each sets the values listed):\n" + presets_text(e));
  }
  std::string claims_dir;
  bool claims_check = false;
  CLI::App* claims = app.add_subcommand("claims", "a finished run folder's paper claims, recomputed from its CSVs "
                                                  "into summary.md's Claims section");
  claims->add_option("dir", claims_dir, "the run folder (e.g. docs/results/softmoe-mnist-cpu)")->required();
  claims->add_flag("--check", claims_check, "change nothing; exit 1 if summary.md holds other claims than the CSVs give");
  // An unknown experiment name is named (CLI11 alone says "A subcommand is required").
  if (argc > 1 && argv[1] != nullptr && argv[1][0] != '-') {
    const std::string wanted = argv[1];
    std::string names;
    bool known = wanted == "claims";
    for (const Experiment& e : all) {
      known = known || e.name == wanted;
      names += (names.empty() ? "" : ", ") + e.name;
    }
    if (!known) {
      std::fprintf(stderr, "moelab: no experiment '%s' (the experiments: %s; moelab --help lists them)\n",
                   wanted.c_str(), names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    return app.exit(err) == 0 ? 0 : 2;  // --help exits 0; a bad option or value exits 2
  }
  if (app.got_subcommand("claims")) {
    try {
      return run_claims_command(all, claims_dir, claims_check);
    } catch (const std::exception& err) {
      std::fprintf(stderr, "moelab claims: %s\n", err.what());
      return 1;
    }
  }
  for (const Experiment& e : all) {
    if (!app.got_subcommand(e.name)) continue;
    common.out_given = app.get_subcommand(e.name)->count("--out") > 0;
    try {
      return run_experiment(e, common, command_line);
    } catch (const UsageError& err) {
      std::fprintf(stderr, "moelab %s: %s\n", e.name.c_str(), err.what());
      return 2;
    } catch (const std::exception& err) {
      std::fprintf(stderr, "moelab %s: %s\n", e.name.c_str(), err.what());
      return 1;
    }
  }
  return 2;
}

}  // namespace moelab
