// nn/train_loop.h — the one training loop: every experiment and example trains with it, and a
// program built on core/, autograd/ and nn/ alone has it too (tasks/ builds its experiments' loops,
// tasks/common/train.h, on this one).
//
// It knows no experiment and no model: it takes any Module, the optimizer (any nn/optim one, or
// one a program writes itself), and a function that draws step s's batch and returns its loss.
// One step s (1-based), in this order:
//
//   opt.set_lr_factor(schedule.factor((s - 1) / schedule_period))   if a schedule is given
//   opt.zero_grad()
//   {loss, aux} = batch_loss(s)            loss: the main loss, 0-d (cross-entropy, MSE, ...)
//                                          aux:  the MoE routers' aux losses of that forward
//                                                (Decoder::forward(ids, aux), forward_with_aux)
//   total = loss + aux.total()             what is differentiated (= loss when aux is empty)
//   total.backward()
//   clip_grad_norm_tensor(model.parameters(), clip)                  if clip > 0
//   opt.step()
//   value = loss, read back                the step's ONE device->host read (see below)
//   progress line, on_step(state, value), and every eval_every steps and after the last:
//   evaluate(state), which may stop training early (returns true)
//
// The one read. A training step must not wait on the device more than once (README; asserted by
// tests/test_transfers.cpp). The loop reads one float: the main loss, the figure every
// experiment logs. To also check that the TOTAL loss (aux losses included) is finite without a
// second read, the value read is computed on the device as
//     probe = loss + 0 * total
// which equals loss bit for bit when total is finite (0 * x = +-0 and loss + 0 = loss), and is
// NaN when total is NaN or infinite (0 * inf = NaN). So a non-finite aux loss, or a sum that
// overflowed, is caught on the value already read. Only then, on the way to the error, does the
// loop read each part back to say which one it was:
//     "moelab::train_loop: moe-d64 book 1000: the total loss is not finite at step 312:
//      cross-entropy = 2.3012, aux load_balance = inf (try a smaller learning rate)"
// The read comes after opt.step() so that on a GPU the whole step is queued before the host waits
// for it; a non-finite step has then already updated the parameters, but the run stops there.
//
// Gradient accumulation (accumulate = A > 1): one optimizer step sums the gradients of A
// micro-batches, each drawn by its own batch_loss call (A calls per step, the same step number):
//
//   opt.zero_grad()
//   for m in 1..A: {loss_m, aux_m} = batch_loss(s); ((loss_m + aux_m.total()) / A).backward()
//   clip, opt.step(), value = mean of the A main losses (still ONE read: summed on the device)
//
// Each micro-batch's graph is freed by its backward before the next forward, so memory is that of
// one micro-batch. When every micro-batch loss is a mean over equally many items, the summed
// gradient is the mean over the A*b items: the same update as one batch of A*b, to round-off
// (tests/test_train_loop.cpp). An aux loss that is not a mean of per-item terms (the Switch
// balance loss multiplies a batch's f by its P) is the mean of the micro-batches' losses, not the
// large batch's loss; the top-k router's balance_scope = global counts f over the step's
// micro-batches so far instead (Megatron-LM's global_aux_loss, nn/moe/top_k_router.h). A = 1 is
// the loop above, bit for bit.
//
// The order of operations is that of every loop it replaced (zeroing the gradients before or
// after the forward, or reading the loss before or after the update, changes no bit), so the
// experiments train bitwise as before. The clipped norm is summed in model.parameters() order,
// which is why the loop takes the module (an optimizer's groups may hold them in another order).
//
//   LoopOptions o{.steps = 1000, .schedule = schedule.get(), .clip = 1.0, .eval_every = 100,
//                 .label = "moe-d64"};
//   LoopHooks h;
//   h.batch_loss = [&](std::int64_t) {
//     TokenBatch b = next_batch(gen);                               // ids, targets int32 [B, T]
//     StepLoss s;
//     s.loss = nn::cross_entropy(model.forward(b.inputs, s.aux), b.targets);  // logits [B, T, V]
//     s.items = b.inputs.numel();
//     return s;
//   };
//   h.evaluate = [&](const LoopState& st) { return exact_match(model) == 1.0; };  // stop early
//   LoopState done = train_loop(model, opt, o, h);
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "autograd/variable.h"
#include "nn/feed_forward.h"
#include "nn/module.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/schedule.h"

namespace moelab {

// What batch_loss returns for one step.
struct StepLoss {
  Variable loss;           // the main loss, 0-d: logged, shown, and the value read back
  AuxLosses aux;           // auxiliary losses added to it for the backward (empty: none)
  std::int64_t items = 0;  // inputs in the batch (tokens, images), for the progress line's rate
};

// Where training stands; passed to the callbacks, and returned at the end.
struct LoopState {
  std::int64_t step = 0;        // steps done (1-based index of the step just done)
  std::int64_t items = 0;       // sum of StepLoss::items over the steps done
  double train_seconds = 0;     // time in the steps, evaluations and callbacks excluded
  double seconds = 0;           // wall time since the loop started (set in the returned state)
  bool stopped_early = false;   // evaluate returned true before the last step
};

struct LoopOptions {
  std::int64_t steps = 1;              // >= 1
  const Schedule* schedule = nullptr;  // nullptr: the optimizer's learning rates as built
  std::int64_t schedule_period = 1;    // the schedule advances every this many steps (an epoch's)
  double clip = 0;                     // max global gradient norm (nn/optim/clip.h); 0: none
  std::int64_t accumulate = 1;         // micro-batches per optimizer step (>= 1), see above
  std::int64_t eval_every = 0;         // evaluate every this many steps and after the last; 0: last only
  std::string label{};                 // the progress line's label and errors' prefix; empty: no line
  std::string loss_name = "loss";      // the main loss's name in errors ("cross-entropy", "mse")
  // false (the default): a non-finite total loss is a moelab::Error. true: training goes on and
  // on_step sees the value (teacher-student: a diverged student is a result, its test loss inf).
  bool allow_non_finite = false;
  // A resumed run: where it stood when it was saved (start.step steps done, their items and
  // train_seconds); the loop goes on at step start.step + 1, 0 <= start.step < steps. The model,
  // the optimizer and whatever draws the batches must have been restored to that step by the
  // caller (tasks/common/train.h's TrainResume does it from a checkpoint).
  LoopState start{};
};

struct LoopHooks {
  // Required: draws step s's batch (s 1-based), runs the forward, returns the loss. With
  // accumulate = A it is called A times per step, each call drawing the next micro-batch.
  std::function<StepLoss(std::int64_t step)> batch_loss;
  // After every step, with the main loss read back.
  std::function<void(const LoopState& state, double loss)> on_step;
  // Every eval_every steps and after the last; true stops training (not counted at the last step).
  // The module is put back in training mode after it.
  std::function<bool(const LoopState& state)> evaluate;
  // The progress line's closing message (default: steps, time and the last loss).
  std::function<std::string(const LoopState& state)> summary;
};

// Trains `model` for options.steps steps (fewer if evaluate stops it). Throws moelab::Error on
// bad options or when the total loss of a step is not finite (naming the step and the part).
LoopState train_loop(Module& model, Optimizer& opt, const LoopOptions& options, const LoopHooks& hooks);

}  // namespace moelab
