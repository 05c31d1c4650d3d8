// bench/train_step_bench.cpp — tokens per second of one training step of the dense decoder.
//
// One step = forward (logits [B, T, V]), cross-entropy over next tokens, backward, AdamW
// update, zero_grad: exactly what a training loop repeats. The default model is the dense
// benchmark model (vocab 64, sequence 64, batch 32, d 128, 4 heads, 4 layers, f = d), run in
// float32 on --threads threads. --experts E --k K swaps every FFN for an MoE layer of E ReLU
// experts of width f = d with top-K Mixtral gates (the MoE benchmark models: E 8, K 2; and
// E 64, K 2 with --d 64). bench/pytorch/train_step.py runs the same model in PyTorch
// eager; bench/compare_train_step.sh runs both and prints the ratio.
//
// Method: 5 warm-up steps, then --steps timed steps; reports the median step time and
// tokens/s = batch * seq / median. Writes JSON (default bench-results/train_step_moelab.json).
// A benchmark, not a test: it asserts nothing about speed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/factories.h"
#include "core/parallel.h"
#include "nn/decoder.h"
#include "nn/loss.h"
#include "nn/moe/moe_decoder.h"
#include "nn/optim/adam.h"

using namespace moelab;

int main(int argc, char** argv) {
  CLI::App app{"train_step_bench: tokens/s of one dense-decoder training step (forward, backward, AdamW)"};
  int threads = 2, steps = 30;
  std::int64_t vocab = 64, seq = 64, batch = 32, d = 128, heads = 4, layers = 4, experts = 0, k = 2;
  std::string out_path = "bench-results/train_step_moelab.json";
  app.add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--steps", steps, "timed steps (after 5 warm-up steps)")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--vocab", vocab, "vocabulary size")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  app.add_option("--seq", seq, "sequence length")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--batch", batch, "sequences per step")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--d", d, "model width")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--heads", heads, "attention heads")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--layers", layers, "decoder blocks")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--experts", experts, "MoE experts per layer (0: dense FFN)")->check(CLI::Range(0, 4096))->capture_default_str();
  app.add_option("--k", k, "experts per token (with --experts)")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--out", out_path, "JSON file to write")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    set_num_threads(threads);
    DecoderConfig config;
    config.vocab = vocab;
    config.d = d;
    config.layers = layers;
    config.heads = heads;
    config.max_seq = seq;
    Generator gen(0);
    MoEConfig moe;
    moe.experts = experts;
    moe.k = k;
    Decoder model = experts > 0 ? Decoder(config, gen, moe_feed_forward(moe)) : Decoder(config, gen);
    AdamOptions options;
    options.weight_decay = 0.1;
    AdamW optimizer(model.parameters(), options);
    // Random tokens; targets are the inputs shifted by one position (next-token prediction).
    std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * (seq + 1)));
    for (auto& id : ids) id = static_cast<std::int32_t>(gen.next_below(static_cast<std::uint32_t>(vocab)));
    Tensor all = from_vector(ids, {batch, seq + 1});
    std::vector<std::int32_t> in, target;
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t t = 0; t < seq; ++t) {
        in.push_back(ids[static_cast<std::size_t>(b * (seq + 1) + t)]);
        target.push_back(ids[static_cast<std::size_t>(b * (seq + 1) + t + 1)]);
      }
    const Tensor inputs = from_vector(in, {batch, seq}), targets = from_vector(target, {batch, seq});

    float last_loss = 0;
    auto step = [&] {
      Variable loss = nn::cross_entropy(model.forward(inputs), targets);
      loss.backward();
      optimizer.step();
      model.zero_grad();
      last_loss = loss.data().item<float>();
    };
    for (int i = 0; i < 5; ++i) step();  // (MoE aux losses are off: the router learns via its gates)
    std::vector<double> seconds;
    for (int i = 0; i < steps; ++i) {
      const auto start = std::chrono::steady_clock::now();
      step();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    const double tokens_per_second = static_cast<double>(batch * seq) / median;

    nlohmann::json report = {{"engine", "moelab"},
                             {"threads", threads},
                             {"config", {{"vocab", vocab}, {"d", d}, {"heads", heads}, {"layers", layers}, {"ffn", d}, {"experts", experts}, {"k", k}}},
                             {"batch", batch},
                             {"seq", seq},
                             {"steps", steps},
                             {"median_step_seconds", median},
                             {"min_step_seconds", seconds.front()},
                             {"tokens_per_second", tokens_per_second},
                             {"parameters", model.num_parameters()},
                             {"final_loss", last_loss}};
    const std::filesystem::path path(out_path);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << report.dump(2) << "\n";
    std::printf("moelab: %.0f tokens/s (median step %.1f ms, %d threads, %lld parameters, loss %.3f) -> %s\n",
                tokens_per_second, median * 1e3, threads, static_cast<long long>(model.num_parameters()), last_loss,
                out_path.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "train_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
