// runner/run_folder_check.cpp — see run_folder_check.h.
#include "runner/run_folder_check.h"

#include <string>
#include <system_error>

#include "core/safe_file.h"
#include "runner/settings.h"

namespace moelab {

namespace {

// The entries moelab makes before config.json exists (runner/run_lock.h, run_start.h) or
// while it writes a file whole (checked_file.h, plot.cpp): a folder holding only these is a run
// folder whose first run stopped early, or one that a job of its grid is starting in right now.
bool made_before_config(const std::string& name) {
  return name == ".lock" || name == ".config.lock" || name == ".locks" || name.find(".partial.") != std::string::npos ||
         name.rfind(".moelab-write-test", 0) == 0 || name.rfind(".plot.", 0) == 0;
}

[[noreturn]] void refuse_entry(const std::string& argument, const std::filesystem::path& folder,
                               const std::filesystem::path& entry, const std::string& kind) {
  throw UsageError(argument + " '" + folder.string() + "': '" + entry.string() + "' is " + kind +
                   ". A run folder holds only moelab's own regular files and folders, and moelab never writes "
                   "through links or into special files (a link there could turn a write against a file "
                   "elsewhere). Remove it, or use another " + argument + " folder");
}

}  // namespace

void check_run_folder_contents(const std::filesystem::path& folder, const std::string& argument) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) return;

  // Not a run folder: files of the user's with no record of a run. Checked on the top level
  // first, so that `--out ~` costs one listing, not a walk of the home folder.
  std::string foreign;
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "config.json" || made_before_config(name)) continue;
    if (count++ == 0) foreign = name;
  }
  if (ec)
    throw UsageError(argument + " '" + folder.string() + "': cannot list the folder: " + ec.message());
  // Listed before config.json is looked for: a job of the grid starting now writes config.json
  // before anything else, so a folder seen with other entries has config.json by now.
  const std::string config_kind = file_kind((folder / "config.json").string());
  if (config_kind == "nothing" && count > 0)
    throw UsageError(argument + " '" + folder.string() + "' holds files and no config.json ('" + foreign + "'" +
                     (count > 1 ? " and " + std::to_string(count - 1) + " more" : std::string()) +
                     "): it is not a moelab run folder, and a run would replace any of its files that have moelab's "
                     "names. Use a new or empty folder (or one a moelab run made)");

  // Links and special files, at any depth (a run folder has a few levels: points/, checkpoints/).
  // The iterator does not follow links to folders, so a link is seen as a link.
  if (config_kind != "nothing" && config_kind != "a regular file") refuse_entry(argument, folder, folder / "config.json", config_kind);
  for (auto it = std::filesystem::recursive_directory_iterator(folder, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    const std::filesystem::file_status status = it->symlink_status(ec);
    if (ec) break;
    if (std::filesystem::is_regular_file(status) || std::filesystem::is_directory(status)) continue;
    refuse_entry(argument, folder, it->path(), file_kind(it->path().string()));
  }
  if (ec) throw UsageError(argument + " '" + folder.string() + "': cannot read the folder: " + ec.message());
}

}  // namespace moelab
