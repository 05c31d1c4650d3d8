// tests/test_checkpoint.cpp — checkpoints and weight files (nn/io/checkpoint.h): what a
// checkpoint holds, metadata and extras, loads that list every name/shape/dtype mismatch and
// change nothing when they fail, and the point of it all: training K steps, saving, loading into
// a fresh model + optimizer + generator and training N - K more gives bitwise the parameters of
// N uninterrupted steps (with SGD + Nesterov momentum and with two-group AdamW).
#include <doctest/doctest.h>

#include <cerrno>
#include <cmath>
#include <limits>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/factories.h"
#include "nn/io/checkpoint.h"
#include "nn/optim/adam.h"
#include "nn/optim/sgd.h"
#include "file_size_limit.h"
#include "temp_dir.h"

using namespace moelab;
using moelab::testing::TempDir;

namespace {

// y = x @ weight + bias: x [B, in], weight [in, out], bias [out].
class Layer : public Module {
 public:
  Layer(std::int64_t in, std::int64_t out, bool has_bias, Generator& gen, DType dtype) {
    weight = register_parameter("weight", normal({in, out}, 0.0, 0.5, gen, dtype));
    if (has_bias) bias = register_parameter("bias", normal({out}, 0.0, 0.1, gen, dtype));
  }
  Variable forward(const Variable& x) const {
    Variable y = matmul(x, weight);
    return bias.defined() ? y + bias : y;
  }
  Variable weight, bias;
};

// A ReLU MLP with layers "fc1", "fc2", ... of the given widths; the last layer's bias is optional.
class Net : public Module {
 public:
  Net(const std::vector<std::int64_t>& widths, bool last_bias, std::uint64_t seed, DType dtype = DType::Float32) {
    Generator gen(seed);
    for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
      const bool bias = last_bias || i + 2 < widths.size();
      layers.push_back(register_module("fc" + std::to_string(i + 1),
                                       std::make_shared<Layer>(widths[i], widths[i + 1], bias, gen, dtype)));
    }
  }
  Variable forward(Variable x) const {
    for (std::size_t i = 0; i < layers.size(); ++i) x = i + 1 < layers.size() ? relu(layers[i]->forward(x)) : layers[i]->forward(x);
    return x;
  }
  std::vector<std::shared_ptr<Layer>> layers;
};

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

bool same_parameters(const Module& a, const Module& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  if (pa.size() != pb.size()) return false;
  for (std::size_t i = 0; i < pa.size(); ++i)
    if (pa[i].first != pb[i].first || !bitwise_equal(pa[i].second.data(), pb[i].second.data())) return false;
  return true;
}

std::vector<Tensor> snapshot(const Module& m) {
  std::vector<Tensor> out;
  for (const auto& [name, p] : m.named_parameters()) out.push_back(p.data().clone());
  return out;
}

bool unchanged(const Module& m, const std::vector<Tensor>& before) {
  const auto params = m.named_parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!bitwise_equal(params[i].second.data(), before[i])) return false;
  return true;
}

// The message of the moelab::Error that f throws ("" and a failed check if it throws none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL_CHECK("expected a moelab::Error");
  return "";
}

bool has(const std::string& message, const std::string& part) { return message.find(part) != std::string::npos; }

// Training steps [from, to): a random regression batch from `data` each step, MSE loss, an lr
// that decays with the global step (so a resume must restore the step too).
void train(const Net& model, Optimizer& opt, Generator& data, std::int64_t from, std::int64_t to) {
  for (std::int64_t step = from; step < to; ++step) {
    const Variable x(normal({8, 3}, 0.0, 1.0, data));
    const Variable y(uniform({8, 2}, -1.0, 1.0, data));
    opt.set_lr_factor(1.0 / (1.0 + 0.1 * static_cast<double>(step)));
    opt.zero_grad();
    mse_loss(model.forward(x), y).backward();
    opt.step();
  }
}

using MakeOptimizer = std::function<std::unique_ptr<Optimizer>(const Net&)>;

std::unique_ptr<Optimizer> make_sgd(const Net& m) {
  return std::make_unique<SGD>(m.parameters(), 0.05, SGDOptions{.momentum = 0.9, .nesterov = true}, 1e-3);
}

