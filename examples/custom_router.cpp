// examples/custom_router.cpp — a routing scheme defined outside nn/, registered by name at start-up,
// and trained inside an MoE decoder without touching the MoE layer, the kernels or the autograd.
//
// The scheme (examples/hash_router.h, shared with examples/moelab_with_hash.cpp): a hash router by
// locality-sensitive hashing. b = ceil(log2 E) fixed random hyperplanes, never trained, send token
// t to the expert whose number has bit i set when x_t . r_i > 0, with gate 1 and k = 1; the
// hyperplanes are a buffer, so checkpoints keep them. Every step stays on x's device.
//
// What it takes (nn/moe/router.h, nn/moe/router_toolkit.h):
//   1. a class deriving from Router whose route(x: [T, d]) fills PlanParts (chosen ids int32
//      [T, k], gates [T, k] as a Variable: autograd ops if the router should learn) and returns
//      make_routing_plan(parts, E);
//   2. a factory (const RouterConfig&, Generator&) -> shared_ptr<Router> that checks the options
//      with check_router_options / router_option_*;
//   3. register_router("hash", factory) before the first model is built; then MoEConfig{.router =
//      "hash"} (or any other registered name, see --help) builds it in every MoE layer;
//   4. the contract (tests/router_contract.h): `custom_router --check-contract` runs it, and ctest
//      runs that (example_custom_router_contract);
//   5. to run it in the experiments, the `moelab` command line with it registered:
//      examples/moelab_with_hash.cpp (`moelab_with_hash phonebook --set router=hash --set k=1`).
//
// The task is examples/char_lm.cpp's: predict the next character of the Shakespeare sonnets
// (examples/data/sonnets.txt), here with a 2-layer MoE decoder of 4 experts. The program prints
// the training loss as it falls and how many tokens each layer's experts received.
//
//   build/custom_router                                  # defaults: 300 steps, the hash router
//   build/custom_router --check-contract                 # the router contract for 'hash'
//   build/custom_router --router topk                    # the same model with learned top-1 routing
//   build/custom_router --router expert-choice --router-option capacity_factor=1
//                       # (expert choice leaks future tokens in a decoder; see its header)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/openmp_wait.h"
#include "core/parallel.h"
#include "examples/hash_router.h"
#include "nn/moe/moe_decoder.h"
#include "nn/moe/router.h"
#include "nn/moe/router_toolkit.h"
#include "nn/nn.h"
#include "nn/optim/adam.h"
#include "nn/train_loop.h"
#include "tests/router_contract.h"

#ifndef MOELAB_SOURCE_DIR
#define MOELAB_SOURCE_DIR "."
#endif

using namespace moelab;
using moelab::examples::make_hash_router;

namespace {

// The router contract (tests/router_contract.h) for this scheme: what `--check-contract` runs.
int check_contract() {
  testing::RouterContract c;
  c.layer.d = 6, c.layer.experts = 4, c.layer.k = 1, c.layer.ffn = 5, c.layer.bias = true, c.layer.router = "hash";
  c.router_learns = false;  // constant gates: only the experts learn
  const std::string failures = testing::router_contract_failures(c);
  std::printf("router contract for 'hash': %s\n%s", failures.empty() ? "every clause holds" : "FAILED", failures.c_str());
  return failures.empty() ? 0 : 1;
}

// ---------------------------------------------------------------- the program
struct Options {
  std::string text = std::string(MOELAB_SOURCE_DIR) + "/examples/data/sonnets.txt";
  std::int64_t steps = 300, d = 32, layers = 2, heads = 4, seq = 32, batch = 16, experts = 4, k = 1, ffn = 64;
  std::string router = "hash";
  std::vector<std::string> router_options;  // KEY=VALUE
  double lr = 3e-3, clip = 1.0;
  std::uint64_t seed = 0;
  int threads = num_threads();
  std::int64_t print_every = 50;
  bool require_loss_drop = false;
};

struct BadOption : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The text as token ids (every distinct byte is a token).
std::vector<std::int32_t> load_text(const std::string& path, std::int64_t& vocab) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) throw Error("cannot open the text file '" + path + "' (give another with --text)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  int id_of[256];
  bool seen[256] = {};
  for (unsigned char ch : text) seen[ch] = true;
  vocab = 0;
  for (int c = 0; c < 256; ++c) id_of[c] = seen[c] ? static_cast<int>(vocab++) : -1;
  std::vector<std::int32_t> ids;
  for (unsigned char ch : text) ids.push_back(id_of[ch]);
  return ids;
}

