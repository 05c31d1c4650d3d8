// nn/optim/schedule.h — learning-rate schedules: the factor multiplying each group's base_lr.
//
// Convention (PyTorch's LambdaLR): factor(s) is the factor of the lr used by optimizer step s,
// counting from 0, so factor(0) applies to the very first update. A training loop does
//   for (s = 0; s < T; ++s) { opt.set_lr_factor(schedule.factor(s)); ...; opt.step(); }
// With T total steps, W warmup steps (0 <= W <= T) and a minimum factor f_min in [0, 1]:
//
//   constant       factor(s) = 1
//   warmup-linear  s <  W:  (s + 1) / W                 first step 1/W, step W-1 reaches 1
//                  W <= s:  (T - s) / (T - W)           1 at s = W, 1/(T-W) at the last step
//                                                       T-1, 0 at s = T (and after)
//   cosine         f_min + (1 - f_min) * (1 + cos(pi * s / T)) / 2
//                                                       1 at s = 0, f_min at s = T (and after)
//   warmup-cosine  s <  W:  (s + 1) / W
//                  W <= s:  f_min + (1 - f_min) * (1 + cos(pi * (s - W) / (T - W))) / 2
//                                                       1 at s = W, f_min at s = T (and after)
// Warmup starts at 1/W rather than 0 so no step is wasted with a zero learning rate; linear decay
// ends at 0 exactly when training ends (step T, one past the last). Steps past T keep the final
// factor. The experiments use W = 20% of T (warmup_steps_for(T, 0.2)).
//
// make_schedule("warmup-cosine", T, W, f_min) builds one by name; bad names or arguments throw
// moelab::Error saying what is wrong and what is allowed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moelab {

class Schedule {
 public:
  virtual ~Schedule() = default;
  // The lr factor of optimizer step `step` (0-based); step must be >= 0.
  virtual double factor(std::int64_t step) const = 0;
  // The name make_schedule() knows it by ("constant", "warmup-linear", ...).
  virtual std::string name() const = 0;
};

class ConstantSchedule final : public Schedule {
 public:
  double factor(std::int64_t step) const override;
  std::string name() const override { return "constant"; }
};

class WarmupLinearSchedule final : public Schedule {
 public:
  WarmupLinearSchedule(std::int64_t total_steps, std::int64_t warmup_steps);
  double factor(std::int64_t step) const override;
  std::string name() const override { return "warmup-linear"; }

 private:
  std::int64_t total_, warmup_;
};

// Cosine decay over [warmup, total] after an optional linear warmup ("cosine" has warmup 0).
class CosineSchedule final : public Schedule {
 public:
  CosineSchedule(std::int64_t total_steps, std::int64_t warmup_steps = 0, double min_factor = 0.0);
  double factor(std::int64_t step) const override;
  std::string name() const override { return warmup_ > 0 ? "warmup-cosine" : "cosine"; }

 private:
  std::int64_t total_, warmup_;
  double min_factor_;
};

// The names make_schedule accepts, in the order listed in error messages.
const std::vector<std::string>& schedule_names();

// "constant" ignores total_steps (it must still be >= 1) and takes no warmup or minimum;
// "warmup-linear" takes no minimum (it decays to 0); "cosine" takes no warmup.
std::unique_ptr<Schedule> make_schedule(const std::string& name, std::int64_t total_steps,
                                        std::int64_t warmup_steps = 0, double min_factor = 0.0);

// round(fraction * total_steps), e.g. W = warmup_steps_for(T, 0.2); fraction in [0, 1].
std::int64_t warmup_steps_for(std::int64_t total_steps, double fraction);

}  // namespace moelab