std::unique_ptr<Optimizer> make_adamw(const Net& m) {
  // Two groups: decayed weights, undecayed biases (the usual "no decay on norms and biases").
  std::vector<Variable> weights, biases;
  for (const auto& [name, p] : m.named_parameters()) (p.rank() == 2 ? weights : biases).push_back(p);
  return std::make_unique<AdamW>(std::vector<ParamGroup>{{.params = weights, .lr = 0.01, .weight_decay = 0.1},
                                                         {.params = biases, .lr = 0.01}});
}

}  // namespace

TEST_CASE("save, load and resume training gives bitwise the same parameters as never stopping") {
  for (const auto& [name, make] : std::vector<std::pair<std::string, MakeOptimizer>>{{"sgd", make_sgd}, {"adamw", make_adamw}}) {
    CAPTURE(name);
    TempDir dir;
    const std::string path = dir.file("ckpt.safetensors");
    const std::vector<std::int64_t> widths = {3, 16, 2};
    constexpr std::int64_t N = 12, K = 5;

    // Straight through: N steps.
    Net straight(widths, true, /*seed=*/1);
    auto straight_opt = make(straight);
    Generator straight_data(7);
    train(straight, *straight_opt, straight_data, 0, N);

    // Stopped after K steps and saved...
    Net first(widths, true, 1);
    auto first_opt = make(first);
    Generator first_data(7);
    train(first, *first_opt, first_data, 0, K);
    save_checkpoint(path, first, first_opt.get(), K, &first_data, {{"run", name}});

    // ... then loaded into a fresh process's objects (another init, another seed) and finished.
    Net resumed(widths, true, /*seed=*/99);
    auto resumed_opt = make(resumed);
    Generator resumed_data(12345);
    CHECK_FALSE(same_parameters(resumed, first));
    const std::int64_t step = load_checkpoint(path, resumed, resumed_opt.get(), &resumed_data);
    CHECK(step == K);
    CHECK(same_parameters(resumed, first));
    CHECK(resumed_opt->steps_taken() == first_opt->steps_taken());
    CHECK(resumed_data.seed() == first_data.seed());
    CHECK(resumed_data.counter() == first_data.counter());
    train(resumed, *resumed_opt, resumed_data, step, N);

    CHECK(same_parameters(resumed, straight));
    CHECK(resumed_opt->steps_taken() == straight_opt->steps_taken());
    CHECK(resumed_data.counter() == straight_data.counter());

    // The comparison can fail: resuming without the optimizer's state (a fresh optimizer) or
    // without the generator's position ends somewhere else.
    Net no_state(widths, true, 99);
    auto fresh_opt = make(no_state);
    Generator data_again(12345);
    load_checkpoint(path, no_state, nullptr, &data_again);
    train(no_state, *fresh_opt, data_again, K, N);
    CHECK_FALSE(same_parameters(no_state, straight));

    Net no_gen(widths, true, 99);
    auto opt_again = make(no_gen);
    Generator restarted_data(7);
    load_checkpoint(path, no_gen, opt_again.get(), nullptr);
    train(no_gen, *opt_again, restarted_data, K, N);
    CHECK_FALSE(same_parameters(no_gen, straight));
  }
}

