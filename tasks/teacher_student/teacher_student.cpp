// tasks/teacher_student/teacher_student.cpp — see teacher_student.h.
#include "tasks/teacher_student/teacher_student.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "autograd/no_grad.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "nn/loss.h"
#include "nn/optim/adam.h"
#include "nn/optim/schedule.h"
#include "nn/train_loop.h"

namespace moelab::teacher_student {

std::string MoESpec::name() const { return std::to_string(experts) + "e" + std::to_string(k) + "a"; }

std::int64_t MoESpec::total_parameters() const {
  const std::int64_t router_weights = experts * d + (router_bias ? experts : 0);
  const std::int64_t per_expert = 2 * d * width + width + d;
  return router_weights + experts * per_expert;
}

MoEConfig MoESpec::config() const {
  MoEConfig c;
  c.d = d;
  c.experts = experts;
  c.k = k;
  c.ffn = width;
  c.router = router;
  if (router == "topk")
    c.router_options = {{"gates", gates}, {"bias", router_bias ? "true" : "false"}};  // the paper's student
  else if (router_bias)
    c.router_options["bias"] = "true";
  for (const auto& [key, value] : router_options) c.router_options[key] = value;
  c.bias = true;  // ReLU experts with biases, as in the paper's code
  return c;
}

MoESpec spec_for(std::int64_t k, std::int64_t ratio, std::int64_t active, std::int64_t d) {
  MoESpec s;
  s.k = k;
  s.experts = ratio * k;
  if (k < 1 || active < k)
    throw Error("teacher_student::spec_for: " + std::to_string(active) + " active neurons cannot be shared by k = " +
                                std::to_string(k) + " active experts (each needs at least one)");
  s.width = std::llround(static_cast<double>(active) / static_cast<double>(k));
  s.d = d;
  return s;
}

std::uint64_t name_hash(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::unique_ptr<MoELayer> make_teacher(const MoESpec& spec, std::uint64_t seed) {
  Generator gen(seed);
  MoEConfig config = spec.config();
  // A teacher never trains, so a k = 1 teacher's constant gates (topk-softmax over one logit is 1:
  // each input goes to its best expert with weight 1) are what it is, not the trap the router
  // refuses by default (nn/moe/top_k_router.h). A k = 1 student is still refused.
  if (config.router == "topk" && config.k == 1) config.router_options["allow_constant_gates"] = "true";
  auto teacher = std::make_unique<MoELayer>(config, gen);
  teacher->eval();
  return teacher;
}

std::unique_ptr<MoELayer> make_student(const MoESpec& spec, Generator& gen) {
  return std::make_unique<MoELayer>(spec.config(), gen);
}

void copy_parameters(const MoELayer& from, MoELayer& to) {
  const auto src = from.named_parameters();
  const auto dst = to.named_parameters();
  if (src.size() != dst.size())
    throw Error("teacher_student::copy_parameters: " + std::to_string(src.size()) + " parameters into " +
                std::to_string(dst.size()));
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (src[i].first != dst[i].first || src[i].second.shape() != dst[i].second.shape())
      throw Error("teacher_student::copy_parameters: '" + src[i].first + "' " + src[i].second.data().str() +
                  " does not match '" + dst[i].first + "' " + dst[i].second.data().str());
    Tensor target = dst[i].second.data();
    kernels::copy(target, src[i].second.data());
  }
}

Batch draw_batch(MoELayer& teacher, std::int64_t n, Generator& gen) {
  const std::int64_t d = teacher.config().d;
  Batch b;
  // Drawn where the teacher lives (on a GPU without a host copy); on the CPU fill_normal draws
  // exactly what normal({n, d}, 0, 1, gen) would (core/kernels.h).
  b.x = Tensor::empty({n, d}, DType::Float32, teacher.device());
  kernels::fill_normal(b.x, 0.0, 1.0, gen);
  NoGradGuard no_grad;
  b.y = teacher.forward(Variable(b.x)).data();
  return b;
}

namespace {

double mean_square(const Tensor& t) {
  double s = 0;
  for (float v : t.to_vector<float>()) s += static_cast<double>(v) * v;
  return s / static_cast<double>(t.numel());
}

}  // namespace

double normalised_loss(MoELayer& student, const Batch& batch) {
  NoGradGuard no_grad;
  const double mse = nn::mse_loss(student.forward(Variable(batch.x)), Variable(batch.y)).data().item<float>();
  return mse / mean_square(batch.y);
}

TrainResult train_student(MoELayer& student, MoELayer& teacher, const TrainOptions& o, Generator& data_gen) {
  if (o.epochs < 1 || o.batch < 1 || o.samples_per_epoch < o.batch || o.test_samples < 1)
    throw Error("teacher_student::train_student: need epochs >= 1, batch >= 1, samples_per_epoch >= batch, "
                "test_samples >= 1");
  const std::int64_t steps_per_epoch = o.samples_per_epoch / o.batch;  // whole batches only
  AdamW opt(student.parameters(), AdamOptions{.lr = o.lr, .weight_decay = o.weight_decay});
  const std::unique_ptr<Schedule> schedule = make_schedule("cosine", o.epochs);

  const auto start = std::chrono::steady_clock::now();
  // One test set for the whole run, drawn first from the data generator and kept for every
  // epoch's evaluation, as the granularity paper's code keeps one: the epochs' test losses are
  // then comparable, and the best epoch is not picked on a lucky draw.
  const Batch test = draw_batch(teacher, o.test_samples, data_gen);
  TrainResult r;
  r.best_test = INFINITY;
  double train_sum = 0;
  Tensor last_y;  // the step's targets, to normalise its loss
  LoopHooks hooks;
  hooks.batch_loss = [&](std::int64_t) {
    const Batch b = draw_batch(teacher, o.batch, data_gen);  // fresh samples every step
    last_y = b.y;
    StepLoss s;
    s.loss = nn::mse_loss(student.forward(Variable(b.x)), Variable(b.y));
    s.items = o.batch;
    return s;
  };
  hooks.on_step = [&](const LoopState&, double loss) { train_sum += loss / mean_square(last_y); };
  hooks.evaluate = [&](const LoopState& state) {  // after every epoch
    const std::int64_t e = state.step / steps_per_epoch - 1;
    EpochRecord rec{e + 1, o.lr * schedule->factor(e), train_sum / static_cast<double>(steps_per_epoch),
                    normalised_loss(student, test)};
    if (!std::isfinite(rec.test)) rec.test = INFINITY;  // a diverged run never counts as the best
    r.epochs.push_back(rec);
    if (rec.test < r.best_test) r.best_test = rec.test, r.best_epoch = rec.epoch;
    train_sum = 0;
    return false;
  };
  hooks.summary = [&](const LoopState&) {
    char msg[128];
    std::snprintf(msg, sizeof msg, "best normalised test loss %.4f (epoch %lld)", r.best_test,
                  static_cast<long long>(r.best_epoch));
    return std::string(msg);
  };
  // The cosine decay is stepped once per epoch (schedule_period), as the paper's code steps it; a
  // student that diverges trains on and is recorded with an infinite test loss, not an error.
  train_loop(student, opt,
             LoopOptions{.steps = o.epochs * steps_per_epoch, .schedule = schedule.get(),
                         .schedule_period = steps_per_epoch, .eval_every = steps_per_epoch, .label = o.label,
                         .loss_name = "mse", .allow_non_finite = true},
             hooks);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace moelab::teacher_student
