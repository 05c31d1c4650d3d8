// runner/subprocess.h — run another program with no shell in between.
//
// A shell command line built from text (gnuplot was once started as "cd '<dir>' && gnuplot ...")
// runs whatever that text says: a run folder named `x'; touch INJECTED; echo '` ran `touch INJECTED`, and one
// named "bob's run" could never be reported. Here the program and its arguments are a vector
// handed to execv as they are, the working folder is set with chdir in the child, and stderr goes
// to a file opened by name: no character of any of them means anything to anyone.
//
//   const std::optional<std::filesystem::path> gnuplot = find_program("gnuplot");
//   const ProgramResult r = run_program({gnuplot->string(), "fig.gp"}, run_folder, run_folder / "fig.log");
//   if (!r.ok()) throw Error("gnuplot " + r.describe());
//
// fork + execv (no posix_spawn: chdir in the child needs a GNU extension there). Between fork and
// exec the child calls only async-signal-safe functions (chdir, open, dup2, execv, _exit), so it
// is safe in a program with OpenMP threads running.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace moelab {

struct ProgramResult {
  bool started = false;   // false: fork, chdir, the stderr file or exec failed (see error)
  bool exited = false;    // it ended by exit (not by a signal)
  int exit_status = -1;   // its exit status when exited
  int signal = 0;         // the signal that ended it otherwise
  std::string error;      // why it did not start

  bool ok() const { return started && exited && exit_status == 0; }
  // "exit status 2", "killed by signal 9", "could not start: ..." for messages.
  std::string describe() const;
};

// The first executable file named `name` in the folders of $PATH (no shell, no aliases), or
// nothing. A name with a '/' is taken as a path and returned when it is executable.
std::optional<std::filesystem::path> find_program(const std::string& name);

// Runs argv[0] (a path: find_program's answer) with the arguments argv[1...] in the folder `cwd`
// (empty: this process's), its stderr (and stdout, when stdout_file is empty, to /dev/null)
// written to `stderr_file` (empty: /dev/null; never opened through a link: a link there is an
// error), and waits for it.
ProgramResult run_program(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                          const std::filesystem::path& stderr_file,
                          const std::filesystem::path& stdout_file = {});

}  // namespace moelab