// Each MoE layer's tokens per expert in the last forward, e.g. "[130 101 143 138] [98 ...]".
std::string load_summary(const Decoder& model) {
  std::string s;
  for (std::int64_t i = 0; i < model.config().layers; ++i) {
    const auto* moe = dynamic_cast<const MoELayer*>(&model.layer(i).ffn());
    if (moe == nullptr) continue;
    s += i ? " [" : "[";
    const std::vector<std::int32_t> load = moe->last_tokens_per_expert().to_vector<std::int32_t>();
    for (std::size_t e = 0; e < load.size(); ++e) s += (e ? " " : "") + std::to_string(load[e]);
    s += "]";
  }
  return s;
}

int run(const Options& o) {
  std::int64_t V = 0;
  const std::vector<std::int32_t> ids = load_text(o.text, V);
  if (static_cast<std::int64_t>(ids.size()) < o.seq + 2)
    throw BadOption("the text is shorter than one window of --seq + 1 characters");

  DecoderConfig config;
  config.vocab = V, config.d = o.d, config.layers = o.layers, config.heads = o.heads, config.max_seq = o.seq;
  MoEConfig moe;
  moe.experts = o.experts, moe.k = o.k, moe.ffn = o.ffn, moe.router = o.router;
  for (const std::string& kv : o.router_options) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw BadOption("--router-option wants KEY=VALUE, got '" + kv + "'");
    moe.router_options[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  Generator init_gen(o.seed), data_gen(o.seed + 1);
  std::unique_ptr<Decoder> model_ptr;
  try {
    config.validate();
    model_ptr = std::make_unique<Decoder>(config, init_gen, moe_feed_forward(moe));  // builds the routers by name
  } catch (const Error& e) {
    throw BadOption(e.what());  // an unknown router, a bad router option, d not divisible by heads, ...
  }
  Decoder& model = *model_ptr;
  AdamW opt(model.parameters(), {.lr = o.lr});
  std::printf("router '%s' (registered: ", o.router.c_str());
  const auto names = router_names();
  for (std::size_t i = 0; i < names.size(); ++i) std::printf("%s%s", i ? ", " : "", names[i].c_str());
  std::printf("); MoE decoder d %lld, %lld layers, %lld experts, k %lld: %lld parameters; %lld steps, %d threads\n",
              static_cast<long long>(o.d), static_cast<long long>(o.layers), static_cast<long long>(o.experts),
              static_cast<long long>(o.k), static_cast<long long>(model.num_parameters()),
              static_cast<long long>(o.steps), num_threads());

  const auto start = std::chrono::steady_clock::now();
  const auto starts = static_cast<std::uint32_t>(ids.size() - static_cast<std::size_t>(o.seq));
  double initial = 0, window = 0, last_window = 0;
  std::int64_t window_steps = 0;
  // The one training loop (nn/train_loop.h) adds the aux losses to the task loss for
  // the backward, clips, steps AdamW and checks that the total is finite.
  LoopHooks hooks;
  hooks.batch_loss = [&](std::int64_t) {
    std::vector<std::int32_t> x, y;  // B random windows: inputs and next characters
    for (std::int64_t b = 0; b < o.batch; ++b) {
      const auto s = ids.begin() + data_gen.next_below(starts);
      x.insert(x.end(), s, s + o.seq);
      y.insert(y.end(), s + 1, s + o.seq + 1);
    }
    StepLoss s;  // s.aux is filled by the forward; empty for the hash router (it has no aux loss)
    s.loss = nn::cross_entropy(model.forward(from_vector(x, {o.batch, o.seq}), s.aux), from_vector(y, {o.batch, o.seq}));
    return s;
  };
  hooks.on_step = [&](const LoopState& state, double value) {
    if (state.step == 1) {  // the task loss of the untrained model (the first step's forward)
      initial = value;
      std::printf("step %5d  loss %.4f (untrained; uniform ln %lld = %.3f)  tokens per expert %s\n", 0, value,
                  static_cast<long long>(V), std::log(static_cast<double>(V)), load_summary(model).c_str());
    }
    window += value, ++window_steps;
    if (state.step % o.print_every == 0 || state.step == o.steps) {
      last_window = window / static_cast<double>(window_steps);
      std::printf("step %5lld  loss %.4f  tokens per expert %s\n", static_cast<long long>(state.step), last_window,
                  load_summary(model).c_str());
      std::fflush(stdout);
      window = 0, window_steps = 0;
    }
  };
  train_loop(model, opt, LoopOptions{.steps = o.steps, .clip = o.clip, .loss_name = "cross-entropy"}, hooks);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("trained in %.1f s: loss %.4f -> %.4f (mean of the last %lld steps)\n", seconds, initial, last_window,
              static_cast<long long>(std::min(o.print_every, o.steps)));
  if (o.require_loss_drop && !(last_window < 0.8 * initial)) {
    std::fprintf(stderr, "custom_router: the loss fell from %.4f only to %.4f (required: below 80%%, %.4f)\n", initial,
                 last_window, 0.8 * initial);
    return 3;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  wait_passively_unless_set(argv);  // OpenMP threads sleep between regions (core/openmp_wait.h)
  // The new scheme, registered before any model is built; from here on it is a router like "topk".
  register_router("hash", make_hash_router);

  CLI::App app{"custom_router: a hash router defined outside nn/ (examples/hash_router.h), registered by name, "
                "trained in an MoE decoder"};
  Options o;
  const auto positive = CLI::Range(std::int64_t{1}, std::int64_t{1} << 40);
  app.add_option("--text", o.text, "the text to learn (plain bytes)")->capture_default_str();
  app.add_option("--steps", o.steps, "training steps")->check(positive)->capture_default_str();
  std::string names;  // the registry's names, so --help lists every scheme, built-in or not
  for (const std::string& n : router_names()) names += (names.empty() ? "" : ", ") + n;
  app.add_option("--router", o.router,
                 "routing scheme by registered name: " + names + " (hash: examples/hash_router.h)")
      ->capture_default_str();
  bool contract = false;
  app.add_flag("--check-contract", contract, "run the router contract (tests/router_contract.h) for 'hash' and exit");
  app.add_option("--router-option", o.router_options,
                 "KEY=VALUE passed to the router (repeatable), e.g. seed=7 for hash, load_balance=0.01 for topk");
  app.add_option("--experts", o.experts, "experts per MoE layer")->check(positive)->capture_default_str();
  app.add_option("--k", o.k, "experts per token (the hash router needs 1)")->check(positive)->capture_default_str();
  app.add_option("--d", o.d, "model width")->check(positive)->capture_default_str();
  app.add_option("--ffn", o.ffn, "expert hidden width")->check(positive)->capture_default_str();
  app.add_option("--layers", o.layers, "decoder blocks")->check(positive)->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads (d / heads must be even)")->check(positive)->capture_default_str();
  app.add_option("--seq", o.seq, "characters per training window")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "windows per step")->check(positive)->capture_default_str();
  app.add_option("--lr", o.lr, "AdamW learning rate")->check(CLI::Range(1e-9, 10.0))->capture_default_str();
  app.add_option("--seed", o.seed, "seed for weights, hyperplanes and batches")->capture_default_str();
  app.add_option("--threads", o.threads, "CPU threads (default: every core)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--print-every", o.print_every, "print a progress line every N steps")
      ->check(positive)
      ->capture_default_str();
  app.add_flag("--require-loss-drop", o.require_loss_drop,
               "exit with status 3 unless the mean loss of the last --print-every steps is below 80% of the "
               "untrained loss (ctest uses it)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help exits 0; a bad option or value exits 2
  }
  set_num_threads(o.threads);
  try {
    if (contract) return check_contract();
    return run(o);
  } catch (const BadOption& e) {
    std::fprintf(stderr, "custom_router: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_router: %s\n", e.what());
    return 1;
  }
}
