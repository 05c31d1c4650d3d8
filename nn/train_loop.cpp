// nn/train_loop.cpp — see train_loop.h.
#include "nn/train_loop.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <sstream>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/kernels.h"
#include "nn/moe/router.h"
#include "nn/optim/clip.h"
#include "nn/progress.h"

namespace moelab {

namespace {

double read_value(const Tensor& t) { return t.to(Device::cpu()).to(DType::Float64).item<double>(); }

// Called only when the probe read back was not finite: reads every part (extra reads are fine on
// the way to an error) and says which one is not finite.
[[noreturn]] void fail_not_finite(const LoopOptions& o, std::int64_t step, const StepLoss& s, double probe) {
  std::ostringstream parts;
  const double main = read_value(s.loss.data());
  parts << o.loss_name << " = " << main;
  bool any = !std::isfinite(main);
  for (const auto& [name, term] : s.aux.terms) {
    const double v = read_value(term.data());
    if (!std::isfinite(v)) parts << ", aux " << name << " = " << v, any = true;
  }
  if (!s.aux.terms.empty() && !any) parts << ", aux losses finite but their sum with it is " << probe;
  fail("train_loop", o.label.empty() ? "" : o.label + ": ", "the total loss is not finite at step ", step, ": ",
       parts.str(), " (try a smaller learning rate)");
}

// Whether the main loss and every aux term read back finite (only on the way to an error).
bool all_parts_finite(const StepLoss& s) {
  if (!std::isfinite(read_value(s.loss.data()))) return false;
  for (const auto& [name, term] : s.aux.terms)
    if (!std::isfinite(read_value(term.data()))) return false;
  return true;
}

}  // namespace

LoopState train_loop(Module& model, Optimizer& opt, const LoopOptions& o, const LoopHooks& hooks) {
  MOELAB_CHECK(o.steps >= 1, "train_loop", "steps must be >= 1, got ", o.steps);
  MOELAB_CHECK(o.schedule_period >= 1, "train_loop", "schedule_period must be >= 1, got ", o.schedule_period);
  MOELAB_CHECK(o.clip >= 0 && std::isfinite(o.clip), "train_loop", "clip must be finite and >= 0 (0: none), got ",
               o.clip);
  MOELAB_CHECK(o.eval_every >= 0, "train_loop", "eval_every must be >= 0, got ", o.eval_every);
  MOELAB_CHECK(o.accumulate >= 1, "train_loop", "accumulate must be >= 1, got ", o.accumulate);
  MOELAB_CHECK(static_cast<bool>(hooks.batch_loss), "train_loop", "no batch_loss function");
  MOELAB_CHECK(o.start.step >= 0 && o.start.step < o.steps, "train_loop", "a resumed run's start.step must be in [0, ",
               o.steps, "), got ", o.start.step);
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  const auto start = Clock::now();
  const std::vector<Variable> params = model.parameters();  // the clipped norm's order
  std::unique_ptr<Progress> progress;
  LoopState state = o.start;
  state.seconds = 0, state.stopped_early = false;
  model.train();

  for (std::int64_t step = o.start.step + 1; step <= o.steps; ++step) {
    const auto t0 = Clock::now();
    if (o.schedule) opt.set_lr_factor(o.schedule->factor((step - 1) / o.schedule_period));
    opt.zero_grad();
    std::vector<StepLoss> micro;  // kept for the error message only (their graphs are freed)
    Tensor probe;                 // the value read back: the main loss (mean over micro-batches)
    std::int64_t items = 0;
    for (std::int64_t m = 0; m < o.accumulate; ++m) {
      StepLoss s = hooks.batch_loss(step);
      MOELAB_CHECK(s.loss.defined() && s.loss.numel() == 1, "train_loop", "batch_loss must return a 0-d loss, got ",
                   s.loss.defined() ? s.loss.data().str() : std::string("an undefined Variable"));
      if (!progress && !o.label.empty()) progress = std::make_unique<Progress>(o.label, o.steps, s.items * o.accumulate, o.start.step);
      Variable total = s.loss;
      Tensor part = s.loss.data();  // loss itself, or loss + 0 * total (NaN when total is not finite)
      if (const Variable aux = s.aux.total(); aux.defined()) {
        total = s.loss + aux;
        part = kernels::add(s.loss.data(), kernels::mul(total.data(), 0.0));
      }
      if (o.accumulate > 1) {  // each micro-batch counts 1/A: the mean over the A micro-batches
        total = total * (1.0 / static_cast<double>(o.accumulate));
        part = kernels::mul(part, 1.0 / static_cast<double>(o.accumulate));
      }
      total.backward();  // accumulates into the parameters' gradients
      probe = probe.defined() ? kernels::add(probe, part) : part;
      items += s.items;
      micro.push_back(std::move(s));
    }
    if (o.clip > 0) clip_grad_norm_tensor(params, o.clip);  // stays on the device
    opt.step();
    const double value = read_value(probe);  // the step's one device->host read
    if (!std::isfinite(value) && !o.allow_non_finite) {
      for (const StepLoss& s : micro)  // name the first micro-batch with a non-finite part
        if (!all_parts_finite(s)) fail_not_finite(o, step, s, value);
      fail_not_finite(o, step, micro.back(), value);  // every part finite, their sum not
    }
    state.step = step;
    state.items += items;
    state.train_seconds += since(t0);

    if (progress) progress->update(step, value);
    if (hooks.on_step) hooks.on_step(state, value);
    const bool last = step == o.steps;
    if (last || (o.eval_every > 0 && step % o.eval_every == 0)) {
      const bool stop = hooks.evaluate && hooks.evaluate(state);
      model.train();
      if (stop && !last) {
        state.stopped_early = true;
        break;
      }
    }
  }
  state.seconds = since(start);
  if (progress) {
    progress->finish(hooks.summary ? hooks.summary(state)
                                   : "trained " + std::to_string(state.step) + " steps in " +
                                         clock_text(state.train_seconds) +
                                         (state.stopped_early ? " (stopped early)" : ""));
  }
  return state;
}

}  // namespace moelab
