// nn/progress.cpp — see progress.h.
#include "nn/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace moelab {

std::string clock_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

Progress::Progress(std::string label, std::int64_t total_steps, std::int64_t tokens_per_step, std::int64_t first_step)
    : label_(std::move(label)),
      total_(std::max<std::int64_t>(1, total_steps)),
      tokens_per_step_(tokens_per_step),
      first_step_(first_step),
      last_printed_step_(first_step),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_),
      tty_(isatty(fileno(stdout)) != 0) {}

double Progress::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(std::int64_t done, double loss) {
  // An exponential moving average: single-batch losses are noisy.
  smoothed_loss_ = done <= first_step_ + 1 ? loss : 0.9 * smoothed_loss_ + 0.1 * loss;
  const auto now = std::chrono::steady_clock::now();
  const bool due = tty_ ? std::chrono::duration<double>(now - last_draw_).count() >= 0.25 || done == total_
                        : done * 10 / total_ > last_printed_step_ * 10 / total_ || done == total_;
  if (!due) return;
  last_draw_ = now;
  last_printed_step_ = done;
  const double elapsed = elapsed_seconds();
  const std::int64_t here = std::max<std::int64_t>(1, done - first_step_);  // steps this line has seen
  const double left = elapsed / static_cast<double>(here) * static_cast<double>(total_ - done);
  char rate[32] = "";
  if (tokens_per_step_ > 0 && elapsed > 0)
    std::snprintf(rate, sizeof rate, "  %.1fk tok/s",
                  static_cast<double>(here * tokens_per_step_) / elapsed / 1000.0);
  std::printf("%s[%s] step %*lld/%lld  loss %.4f%s  %s left%s", tty_ ? "\r" : "", label_.c_str(),
              static_cast<int>(std::to_string(total_).size()), static_cast<long long>(done),
              static_cast<long long>(total_), smoothed_loss_, rate, clock_text(left).c_str(), tty_ ? "\033[K" : "\n");
  std::fflush(stdout);
  line_open_ = tty_;
}

void Progress::finish(const std::string& message) {
  if (line_open_) std::printf("\r\033[K");
  line_open_ = false;
  std::printf("[%s] %s\n", label_.c_str(), message.c_str());
  std::fflush(stdout);
}

}  // namespace moelab
