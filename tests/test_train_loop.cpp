// tests/test_train_loop.cpp — the one training loop (nn/train_loop.h): it runs the
// steps asked for, applies the schedule (per step, or per period of steps), clips, lets the
// evaluation callback stop training early, catches a non-finite aux loss naming it and the step,
// reads back exactly one value per step (tests/counting_backend.h), and trains bitwise as the
// hand-written loop it replaced (an MoE decoder with aux losses, clipping and a schedule).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "autograd/ops.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/factories.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/moe/moe_decoder.h"
#include "nn/optim/adam.h"
#include "nn/optim/clip.h"
#include "nn/optim/schedule.h"
#include "nn/optim/sgd.h"
#include "nn/train_loop.h"
#include "tests/counting_backend.h"

using namespace moelab;
using moelab::testing::CountingBackend;

namespace {

// A linear regression y = x W^T + b on a fixed batch: x [8, 4] -> [8, 2].
class Regression : public Module {
 public:
  explicit Regression(Generator& gen) { lin_ = register_module("lin", std::make_shared<Linear>(4, 2, gen)); }
  Variable forward(const Variable& x) const { return lin_->forward(x); }

 private:
  std::shared_ptr<Linear> lin_;
};

struct RegressionData {
  Tensor x, y;
  explicit RegressionData(Generator& gen, Device device = Device::cpu())
      : x(normal({8, 4}, 0.0, 1.0, gen).to(device)), y(normal({8, 2}, 0.0, 3.0, gen).to(device)) {}
};

LoopHooks regression_hooks(Regression& model, const RegressionData& data) {
  LoopHooks h;
  h.batch_loss = [&model, &data](std::int64_t) {
    StepLoss s;
    s.loss = nn::mse_loss(model.forward(Variable(data.x)), Variable(data.y));
    s.items = 8;
    return s;
  };
  return h;
}

std::vector<std::vector<float>> values_of(const Module& m) {
  std::vector<std::vector<float>> out;
  for (const Variable& p : m.parameters()) out.push_back(p.data().to(Device::cpu()).to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE("train_loop runs the steps and applies the schedule per step or per period") {
  for (std::int64_t period : {1, 3}) {
    Generator gen(1);
    Regression model(gen);
    RegressionData data(gen);
    SGD opt(model.parameters(), 0.1);
    const auto schedule = make_schedule("warmup-linear", 4, 2);
    LoopHooks h = regression_hooks(model, data);
    std::vector<double> lrs, losses;
    h.on_step = [&](const LoopState& st, double loss) {
      CHECK(st.step == static_cast<std::int64_t>(lrs.size()) + 1);
      lrs.push_back(opt.groups()[0].lr);
      losses.push_back(loss);
    };
    const LoopState done = train_loop(model, opt, {.steps = 12, .schedule = schedule.get(), .schedule_period = period}, h);
    CHECK(done.step == 12);
    CHECK(done.items == 12 * 8);
    CHECK_FALSE(done.stopped_early);
    REQUIRE(lrs.size() == 12);
    for (std::int64_t s = 1; s <= 12; ++s)
      CHECK(lrs[static_cast<std::size_t>(s - 1)] == doctest::Approx(0.1 * schedule->factor((s - 1) / period)));
    CHECK(losses.back() < losses.front());  // it trains
  }
}

TEST_CASE("train_loop clips the global gradient norm as clip_grad_norm does") {
  auto run = [](double clip, bool by_hand) {
    Generator gen(2);
    Regression model(gen);
    RegressionData data(gen);
    SGD opt(model.parameters(), 0.05);
    if (by_hand) {
      for (int s = 0; s < 3; ++s) {
        Variable loss = nn::mse_loss(model.forward(Variable(data.x)), Variable(data.y));
        opt.zero_grad();
        loss.backward();
        if (clip > 0) clip_grad_norm(model.parameters(), clip);
        opt.step();
      }
    } else {
      train_loop(model, opt, {.steps = 3, .clip = clip}, regression_hooks(model, data));
    }
    return values_of(model);
  };
  CHECK(run(0.01, false) == run(0.01, true));
  CHECK(run(0.01, false) != run(0, false));  // the norm is far above 0.01: clipping changed the steps
  CHECK_THROWS_AS(run(-1, false), Error);
}

TEST_CASE("train_loop evaluates every eval_every steps and after the last; the evaluation may stop it") {
  Generator gen(3);
  Regression model(gen);
  RegressionData data(gen);
  SGD opt(model.parameters(), 0.01);
  std::vector<std::int64_t> evaluated;
  LoopHooks h = regression_hooks(model, data);
  h.evaluate = [&](const LoopState& st) {
    evaluated.push_back(st.step);
    model.eval();  // the loop puts it back in training mode
    return false;
  };
  LoopState done = train_loop(model, opt, {.steps = 7, .eval_every = 3}, h);
  CHECK(evaluated == std::vector<std::int64_t>{3, 6, 7});
  CHECK(model.is_training());
  CHECK_FALSE(done.stopped_early);

  evaluated.clear();
  std::int64_t steps_seen = 0;
  h.on_step = [&](const LoopState&, double) { ++steps_seen; };
  h.evaluate = [&](const LoopState& st) {
    evaluated.push_back(st.step);
    return st.step >= 4;  // "already good enough"
  };
  done = train_loop(model, opt, {.steps = 10, .eval_every = 2}, h);
  CHECK(evaluated == std::vector<std::int64_t>{2, 4});
  CHECK(done.step == 4);
  CHECK(steps_seen == 4);
  CHECK(done.stopped_early);
}

TEST_CASE("train_loop stops on a non-finite total loss, naming the step and the part") {
  Generator gen(4);
  Regression model(gen);
  RegressionData data(gen);
  SGD opt(model.parameters(), 0.01);
  for (const double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    LoopHooks h = regression_hooks(model, data);
    const auto base = h.batch_loss;
    h.batch_loss = [&, base, bad](std::int64_t step) {
      StepLoss s = base(step);
      s.aux.add("z_loss", mul(s.loss, 1e-3));
      s.aux.add("load_balance", Variable(full({}, step == 3 ? bad : 0.5)));  // goes bad at step 3
      return s;
    };
    const std::string value = std::isnan(bad) ? "nan" : "inf";
    CHECK_THROWS_WITH_AS(train_loop(model, opt, {.steps = 5, .label = "toy", .loss_name = "mse"}, h),
                         doctest::Contains("moelab::train_loop: toy: the total loss is not finite at step 3: mse = "),
                         Error);
    try {
      train_loop(model, opt, {.steps = 5, .label = "toy", .loss_name = "mse"}, h);
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK(what.find("aux load_balance = " + value) != std::string::npos);
      CHECK(what.find("z_loss") == std::string::npos);  // the finite parts are not blamed
    }
  }
  // The main loss itself.
  LoopHooks h = regression_hooks(model, data);
  h.batch_loss = [&](std::int64_t) {
    StepLoss s;
    s.loss = mul(nn::mse_loss(model.forward(Variable(data.x)), Variable(data.y)), INFINITY);
    return s;
  };
  CHECK_THROWS_WITH_AS(train_loop(model, opt, {.steps = 2, .loss_name = "mse"}, h),
                       doctest::Contains("not finite at step 1: mse = inf"), Error);
  // allow_non_finite (teacher-student's diverged students): training goes on, on_step sees it.
  std::vector<double> seen;
  h.on_step = [&](const LoopState&, double v) { seen.push_back(v); };
  CHECK(train_loop(model, opt, {.steps = 2, .allow_non_finite = true}, h).step == 2);
  CHECK((seen.size() == 2 && !std::isfinite(seen[0]) && !std::isfinite(seen[1])));
}

TEST_CASE("train_loop with accumulate = A: A micro-batches give one large batch's update, to round-off") {
  // float64 regression on 8 rows: one step on all 8 against A = 2 and 4 micro-batches of 8 / A rows
  // each (the MSE of each a mean over its rows), with SGD and a schedule (SGD, not Adam: Adam's
  // update hardly changes when every gradient is scaled, so it would hide a missing 1/A), then
  // once more with clipping active.
  Generator gen(9);
  const Tensor x = normal({8, 4}, 0.0, 1.0, gen, DType::Float64), y = normal({8, 2}, 0.0, 3.0, gen, DType::Float64);
  auto train = [&](std::int64_t A, double clip) {
    Generator init(3);
    Linear model(4, 2, init, true, DType::Float64);
    SGD opt(model.parameters(), 0.05);
    const auto schedule = make_schedule("cosine", 3);
    std::int64_t calls = 0;
    std::vector<double> values;
    LoopHooks h;
    h.batch_loss = [&](std::int64_t) {
      const std::int64_t rows = 8 / A, start = (calls++ % A) * rows;
      StepLoss s;
      s.loss = nn::mse_loss(model.forward(narrow(Variable(x), 0, start, rows)), narrow(Variable(y), 0, start, rows));
      s.items = rows;
      return s;
    };
    h.on_step = [&](const LoopState& st, double v) {
      values.push_back(v);
      CHECK(st.items == 8 * st.step);  // every micro-batch's items counted
    };
    train_loop(model, opt, {.steps = 3, .schedule = schedule.get(), .clip = clip, .accumulate = A}, h);
    CHECK(calls == 3 * A);
    std::vector<double> w = model.weight().data().to_vector<double>(), b = model.bias().data().to_vector<double>();
    w.insert(w.end(), b.begin(), b.end());
    return std::make_pair(w, values);
  };
  for (const auto& [A, clip] : std::vector<std::pair<std::int64_t, double>>{{2, 0.0}, {4, 0.0}, {2, 0.5}, {4, 0.5}}) {
    INFO("A = ", A, ", clip ", clip);
    const auto [one, one_values] = train(1, clip);
    const auto [acc, acc_values] = train(A, clip);
    double worst = 0;
    for (std::size_t i = 0; i < one.size(); ++i) worst = std::max(worst, std::abs(acc[i] - one[i]));
    CHECK(worst < 1e-13);
    for (std::size_t i = 0; i < one_values.size(); ++i)  // the value read: the mean of the micro losses
      CHECK(acc_values[i] == doctest::Approx(one_values[i]).epsilon(1e-12));
  }
  Generator init(3);
  Linear model(4, 2, init, true, DType::Float64);
  Adam opt(model.parameters(), AdamOptions{.lr = 1e-2});
  LoopHooks h;
  h.batch_loss = [&](std::int64_t) {
    StepLoss s;
    s.loss = nn::mse_loss(model.forward(Variable(x)), Variable(y));
    return s;
  };
  CHECK_THROWS_WITH(train_loop(model, opt, {.steps = 1, .accumulate = 0}, h), doctest::Contains("accumulate"));
}

TEST_CASE("train_loop reads back one value per step, aux losses and clipping included") {
  CountingBackend counting(cpu_backend());
  ScopedBackendOverride stand_in(DeviceType::CUDA, counting);
  const Device device = Device::cuda();
  Generator gen(5);
  Regression model(gen);
  model.to(device);
  RegressionData data(gen, device);
  Adam opt(model.parameters(), AdamOptions{.lr = 1e-2});
  const auto schedule = make_schedule("cosine", 4);
  LoopHooks h = regression_hooks(model, data);
  const auto base = h.batch_loss;
  h.batch_loss = [&, base](std::int64_t step) {
    StepLoss s = base(step);
    s.aux.add("z_loss", mul(s.loss, 1e-3));
    return s;
  };
  std::vector<std::int64_t> reads, read_bytes;
  h.on_step = [&](const LoopState&, double) {
    reads.push_back(counting.reads());
    read_bytes.push_back(counting.read_bytes());
    counting.reset();
  };
  counting.reset();
  train_loop(model, opt, {.steps = 4, .schedule = schedule.get(), .clip = 0.5}, h);
  CHECK(reads == std::vector<std::int64_t>(4, 1));
  CHECK(read_bytes == std::vector<std::int64_t>(4, 4));
}

TEST_CASE("train_loop trains an MoE decoder bitwise as the hand-written loop it replaced") {
  DecoderConfig c;
  c.vocab = 32, c.d = 16, c.layers = 2, c.heads = 2, c.max_seq = 8;
  MoEConfig m;
  m.experts = 4, m.k = 2;
  m.router_options = {{"load_balance", "0.01"}, {"z_loss", "0.001"}};
  const std::int64_t steps = 4;
  auto batch = [&](Generator& g) {
    std::vector<std::int32_t> v(2 * 8 * 2);
    for (auto& id : v) id = static_cast<std::int32_t>(g.next_below(32));
    const std::vector<std::int32_t> x(v.begin(), v.begin() + 16), y(v.begin() + 16, v.end());
    return std::make_pair(from_vector(x, {2, 8}), from_vector(y, {2, 8}));
  };
  auto run = [&](bool loop) {
    Generator init(7), data_gen(8);
    Decoder model(c, init, moe_feed_forward(m));
    AdamW opt(model.parameters(), AdamOptions{.lr = 1e-2});
    const auto schedule = make_schedule("warmup-linear", steps, 1);
    const std::vector<Variable> params = model.parameters();
    std::vector<double> losses;
    if (loop) {
      LoopHooks h;
      h.batch_loss = [&](std::int64_t) {
        const auto [x, y] = batch(data_gen);
        StepLoss s;
        s.loss = nn::cross_entropy(model.forward(x, s.aux), y);
        return s;
      };
      h.on_step = [&](const LoopState&, double v) { losses.push_back(v); };
      train_loop(model, opt, {.steps = steps, .schedule = schedule.get(), .clip = 0.1}, h);
    } else {  // tasks/common/train.cpp's loop before it moved into train_loop
      for (std::int64_t step = 0; step < steps; ++step) {
        opt.set_lr_factor(schedule->factor(step));
        const auto [x, y] = batch(data_gen);
        AuxLosses aux;
        Variable loss = nn::cross_entropy(model.forward(x, aux), y);
        losses.push_back(loss.data().to(DType::Float64).item<double>());
        if (const Variable total = aux.total(); total.defined()) loss = loss + total;
        opt.zero_grad();
        loss.backward();
        clip_grad_norm_tensor(params, 0.1);
        opt.step();
      }
    }
    return std::make_pair(values_of(model), losses);
  };
  const auto by_loop = run(true), by_hand = run(false);
  CHECK(by_loop.second == by_hand.second);
  CHECK(by_loop.first == by_hand.first);
}
