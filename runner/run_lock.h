// runner/run_lock.h — one writer per run folder: advisory locks held for the run's life.
//
// Two processes on one --out once both started: every point trained twice, curve rows written
// twice, two reports drawing one PNG at once, and with different settings (steps=40 and steps=41)
// both exited 0 with config.json saying 40 and every point holding 41 steps. Now:
//
//   mode all, train, report  hold the folder ALONE: an exclusive flock on <out>/.lock
//   mode point, list         SHARE the folder with other jobs of the grid (a shared flock on
//                            <out>/.lock), and a point holds its own point alone (an exclusive
//                            flock on <out>/.locks/<point>), so the jobs of one grid run in
//                            parallel, each point at most once at a time
//   config.json              checked and written under an exclusive flock on <out>/.config.lock,
//                            waited for (held for milliseconds), so two jobs started together
//                            with different settings cannot both pass the check: the second sees
//                            the first one's config.json and is refused
// A lock that is taken fails at once (no waiting) with a UsageError (exit 2) naming the holder:
// its pid and command line, which each holder writes into its lock file. flock locks belong to
// the open file, so the kernel releases them when the process ends in any way, kill -9 included:
// a crashed run never leaves the folder locked. Locks are advisory: they keep moelab processes
// apart, not other programs.
//
//   const RunLock lock = lock_run_folder(dir, "all", "", command_line);   // or "point", "moe-d64-..."
//   begin_run(dir, config, settings);   // takes the config lock itself
//   ... run ...                          // lock released when `lock` goes away (or the process ends)
#pragma once

#include <string>
#include <vector>

#include "runner/run_dir.h"

namespace moelab {

class RunLock {
 public:
  RunLock() = default;
  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

  // Adds a held lock (its file descriptor; closed, and so released, by the destructor).
  void hold(int fd) { fds_.push_back(fd); }

 private:
  std::vector<int> fds_;
};

// Locks the run folder for a run in `mode` (the job modes of runner/job_grid.h; "" or any
// other: alone); `point` names the point of mode=point. UsageError naming the holder when taken.
RunLock lock_run_folder(const RunDir& dir, const std::string& mode, const std::string& point,
                        const std::string& command);

// The exclusive lock on <out>/.config.lock, waited for: begin_run holds it while it compares and
// writes config.json.
RunLock lock_run_config(const RunDir& dir);

}  // namespace moelab