TEST_CASE("a checkpoint holds model.*, optimizer.* and the documented metadata") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Net model({3, 4, 2}, true, 1);
  auto opt = make_adamw(model);
  Generator data(5);
  train(model, *opt, data, 0, 2);
  save_checkpoint(path, model, opt.get(), 2, &data, {{"config", R"({"d": 4})"}});

  const SafetensorsFile file = read_safetensors(path);
  std::vector<std::string> names;
  for (const auto& [n, t] : file.tensors) names.push_back(n);
  std::vector<std::string> want = {"model.fc1.weight", "model.fc1.bias", "model.fc2.weight", "model.fc2.bias"};
  for (const auto& [n, t] : opt->state_tensors()) want.push_back("optimizer." + n);
  CHECK(names == want);
  CHECK(file.contains("optimizer.exp_avg.0"));
  CHECK(bitwise_equal(file.at("model.fc2.weight"), model.parameter("fc2.weight").data()));
  CHECK(file.metadata == std::map<std::string, std::string>{{"format", "moelab.checkpoint.v1"},
                                                             {"step", "2"},
                                                             {"optimizer.steps_taken", "2"},
                                                             {"generator.seed", "5"},
                                                             {"generator.counter", std::to_string(data.counter())},
                                                             {"config", R"({"d": 4})"}});
  std::map<std::string, std::string> metadata;
  Net other({3, 4, 2}, true, 2);
  CHECK(load_checkpoint(path, other, nullptr, nullptr, &metadata) == 2);
  CHECK(metadata.at("config") == R"({"d": 4})");
  CHECK(same_parameters(other, model));
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors"});  // no .tmp left behind

  CHECK(has(error_of([&] { save_checkpoint(path, model, nullptr, 0, nullptr, {{"step", "1"}}); }), "reserved"));
  CHECK(has(error_of([&] { save_checkpoint(path, model, nullptr, -1, nullptr); }), "step must be >= 0"));
}

TEST_CASE("loading says what the file lacks: optimizer, generator, checkpoint format") {
  TempDir dir;
  const std::string bare = dir.file("bare.safetensors"), weights = dir.file("weights.safetensors");
  Net model({3, 4, 2}, true, 1);
  save_checkpoint(bare, model, nullptr, 3, nullptr);
  save_parameters(weights, model);

  Net target({3, 4, 2}, true, 2);
  const auto before = snapshot(target);
  auto opt = make_sgd(target);
  Generator gen(0);
  CHECK(has(error_of([&] { load_checkpoint(bare, target, opt.get(), nullptr); }), "saved without an optimizer"));
  CHECK(has(error_of([&] { load_checkpoint(bare, target, nullptr, &gen); }), "saved without a generator"));
  CHECK(has(error_of([&] { load_checkpoint(weights, target, nullptr, nullptr); }), "not a moelab checkpoint"));
  CHECK(unchanged(target, before));
  CHECK(gen.counter() == 0);
  CHECK(load_checkpoint(bare, target, nullptr, nullptr) == 3);
  CHECK(same_parameters(target, model));

  // An optimizer whose state does not fit (it sees only some of the parameters): the optimizer's
  // own message, prefixed with the file, and nothing is changed.
  Net trained({3, 4, 2}, true, 1);
  auto trained_opt = make_adamw(trained);
  Generator data(3);
  train(trained, *trained_opt, data, 0, 1);
  const std::string full = dir.file("full.safetensors");
  save_checkpoint(full, trained, trained_opt.get(), 1, &data);
  Net partial({3, 4, 2}, true, 4);
  const auto partial_before = snapshot(partial);
  AdamW partial_opt(std::vector<Variable>{partial.parameter("fc1.weight")});
  const std::string message = error_of([&] { load_checkpoint(full, partial, &partial_opt, nullptr); });
  CHECK(has(message, "load_checkpoint"));
  CHECK(has(message, full));
  CHECK(has(message, "the optimizer state does not match"));
  CHECK(unchanged(partial, partial_before));
  CHECK(partial_opt.steps_taken() == 0);
}

