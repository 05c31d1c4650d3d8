// runner/run_folder_check.h — what a folder must hold before moelab writes into it as a run
// folder: moelab's own files, as regular files and folders, or nothing.
//
// A run folder is often someone else's: a colleague's run resumed, a tarball of results reported
// again, a shared scratch space. Two ways it could turn moelab's writes against its user:
//
//   - a symbolic link where moelab keeps a file (`fig.gnuplot.log -> ~/thesis.tex`, `.lock ->
//     ~/victim`, `.locks -> /elsewhere`): a write by name goes through it. Every writer opens
//     without following links (core/safe_file.h), and before that this check refuses a folder
//     holding any link, FIFO, socket or device anywhere inside (exit 2, naming the entry and what
//     it is), so the user hears about it before anything is written;
//   - a folder that is not a run folder at all (`--out ~/figures`, holding the user's own
//     `loss_5x2.png`): moelab would replace files that happen to have its names. A folder that
//     holds anything but moelab's lock files and no config.json is refused (exit 2).
//
//   check_run_folder_contents("runs/phonebook/demo", "--out");   // before the folder is touched
#pragma once

#include <filesystem>
#include <string>

namespace moelab {

// UsageError (naming `argument`, the folder and the entry) when the existing folder `folder`
// holds no config.json but other entries than moelab's lock and temporary files (.lock,
// .config.lock, .locks/, *.partial.*, .moelab-write-test.*, .plot.*), or when anything inside it,
// at any depth, is a symbolic link or not a regular file or folder. Nothing when the folder does
// not exist. Reads only.
void check_run_folder_contents(const std::filesystem::path& folder, const std::string& argument);

}  // namespace moelab
