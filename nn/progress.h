// nn/progress.h — the terminal progress line of a long run.
//
//   [moe-d64-8e book 1000] step  600/1200  loss 1.2345  41.2k tok/s  0:12 left
//
// On a terminal the line is redrawn in place (carriage return) at most 4 times a second; when
// stdout is a file or a pipe (CI, `| tee`), a full line is printed every 10% of the steps instead,
// so logs stay short. finish() ends the line with a closing message.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace moelab {

// "0:07", "3:25", "1:02:03"
std::string clock_text(double seconds);

class Progress {
 public:
  // total_steps >= 1; tokens_per_step for the rate (0: no rate shown); first_step: the steps
  // already done when this line starts (a resumed run), left out of the rate and the time left.
  Progress(std::string label, std::int64_t total_steps, std::int64_t tokens_per_step, std::int64_t first_step = 0);

  // After step `done` (1-based) with the training loss of that step.
  void update(std::int64_t done, double loss);
  // Prints "label: message" on its own line (ending the in-place line first).
  void finish(const std::string& message);
  double elapsed_seconds() const;

 private:
  std::string label_;
  std::int64_t total_, tokens_per_step_, first_step_, last_printed_step_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool tty_, line_open_ = false;
  double smoothed_loss_ = 0;
};

}  // namespace moelab