TEST_CASE("a load into a different model lists every mismatch and changes nothing") {
  TempDir dir;
  const std::string path = dir.file("weights.safetensors");
  Net saved({3, 4, 2}, true, 1);  // fc1.weight [3, 4], fc1.bias [4], fc2.weight [4, 2], fc2.bias [2]
  save_parameters(path, saved, {{"note", "plain names"}});
  {
    const SafetensorsFile file = read_safetensors(path);
    CHECK(file.tensors.front().first == "fc1.weight");
    CHECK(file.metadata.at("note") == "plain names");
  }

  // Other widths and one more layer: three shape mismatches and a missing parameter, all reported.
  Net wider({3, 5, 2, 2}, false, 2);
  auto before = snapshot(wider);
  std::string message = error_of([&] { load_parameters(path, wider); });
  CAPTURE(message);
  CHECK(has(message, "load_parameters"));
  CHECK(has(message, path));
  CHECK(has(message, "4 problems"));
  CHECK(has(message, "missing in the file (1): fc3.weight"));
  CHECK(has(message, "fc1.weight: shape [3, 4] in the file, [3, 5] in the model"));
  CHECK(has(message, "fc1.bias: shape [4] in the file, [5] in the model"));
  CHECK(has(message, "fc2.weight: shape [4, 2] in the file, [5, 2] in the model"));
  CHECK_FALSE(has(message, "fc2.bias"));
  CHECK(unchanged(wider, before));

  // A parameter the model does not have.
  Net no_bias({3, 4, 2}, false, 2);
  before = snapshot(no_bias);
  message = error_of([&] { load_parameters(path, no_bias); });
  CHECK(has(message, "1 problem)"));
  CHECK(has(message, "not in the model (1): fc2.bias"));
  CHECK(unchanged(no_bias, before));
  // Non-strict loading from an already read file ignores it (a fixture also holding inputs).
  load_parameters(read_safetensors(path), no_bias, "", /*strict=*/false);
  CHECK(bitwise_equal(no_bias.parameter("fc2.weight").data(), saved.parameter("fc2.weight").data()));

  // Every dtype mismatch is listed.
  Net f64({3, 4, 2}, true, 2, DType::Float64);
  message = error_of([&] { load_parameters(path, f64); });
  CHECK(has(message, "4 problems"));
  for (const char* n : {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"})
    CHECK(has(message, std::string(n) + ": dtype float32 in the file, float64 in the model"));

  // The same through a checkpoint, whose parameters live under "model.".
  const std::string ckpt = dir.file("ckpt.safetensors");
  save_checkpoint(ckpt, saved, nullptr, 0, nullptr);
  message = error_of([&] { load_checkpoint(ckpt, wider, nullptr, nullptr); });
  CHECK(has(message, "load_checkpoint"));
  CHECK(has(message, "stored under 'model.'"));
  CHECK(has(message, "missing in the file (1): fc3.weight"));
  CHECK(has(message, "fc1.weight: shape [3, 4] in the file, [3, 5] in the model"));

  // A prefix selects a module's weights out of a larger file.
  Net same({3, 4, 2}, true, 3);
  load_parameters(read_safetensors(ckpt), same, "model.");
  CHECK(same_parameters(same, saved));
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors", "weights.safetensors"});
}

TEST_CASE("a negative step or optimizer.steps_taken, which save refuses, is refused on load and changes nothing") {
  TempDir dir;
  Net model({3, 4, 2}, true, 1);
  auto opt = make_adamw(model);
  Generator data(3);
  train(model, *opt, data, 0, 2);
  const std::string good = dir.file("good.safetensors");
  save_checkpoint(good, model, opt.get(), 2, &data);
  const SafetensorsFile file = read_safetensors(good);

  // The same checkpoint with one metadata value edited, as a damaged or hand-made file might be.
  const auto edited = [&](const std::string& key, const std::string& value) {
    auto metadata = file.metadata;
    metadata[key] = value;
    const std::string path = dir.file(key + "=" + value + ".safetensors");
    write_safetensors(path, file.tensors, metadata);
    return path;
  };

  // A target that has trained on other data, so that any change is visible.
  Net target({3, 4, 2}, true, 2);
  auto target_opt = make_adamw(target);
  Generator target_data(9);
  train(target, *target_opt, target_data, 0, 3);
  const auto before = snapshot(target);
  const auto opt_before = target_opt->state_tensors();
  const std::uint64_t counter_before = target_data.counter();
  const auto nothing_changed = [&] {
    CHECK(unchanged(target, before));
    CHECK(target_opt->steps_taken() == 3);
    const auto opt_after = target_opt->state_tensors();
    REQUIRE(opt_after.size() == opt_before.size());
    for (std::size_t i = 0; i < opt_after.size(); ++i) CHECK(bitwise_equal(opt_after[i].second, opt_before[i].second));
    CHECK(target_data.seed() == 9);
    CHECK(target_data.counter() == counter_before);
  };

  for (const char* value : {"-1", "-9223372036854775808"}) {
    CAPTURE(value);
    const std::string bad_step = edited("step", value);
    std::string message = error_of([&] { load_checkpoint(bad_step, target, target_opt.get(), &target_data); });
    CHECK(has(message, bad_step));
    CHECK(has(message, std::string("metadata 'step' = ") + value + " is negative"));
    nothing_changed();
    // Also without an optimizer or generator: the step is checked on every load.
    CHECK(has(error_of([&] { load_checkpoint(bad_step, target, nullptr, nullptr); }), "is negative"));
    nothing_changed();

    const std::string bad_steps_taken = edited("optimizer.steps_taken", value);
    message = error_of([&] { load_checkpoint(bad_steps_taken, target, target_opt.get(), &target_data); });
    CHECK(has(message, bad_steps_taken));
    CHECK(has(message, std::string("metadata 'optimizer.steps_taken' = ") + value + " is negative"));
    nothing_changed();
  }
  // "-0" is 0, and the unedited file still loads.
  CHECK(load_checkpoint(edited("step", "-0"), target, nullptr, nullptr) == 0);
  CHECK(load_checkpoint(good, target, target_opt.get(), &target_data) == 2);
  CHECK(target_opt->steps_taken() == 2);
  CHECK(same_parameters(target, model));
}

TEST_CASE("a checkpoint save that fails on a full disk says so and keeps the earlier checkpoint") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Net model({3, 4, 2}, true, 1);
  auto opt = make_adamw(model);
  Generator data(3);
  train(model, *opt, data, 0, 1);
  save_checkpoint(path, model, opt.get(), 1, &data);

  // Train on, then save again where the kernel refuses writes past 200 bytes (a file size limit,
  // tests/file_size_limit.h): the error names the file and the reason, and the step-1 checkpoint
  // is intact.
  train(model, *opt, data, 1, 3);
  std::string message;
  {
    testing::FileSizeLimit limit(200);
    message = error_of([&] { save_checkpoint(path, model, opt.get(), 3, &data); });
  }
  CHECK(has(message, "cannot write '" + temporary_path(path) + "'"));
  CHECK(has(message, std::strerror(EFBIG)));
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors"});
  Net restored({3, 4, 2}, true, 2);
  CHECK(load_checkpoint(path, restored, nullptr, nullptr) == 1);

  // Without the failure the same save replaces it.
  save_checkpoint(path, model, opt.get(), 3, &data);
  CHECK(load_checkpoint(path, restored, nullptr, nullptr) == 3);
  CHECK(same_parameters(restored, model));
}

TEST_CASE("weights holding NaN or inf are refused on load, naming them, unless allow_non_finite") {
  TempDir dir;
  const std::string path = dir.file("diverged.safetensors");
  Net saved({3, 4, 2}, true, 1);
  Tensor w = saved.named_parameters()[2].second.data();  // fc2.weight [4, 2]
  w.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  Tensor b = saved.named_parameters()[1].second.data();  // fc1.bias [4]
  b.data<float>()[0] = -std::numeric_limits<float>::infinity();
  save_checkpoint(path, saved, nullptr, 5, nullptr);

  Net loaded({3, 4, 2}, true, 2);
  const auto before = snapshot(loaded);
  const std::string message = error_of([&] { load_checkpoint(path, loaded, nullptr, nullptr); });
  CAPTURE(message);
  CHECK(has(message, "fc2.weight: holds NaN or infinite values"));
  CHECK(has(message, "fc1.bias: holds NaN or infinite values"));
  CHECK(!has(message, "fc1.weight"));
  CHECK(unchanged(loaded, before));  // nothing copied
  // Asked for (to look at a diverged run), it loads as it is.
  CHECK(load_checkpoint(path, loaded, nullptr, nullptr, nullptr, /*allow_non_finite=*/true) == 5);
  CHECK(std::isnan(loaded.named_parameters()[2].second.data().data<float>()[3]));
  save_parameters(dir.file("plain.safetensors"), saved);
  CHECK(has(error_of([&] { load_parameters(dir.file("plain.safetensors"), loaded); }), "holds NaN or infinite"));
  CHECK_NOTHROW(load_parameters(dir.file("plain.safetensors"), loaded, /*allow_non_finite=*/true));
}
