// nn/optim/schedule.cpp — the lr-factor schedules and their factory (formulas in schedule.h).
#include "nn/optim/schedule.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace moelab {
namespace {

void check_step(std::int64_t step, const char* op) {
  MOELAB_CHECK(step >= 0, op, "step must be >= 0 (step 0 is the first update), got ", step);
}

void check_lengths(std::int64_t total, std::int64_t warmup, const char* op) {
  MOELAB_CHECK(total >= 1, op, "total_steps must be >= 1, got ", total);
  MOELAB_CHECK(warmup >= 0 && warmup <= total, op, "warmup_steps must be in [0, total_steps = ", total, "], got ",
               warmup);
}

// (s + 1) / W during warmup.
double warmup_factor(std::int64_t step, std::int64_t warmup) {
  return static_cast<double>(step + 1) / static_cast<double>(warmup);
}

std::string known_names() {
  std::string out;
  for (const std::string& n : schedule_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

double ConstantSchedule::factor(std::int64_t step) const {
  check_step(step, "ConstantSchedule::factor");
  return 1.0;
}

WarmupLinearSchedule::WarmupLinearSchedule(std::int64_t total_steps, std::int64_t warmup_steps)
    : total_(total_steps), warmup_(warmup_steps) {
  check_lengths(total_, warmup_, "WarmupLinearSchedule");
}

double WarmupLinearSchedule::factor(std::int64_t step) const {
  check_step(step, "WarmupLinearSchedule::factor");
  if (step < warmup_) return warmup_factor(step, warmup_);
  if (step >= total_) return 0.0;
  return static_cast<double>(total_ - step) / static_cast<double>(total_ - warmup_);
}

CosineSchedule::CosineSchedule(std::int64_t total_steps, std::int64_t warmup_steps, double min_factor)
    : total_(total_steps), warmup_(warmup_steps), min_factor_(min_factor) {
  check_lengths(total_, warmup_, "CosineSchedule");
  MOELAB_CHECK(std::isfinite(min_factor) && min_factor >= 0 && min_factor <= 1, "CosineSchedule",
               "min_factor must be in [0, 1], got ", min_factor);
}

double CosineSchedule::factor(std::int64_t step) const {
  check_step(step, "CosineSchedule::factor");
  if (step < warmup_) return warmup_factor(step, warmup_);
  if (step >= total_) return min_factor_;
  const double progress = static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_);
  return min_factor_ + (1.0 - min_factor_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"constant", "warmup-linear", "cosine", "warmup-cosine"};
  return names;
}

std::unique_ptr<Schedule> make_schedule(const std::string& name, std::int64_t total_steps, std::int64_t warmup_steps,
                                        double min_factor) {
  const char* op = "make_schedule";
  MOELAB_CHECK(total_steps >= 1, op, "schedule '", name, "': total_steps must be >= 1, got ", total_steps);
  if (name == "constant") {
    MOELAB_CHECK(warmup_steps == 0, op, "schedule 'constant' takes no warmup, got warmup_steps ", warmup_steps,
                 " (use 'warmup-linear' or 'warmup-cosine')");
    MOELAB_CHECK(min_factor == 0.0, op, "schedule 'constant' takes no min_factor, got ", min_factor);
    return std::make_unique<ConstantSchedule>();
  }
  if (name == "warmup-linear") {
    MOELAB_CHECK(min_factor == 0.0, op, "schedule 'warmup-linear' decays to 0 and takes no min_factor, got ",
                 min_factor, " (use 'warmup-cosine' for a floor)");
    return std::make_unique<WarmupLinearSchedule>(total_steps, warmup_steps);
  }
  if (name == "cosine") {
    MOELAB_CHECK(warmup_steps == 0, op, "schedule 'cosine' takes no warmup, got warmup_steps ", warmup_steps,
                 " (use 'warmup-cosine')");
    return std::make_unique<CosineSchedule>(total_steps, 0, min_factor);
  }
  if (name == "warmup-cosine") return std::make_unique<CosineSchedule>(total_steps, warmup_steps, min_factor);
  fail(op, "unknown schedule '", name, "'; known schedules: ", known_names());
}

std::int64_t warmup_steps_for(std::int64_t total_steps, double fraction) {
  MOELAB_CHECK(total_steps >= 1, "warmup_steps_for", "total_steps must be >= 1, got ", total_steps);
  MOELAB_CHECK(std::isfinite(fraction) && fraction >= 0 && fraction <= 1, "warmup_steps_for",
               "fraction must be in [0, 1], got ", fraction);
  return std::llround(fraction * static_cast<double>(total_steps));
}

}  // namespace moelab
