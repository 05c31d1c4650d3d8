// bench/softmoe_order_bench.cpp — Soft MoE's two expert orders (nn/moe/soft_moe.h) on the MNIST
// model's training step, side by side.
//
// One step = the implicit-bias paper's MNIST network (tasks/softmoe_mnist/mnist_model.h) on a
// fixed random batch: B = 256 images as [256, 4, 196] tokens, one Soft MoE layer of n one-slot
// experts of hidden width floor(784 / n), a bias-free 784 -> 10 head, cross-entropy, backward,
// Adam. For each n, the same layer alternates expert_order = Slots and Tokens step by step (so
// both see the same machine load), after 2 warm-up steps each, and the median step time of each
// is printed. A benchmark, not a test: it asserts nothing about speed. nn/moe/soft_moe.h's Auto
// rule (token order for f < 16) comes from these medians.
//
//   softmoe_order_bench [--experts 8,16,32,64,128] [--steps 30] [--threads 1]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "autograd/ops.h"
#include "core/factories.h"
#include "core/parallel.h"
#include "core/random.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/moe/soft_moe.h"
#include "nn/optim/adam.h"

using namespace moelab;

int main(int argc, char** argv) {
  CLI::App app{"softmoe_order_bench: the MNIST Soft MoE training step in slot order and in token order"};
  std::vector<std::int64_t> experts{8, 16, 32, 64, 128};
  int steps = 30, threads = 1;
  app.add_option("--experts", experts, "n values (hidden width floor(784 / n))")->delimiter(',');
  app.add_option("--steps", steps, "timed steps per order and n")->check(CLI::Range(1, 100000));
  app.add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
  set_num_threads(threads);

  const std::int64_t B = 256, m = 4, d = 196;
  Generator data(1);
  const Tensor x = normal({B, m, d}, 0.0, 1.0, data);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(B));
  for (std::int64_t i = 0; i < B; ++i) labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 10);
  const Tensor y = from_vector(labels, {B});

  std::printf("n     f    slot order  token order   (median ms per step, %d steps each, %d thread(s))\n", steps, threads);
  for (std::int64_t n : experts) {
    if (n < 1 || n > 784) continue;
    SoftMoEConfig c;
    c.d = d, c.experts = n, c.hidden = 784 / n;
    Generator gen(2);
    SoftMoE layer(c, gen);  // one layer, its order switched between steps
    Linear head(784, 10, gen, /*bias=*/false);
    std::vector<Variable> params = layer.parameters();
    for (const Variable& p : head.parameters()) params.push_back(p);
    Adam opt(params, AdamOptions{.lr = 1e-3});
    std::vector<double> times[2];
    for (int step = 0; step < 2 * (steps + 2); ++step) {
      const int order = step % 2;  // 0: slots, 1: tokens
      layer.set_expert_order(order == 0 ? ExpertOrder::Slots : ExpertOrder::Tokens);
      const auto start = std::chrono::steady_clock::now();
      opt.zero_grad();
      Variable loss = nn::cross_entropy(head.forward(reshape(layer.forward(Variable(x)), {B, 784})), y);
      loss.backward();
      opt.step();
      (void)loss.data().item<float>();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (step >= 4) times[order].push_back(ms);
    }
    for (auto& t : times) std::sort(t.begin(), t.end());
    std::printf("%-5lld %-4lld %8.2f    %8.2f\n", static_cast<long long>(n), static_cast<long long>(784 / n),
                times[0][times[0].size() / 2], times[1][times[1].size() / 2]);
  }
  return 0;
}
