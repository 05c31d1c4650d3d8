// runner/run_start.cpp — see run_start.h.
#include "runner/run_start.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <fstream>
#include <set>
#include <vector>

#include "core/cpu/cpu_features.h"
#include "core/json_guard.h"
#include "core/openmp_wait.h"
#include "core/safe_file.h"
#include "runner/json_file.h"
#include "runner/run_folder_check.h"
#include "runner/run_lock.h"
#include "moelab_build_info.h"  // generated: MOELAB_GIT_COMMIT, MOELAB_COMPILER, ... (cmake/build_info.cmake)

namespace moelab {

namespace {

// A value as the message shows it: JSON text, "(none)" when the key is not there.
std::string shown(const nlohmann::ordered_json& j, const std::string& key) {
  return j.is_object() && j.contains(key) ? json_summary(j.at(key)) : "(none)";
}

void compare(const nlohmann::ordered_json& before, const nlohmann::ordered_json& now, const std::string& key,
             const std::string& name, std::vector<std::string>& differences) {
  const bool had = before.is_object() && before.contains(key), has = now.is_object() && now.contains(key);
  if (had == has && (!had || before.at(key) == now.at(key))) return;
  differences.push_back(name + " = " + shown(before, key) + " there, " + shown(now, key) + " now");
}

}  // namespace

std::uint64_t parse_seed(const std::string& text) {
  std::uint64_t seed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw UsageError("--seed: '" + text + "' is not a whole number from 0 to 18446744073709551615");
  return seed;
}

RunDir open_run_folder(const std::string& path) {
  if (path.empty())
    throw UsageError("--out: the folder name is empty (leave --out out for runs/<experiment>/<preset>)");
  check_plain_text("--out '" + path + "'", path);  // recorded in config.json, written into job lines
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec))
    throw UsageError("--out '" + path + "': exists and is not a folder (it is " + file_kind(path) + ")");
  // Before anything is written: no links or special files inside, and a run folder or a new one.
  check_run_folder_contents(path, "--out");
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path))
    throw UsageError("--out '" + path + "': cannot create the folder" + (ec ? ": " + ec.message() : std::string()));
  // A byte written and removed again: a folder that is read-only, or on a full disk, shows now.
  // One name per process and host, created new (never through a link), so that processes
  // starting on one folder never share the probe.
  const std::string probe = temporary_name((std::filesystem::path(path) / ".moelab-write-test").string(), "probe");
  const int fd = create_new_file(probe);
  bool written = fd >= 0 && ::write(fd, "x", 1) == 1;
  int error = errno;
  if (fd >= 0 && ::close(fd) != 0 && written) written = false, error = errno;
  ::unlink(probe.c_str());
  if (!written) throw UsageError("--out '" + path + "': cannot write in the folder: " + std::strerror(error));
  return RunDir(path);
}

nlohmann::ordered_json run_config(const std::string& experiment, const std::string& preset, std::uint64_t seed,
                                  int threads, const std::string& device, const std::string& command,
                                  const Settings& settings) {
  nlohmann::ordered_json config;
  config["experiment"] = experiment;
  config["preset"] = preset;
  config["seed"] = seed;
  config["threads"] = threads;
  // How idle OpenMP threads wait (core/openmp_wait.h): it decides the speed on a shared machine,
  // never the bits.
  config["openmp_wait"] = openmp_wait_policy();
  config["device"] = device;
  // The CPU and the kernels' instruction set (core/cpu/cpu_features.h): results are bitwise
  // repeatable for one binary on any x86-64-v3 CPU, but not between builds for other sets.
  config["cpu"] = cpu::cpu_description();
  // The code: the git commit the binary was built from ("+dirty": with uncommitted changes).
  config["commit"] = MOELAB_GIT_COMMIT;
  // The rest of what decides the bits: the GEMM kernels chosen at run time, and the build (the
  // compiler, Eigen, the flags). Same commit, kernels and build: the same bits on any CPU of the
  // build's level (README, "CPUs, instruction sets and determinism"; scripts/reproduce.sh checks it).
  config["kernels"] = cpu::isa_name(cpu::active_isa());
  config["build"] = {{"compiler", MOELAB_COMPILER},
                     {"eigen", MOELAB_EIGEN_VERSION},
                     {"type", MOELAB_BUILD_TYPE},
                     {"flags", MOELAB_BUILD_FLAGS}};
  config["command"] = command;
  const std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S%z", std::localtime(&now));
  config["started"] = when;
  config["settings"] = settings.to_json();
  return config;
}

void check_resume(const RunDir& dir, const nlohmann::ordered_json& config, const Settings& settings) {
  const std::filesystem::path path = dir.file("config.json");
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) {
    // No record, but results: whose settings made them is unknown, so nothing may be added to them.
    for (const char* result : {"points", "results.csv", "metrics.csv", "summary.md"})
      if (std::filesystem::exists(dir.file(result), ec))
        throw UsageError("'" + dir.path().string() + "' holds results (" + result +
                         ") but no config.json, so it is unknown which settings made them and a resume could mix "
                         "them with other settings: use another --out folder, or delete the folder");
    return;
  }
  nlohmann::ordered_json before;
  try {
    before = read_json_file(path, "the run's record",
                            "so it is unknown which settings the folder's results have: use another --out folder, or "
                            "delete the folder");
  } catch (const Error& err) {
    throw UsageError(err.what());
  }
  if (!before.is_object())
    throw UsageError("'" + path.string() + "' is not a run's record: use another --out folder, or delete the folder");

  std::vector<std::string> differences;
  compare(before, config, "experiment", "experiment", differences);
  compare(before, config, "seed", "--seed", differences);
  const nlohmann::ordered_json none = nlohmann::ordered_json::object();
  const nlohmann::ordered_json& old_settings = before.contains("settings") ? before.at("settings") : none;
  const nlohmann::ordered_json& new_settings = config.at("settings");
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const auto* j : {&new_settings, &old_settings})
    if (j->is_object())
      for (const auto& item : j->items())
        if (seen.insert(item.key()).second) keys.push_back(item.key());
  // A key the folder's record lacks was added to the code after that run: the run used what the
  // code did then, which is the key's default (settings.h), so the default stands in for it.
  const nlohmann::ordered_json defaults = settings.default_json();
  for (const std::string& key : keys) {
    if (settings.has(key) && !settings.changes_results(key)) continue;
    if (old_settings.is_object() && !old_settings.contains(key) && settings.has(key)) {
      if (defaults.at(key) != new_settings.at(key))
        differences.push_back(key + " = " + defaults.at(key).dump() + " there (not recorded: the folder predates the "
                              "setting, so its default), " + new_settings.at(key).dump() + " now");
      continue;
    }
    compare(old_settings, new_settings, key, key, differences);
  }
  if (differences.empty()) return;

  std::string list, free;
  for (const std::string& d : differences) list += (list.empty() ? "" : "; ") + d;
  for (const std::string& key : keys)
    if (settings.has(key) && !settings.changes_results(key)) free += ", " + key;
  throw UsageError("'" + dir.path().string() + "' holds a run with other settings (" + list +
                   "): its results would be mixed with this run's. Resume it with its settings (see its "
                   "config.json), or use another --out folder. Only threads, device" + free +
                   " may change when resuming.");
}

void begin_run(const RunDir& dir, const nlohmann::ordered_json& config, const Settings& settings) {
  // Compared and written under the config lock (runner/run_lock.h): two jobs of one grid
  // started together with different settings cannot both pass the check.
  const RunLock config_lock = lock_run_config(dir);
  check_resume(dir, config, settings);
  dir.write_json("config.json", config);
}

}  // namespace moelab
