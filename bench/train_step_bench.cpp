// bench/train_step_bench.cpp — tokens per second of one training step of the dense decoder.
//
// One step = forward (logits [B, T, V]), cross-entropy over next tokens, backward, AdamW
// update, zero_grad: exactly what a training loop repeats. The default model is the dense
// benchmark model (vocab 64, sequence 64, batch 32, d 128, 4 heads, 4 layers, f = d), run in
// float32 (--precision bf16: mixed precision, autograd/precision.h) on --threads threads. --experts E --k K swaps every FFN for an MoE layer of E ReLU
// experts of width f = d with top-K Mixtral gates (the MoE benchmark models: E 8, K 2; and
// E 64, K 2 with --d 64). --ffn F sets the FFN's (or each expert's) hidden width f (0: f = d): the
// benchmark models keep f = d; --ffn 512 at d 128 is the common 4d FFN, whose down projection's
// gradients read rows 512 floats apart (core/cpu/gemm_f32.cpp). bench/pytorch/train_step.py (same
// options) runs the same model in PyTorch eager; bench/compare_train_step.sh runs both and prints
// the ratio.
//
// On a GPU (--device cuda): the model is moved there (Module::to) before the optimizer is built,
// the batch is copied there once, and the clock is read only after Backend::synchronize() has
// waited for every queued kernel. --preset gpu sets the GPU benchmark's scale (the issue's): d 512,
// 8 layers, 8 heads, sequence 256, batch 64, with the CPU benchmark's vocabulary of 64 kept, so
// that the time goes to the decoder blocks being compared, not to an LM head (--vocab 32768 gives a
// realistic one); options given explicitly override the preset. bench/compare_gpu.sh runs it and
// PyTorch eager for the dense, 8-expert and 64-expert (top-2) models on one GPU.
//
// Model FLOPs and the fraction of peak. Per token, a training step costs (forward + backward =
// 3 x forward, every matrix product once forward and twice backward):
//   6 * (N_active + V * d)      N_active = non-embedding parameters one token uses (attention,
//                               norms, router and k experts; nn/moe/moe_decoder.h), V * d the LM head
//   + 12 * L * T * d            attention scores q k^T and their use p v: 2 * 2 * T * d per token per
//                               layer forward, the full T x T matrix (what both engines compute;
//                               causal masking discards half of it)
// model_flops_per_step = batch * T * that; achieved = model_flops_per_step / median step time;
// fraction_of_peak = achieved / --peak-tflops, against the peak of the precision used. On a GPU
// the default is the H100 SXM's (and H200's) dense rate for it: fp32 67 TFLOPS (no tensor cores,
// what moelab's cuBLAS calls use: cuda/context.cu), tf32 495, bf16 990 (H100 PCIe: fp32 51);
// tf32x3 (float32 accuracy from three TF32 products) is held to float32's 67. On
// the CPU there is no default, since a datasheet's is not what one core does: --cpu-peak-from
// reads the measured one from bench/fma_peak's JSON (the best rate of the instruction set the GEMM
// kernels run, or under --precision bf16 of the bf16 instruction the products run, times the
// threads: bench/cpu_peak.h), or --peak-tflops takes it as a number; with neither,
// fraction_of_peak is null. A CPU bf16 run records that instruction as "bf16_kernel".
//
// Method: 5 warm-up steps, then --steps timed steps; reports the median step time and
// tokens/s = batch * seq / median. Writes JSON (default bench-results/train_step_moelab.json).
// A benchmark, not a test: it asserts nothing about speed.
//
// --gemm-profile (CPU, fp32) also times every matrix product of the timed steps by shape
// (core/cpu/gemm_profile.h) and writes the table into the JSON ("gemm_profile": per shape the calls
// and milliseconds a step, its GFLOP/s and its share of the products' time) and the largest rows to
// stdout: which products run slowly inside the step, which a sampling profiler cannot tell apart.
// The clock reads make the profiled steps a little slower than unprofiled ones.
//
// --perf-control CTL[,ACK] turns `perf record -D -1 --control fifo:CTL,ACK` on for the timed steps
// only, so that a profile leaves out building the model and the warm-up (bench/perf_control.h;
// bench/step_profile.sh uses it).
//
// --paired-fp32 (with --precision bf16) also builds a float32 twin of the model (the same
// initialisation, its own optimizer) and alternates the two, one step each, through the warm-up
// and the timed steps: on a shared machine whose speed drifts by tens of percent within a minute,
// two runs one after the other compare the drift more than the precisions, while neighbouring
// steps see the same machine. The JSON adds "paired_fp32" (the twin's median and fastest step,
// tokens/s, and its last loss: that of a float32 run of as many steps) and "bf16_over_fp32" (the ratio of the medians, and the median of the step-by-step
// ratios).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/precision.h"
#include "bench/cpu_peak.h"
#include "bench/perf_control.h"
#include "bench/write_json.h"
#include "core/backend.h"
#include "core/cpu/cpu_features.h"
#include "core/cpu/gemm_profile.h"
#include "core/factories.h"
#include "core/openmp_wait.h"
#include "core/parallel.h"
#include "nn/decoder.h"
#include "nn/loss.h"
#include "nn/moe/moe_decoder.h"
#include "nn/optim/adam.h"

using namespace moelab;

namespace {

// The products of `steps` profiled steps (core/cpu/gemm_profile.h), per step, in the JSON shape by
// shape; printed grouped by everything but m (an MoE's expert products differ in m alone, one
// shape per expert's row count), the largest groups first.
nlohmann::json gemm_profile_report(int steps, double step_seconds_total) {
  const std::vector<cpu::GemmShapeTime> shapes = cpu::gemm_profile();
  double total = 0;
  for (const cpu::GemmShapeTime& s : shapes) total += s.seconds;
  nlohmann::json rows = nlohmann::json::array();
  struct Group {
    cpu::GemmShapeTime sum;  // m unused
    std::int64_t m_min, m_max, shapes;
    double flops;
  };
  std::vector<Group> groups;
  for (const cpu::GemmShapeTime& s : shapes) {
    rows.push_back({{"m", s.m}, {"k", s.k}, {"n", s.n}, {"trans_a", s.trans_a}, {"trans_b", s.trans_b},
                    {"strided", s.strided}, {"calls_per_step", double(s.calls) / steps},
                    {"ms_per_step", 1e3 * s.seconds / steps}, {"gflops", s.flops() / s.seconds / 1e9},
                    {"share", s.seconds / total}});
    auto same = [&](const Group& g) {
      return g.sum.k == s.k && g.sum.n == s.n && g.sum.trans_a == s.trans_a && g.sum.trans_b == s.trans_b &&
             g.sum.strided == s.strided;
    };
    auto g = std::find_if(groups.begin(), groups.end(), same);
    if (g == groups.end()) {
      groups.push_back({s, s.m, s.m, 1, s.flops()});
    } else {
      g->sum.calls += s.calls, g->sum.seconds += s.seconds, g->flops += s.flops(), g->shapes += 1;
      g->m_min = std::min(g->m_min, s.m), g->m_max = std::max(g->m_max, s.m);
    }
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& x, const Group& y) { return x.sum.seconds > y.sum.seconds; });
  std::printf("the step's products (m x k x n; T: that operand transposed; s: blocks of a larger matrix), "
              "%.1f ms a step = %.1f%% of the step:\n",
              1e3 * total / steps, 100.0 * total / step_seconds_total);
  for (std::size_t i = 0; i < groups.size() && i < 12; ++i) {
    const Group& g = groups[i];
    const std::string m = g.shapes == 1 ? std::to_string(g.m_min)
                                        : std::to_string(g.m_min) + "-" + std::to_string(g.m_max);
    std::printf("  %9s x %5lld%s x %5lld%s%s  %7.0f calls  %6.2f ms  %5.1f GFLOP/s  %4.1f%%\n", m.c_str(),
                static_cast<long long>(g.sum.k), g.sum.trans_a ? "T" : " ", static_cast<long long>(g.sum.n),
                g.sum.trans_b ? "T" : " ", g.sum.strided ? " s" : "  ", double(g.sum.calls) / steps,
                1e3 * g.sum.seconds / steps, g.flops / g.sum.seconds / 1e9, 100.0 * g.sum.seconds / total);
  }
  if (groups.size() > 12) {
    double rest = 0, rest_flops = 0;
    for (std::size_t i = 12; i < groups.size(); ++i) rest += groups[i].sum.seconds, rest_flops += groups[i].flops;
    std::printf("  %zu more groups  %6.2f ms  %5.1f GFLOP/s  %4.1f%%\n",
                groups.size() - 12, 1e3 * rest / steps, rest_flops / rest / 1e9, 100.0 * rest / total);
  }
  return {{"steps", steps},
          {"ms_per_step", 1e3 * total / steps},
          {"share_of_step", total / step_seconds_total},
          {"method", "each float32 product timed on its thread (steady_clock), summed by shape over the timed "
                     "steps; with several threads, products that run side by side add up"},
          {"shapes", rows}};
}

}  // namespace

int main(int argc, char** argv) {
  moelab::wait_passively_unless_set(argv);  // as moelab's programs run (core/openmp_wait.h)
  CLI::App app{"train_step_bench: tokens/s of one dense-decoder training step (forward, backward, AdamW)"};
  int threads = 2, steps = 30;
  std::int64_t vocab = 64, seq = 64, batch = 32, d = 128, heads = 4, layers = 4, experts = 0, k = 2, ffn = 0;
  std::string out_path = "bench-results/train_step_moelab.json", device_name = "cpu", preset = "cpu";
  std::string precision = "fp32";
  double peak_tflops = 0.0;  // 0: not given (the default depends on the device and precision)
  app.add_option("--device", device_name, "where to run the step")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--preset", preset,
                 "model scale: cpu (the defaults below) or gpu (seq 256, batch 64, d 512, 8 heads, 8 layers); "
                 "options given explicitly win")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->capture_default_str();
  app.add_option("--precision", precision,
                 "the products' arithmetic: fp32 (full float32, the default); bf16 (bfloat16 operands, float32 "
                 "sums, everything else float32: autograd/precision.h); tf32 (GPU only: every float32 product "
                 "on the tensor cores with 10-bit mantissas, cuBLAS's TF32 mode and moelab's grouped tile); "
                 "tf32x3 (GPU only: the expert products on the tensor cores at float32 accuracy, three TF32 "
                 "products each; the dense products full float32: core/backend.h)")
      ->check(CLI::IsMember({"fp32", "bf16", "tf32", "tf32x3"}))
      ->capture_default_str();
  CLI::Option* peak_option =
      app.add_option("--peak-tflops", peak_tflops,
                     "the peak in TFLOPS for fraction_of_peak, of the precision used (default on a GPU: H100 SXM / "
                     "H200, fp32 67, tf32 495, bf16 990; on the CPU none: pass fma_peak's figure x threads, or "
                     "use --cpu-peak-from)")
          ->check(CLI::PositiveNumber);
  std::string cpu_peak_file;
  app.add_option("--cpu-peak-from", cpu_peak_file,
                 "CPU: take the peak for fraction_of_peak from bench/fma_peak's JSON measured on this machine (the "
                 "best GFLOP/s of the instruction set the GEMM kernels run, x --threads; with --precision bf16, of "
                 "the bf16 instruction the products run: AMX's TDPBF16PS or VDPBF16PS, the float32 set's where "
                 "they widen)")
      ->excludes(peak_option);
  app.add_option("--threads", threads, "CPU threads")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--steps", steps, "timed steps (after 5 warm-up steps)")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("--vocab", vocab, "vocabulary size")->check(CLI::Range(2, 1 << 20))->capture_default_str();
  app.add_option("--seq", seq, "sequence length")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--batch", batch, "sequences per step")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--d", d, "model width")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  app.add_option("--heads", heads, "attention heads")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--layers", layers, "decoder blocks")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--ffn", ffn, "FFN (expert) hidden width; 0: d")->check(CLI::Range(0, 1 << 20))->capture_default_str();
  app.add_option("--experts", experts, "MoE experts per layer (0: dense FFN)")->check(CLI::Range(0, 4096))->capture_default_str();
  app.add_option("--k", k, "experts per token (with --experts)")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--out", out_path, "JSON file to write")->capture_default_str();
  bool gemm_profile = false;
  bool paired_fp32 = false;
  std::string perf_control_spec;
  app.add_option("--perf-control", perf_control_spec,
                 "CTL[,ACK]: the FIFOs of `perf record -D -1 --control fifo:CTL,ACK`; sampling is enabled for the "
                 "timed steps only (bench/step_profile.sh)");
  app.add_flag("--paired-fp32", paired_fp32,
               "with --precision bf16: also train a float32 twin of the model, alternating their steps one by one, "
               "and report both and the bf16 / fp32 speed ratio (\"paired_fp32\", \"bf16_over_fp32\" in the JSON)");
  app.add_flag("--gemm-profile", gemm_profile,
               "time every matrix product of the timed steps by shape (CPU, fp32): a table on stdout and "
               "\"gemm_profile\" in the JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (preset == "gpu") {  // the GPU scale, where not given on the command line
    auto unless_given = [&](const char* option, std::int64_t& value, std::int64_t preset_value) {
      if (app.count(option) == 0) value = preset_value;
    };
    unless_given("--seq", seq, 256);
    unless_given("--batch", batch, 64);
    unless_given("--d", d, 512);
    unless_given("--heads", heads, 8);
    unless_given("--layers", layers, 8);
  }
  if (!cpu_peak_file.empty() && device_name != "cpu") {
    std::fprintf(stderr, "train_step_bench: --cpu-peak-from is the CPU's peak: use --peak-tflops with --device %s\n",
                 device_name.c_str());
    return 2;
  }
  if (!cpu_peak_file.empty() && precision != "fp32" && precision != "bf16") {
    std::fprintf(stderr, "train_step_bench: --cpu-peak-from holds the CPU's float32 and bf16 peaks: use it with "
                         "--precision fp32 or bf16\n");
    return 2;
  }
  std::string peak_source;
  if (!cpu_peak_file.empty()) {
    try {
      const moelab::bench::CpuPeak peak = moelab::bench::cpu_peak_from(cpu_peak_file, threads, precision == "bf16");
      peak_tflops = peak.tflops, peak_source = peak.source;
    } catch (const Error& e) {
      std::fprintf(stderr, "train_step_bench: --cpu-peak-from: %s\n", e.what());
      return 2;
    }
  } else if (peak_tflops > 0) {
    peak_source = "--peak-tflops";
  }
  if (paired_fp32 && precision != "bf16") {
    std::fprintf(stderr, "train_step_bench: --paired-fp32 compares a bf16 step with its float32 twin: use it with "
                         "--precision bf16\n");
    return 2;
  }
  if (gemm_profile && (device_name != "cpu" || precision != "fp32")) {
    std::fprintf(stderr, "train_step_bench: --gemm-profile times the CPU's float32 products: use it with --device "
                         "cpu --precision fp32\n");
    return 2;
  }
  moelab::bench::PerfControl perf_control;
  if (!perf_control_spec.empty()) {
    try {
      perf_control.open(perf_control_spec);
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "train_step_bench: --perf-control: %s\n", e.what());
      return 2;
    }
  }
  try {
    set_num_threads(threads);
    Device device = Device::cpu();
    if (device_name == "cuda") {
      if (!cuda_available()) {
        std::fprintf(stderr, "train_step_bench: --device cuda: %s\n", cuda_probe().description.c_str());
        return 2;
      }
      device = Device::cuda();
      if (precision == "tf32") set_cuda_float32_products(CudaFloat32Products::TF32);
      if (precision == "tf32x3") set_cuda_float32_products(CudaFloat32Products::TF32x3);
      // tf32x3 against float32's peak: it is float32 arithmetic in accuracy, whatever units run it.
      if (peak_tflops == 0) {
        peak_tflops = precision == "tf32" ? 495.0 : precision == "bf16" ? 990.0 : 67.0;
        peak_source = "H100 SXM / H200 datasheet, " + precision;
      }
    } else if (precision == "tf32" || precision == "tf32x3") {
      std::fprintf(stderr, "train_step_bench: --precision %s is for --device cuda\n", precision.c_str());
      return 2;
    }
    DecoderConfig config;
    config.vocab = vocab;
    config.d = d;
    config.layers = layers;
    config.heads = heads;
    config.max_seq = seq;
    config.ffn = ffn;
    Generator gen(0);
    MoEConfig moe;
    moe.experts = experts;
    moe.k = k;  // the experts' width: config.ffn's (MoEConfig::ffn 0: nn/moe/moe_decoder.h)
    const auto make_model = [&](Generator& init) {
      auto built = experts > 0 ? std::make_unique<Decoder>(config, init, moe_feed_forward(moe))
                               : std::make_unique<Decoder>(config, init);
      built->to(device);  // before the optimizer, whose state is made on the parameters' device
      return built;
    };
    Generator twin_gen(0);  // the twin's initialisation: the same draws as the model's
    const std::unique_ptr<Decoder> model_owner = make_model(gen);
    Decoder& model = *model_owner;
    AdamOptions options;
    options.weight_decay = 0.1;
    AdamW optimizer(model.parameters(), options);
    // --paired-fp32: the float32 twin and its optimizer.
    const std::unique_ptr<Decoder> twin = paired_fp32 ? make_model(twin_gen) : nullptr;
    const std::unique_ptr<AdamW> twin_optimizer =
        paired_fp32 ? std::make_unique<AdamW>(twin->parameters(), options) : nullptr;
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
    const Tensor inputs = from_vector(in, {batch, seq}, device), targets = from_vector(target, {batch, seq}, device);
    Backend& compute = backend(device);  // to wait for the device before reading the clock

    float last_loss = 0, twin_loss = 0;
    PrecisionScope policy(precision == "bf16" ? Precision::BFloat16 : Precision::Float32);
    auto step = [&] {
      Variable loss = nn::cross_entropy(model.forward(inputs), targets);
      loss.backward();
      optimizer.step();
      model.zero_grad();
      last_loss = loss.data().item<float>();
    };
    auto twin_step = [&] {
      PrecisionScope float32(Precision::Float32);
      Variable loss = nn::cross_entropy(twin->forward(inputs), targets);
      loss.backward();
      twin_optimizer->step();
      twin->zero_grad();
      twin_loss = loss.data().item<float>();
    };
    auto timed = [&](const auto& one_step) {
      compute.synchronize();  // (item() already waits for the step; this makes the bracket explicit)
      const auto start = std::chrono::steady_clock::now();
      one_step();
      compute.synchronize();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    for (int i = 0; i < 5; ++i) {  // (MoE aux losses are off: the router learns via its gates)
      if (paired_fp32) twin_step();
      step();
    }
    std::vector<double> seconds, twin_seconds, step_ratios;
    cpu::clear_gemm_profile();
    cpu::set_gemm_profiling(gemm_profile);
    if (!perf_control.enable()) std::fprintf(stderr, "train_step_bench: --perf-control: perf did not take \"enable\"\n");
    for (int i = 0; i < steps; ++i) {
      if (paired_fp32) twin_seconds.push_back(timed(twin_step));
      seconds.push_back(timed(step));
      if (paired_fp32) step_ratios.push_back(twin_seconds.back() / seconds.back());
    }
    if (!perf_control.disable()) std::fprintf(stderr, "train_step_bench: --perf-control: perf did not take \"disable\"\n");
    cpu::set_gemm_profiling(false);
    double step_seconds_total = 0;
    for (double x : seconds) step_seconds_total += x;
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2];
    const double tokens = static_cast<double>(batch * seq);
    const double tokens_per_second = tokens / median;
    // Model FLOPs (header comment): 6 (N_active + V d) + 12 L T d per token.
    const MoECounts counts = moe_parameter_counts(model);
    const double flops_per_token = 6.0 * static_cast<double>(counts.active + vocab * d) +
                                   12.0 * static_cast<double>(layers * seq * d);
    const double flops_per_step = flops_per_token * tokens;
    const double achieved_tflops = flops_per_step / median / 1e12;

    nlohmann::json report = {{"engine", "moelab"},
                             {"device", device_name},
                             {"preset", preset},
                             {"precision", precision},
                             {"threads", threads},
                             {"cpu", moelab::cpu::cpu_description()},
                             {"config", {{"vocab", vocab}, {"d", d}, {"heads", heads}, {"layers", layers}, {"ffn", ffn > 0 ? ffn : d}, {"experts", experts}, {"k", k}}},
                             {"batch", batch},
                             {"seq", seq},
                             {"steps", steps},
                             {"median_step_seconds", median},
                             {"min_step_seconds", seconds.front()},
                             {"tokens_per_second", tokens_per_second},
                             {"parameters", model.num_parameters()},
                             {"non_embedding_parameters", counts.non_embedding},
                             {"active_non_embedding_parameters", counts.active},
                             {"model_flops_per_token", flops_per_token},
                             {"model_flops_per_step", flops_per_step},
                             {"achieved_tflops", achieved_tflops},
                             {"peak_tflops", peak_tflops > 0 ? nlohmann::json(peak_tflops) : nlohmann::json()},
                             {"fraction_of_peak",
                              peak_tflops > 0 ? nlohmann::json(achieved_tflops / peak_tflops) : nlohmann::json()},
                             {"peak_source", peak_source.empty() ? nlohmann::json() : nlohmann::json(peak_source)},
                             {"final_loss", last_loss}};
    // Which instruction a CPU bf16 step's products ran (core/cpu/gemm_bf16.h): amx, vdpbf16ps, widened.
    if (!device.is_cuda() && precision == "bf16")
      report["bf16_kernel"] = moelab::cpu::use_native_bf16_gemm()
                                  ? moelab::cpu::bf16_kernel_name(moelab::cpu::native_bf16_kernel())
                                  : "widened";
    // Beside PyTorch's torch.cuda.max_memory_allocated (bench/pytorch/train_step.py).
    if (device.is_cuda()) report["peak_memory_bytes"] = cuda_peak_memory_bytes();
    if (gemm_profile) report["gemm_profile"] = gemm_profile_report(steps, step_seconds_total);
    double twin_median = 0, ratio_median = 0;
    if (paired_fp32) {
      std::sort(twin_seconds.begin(), twin_seconds.end());
      std::sort(step_ratios.begin(), step_ratios.end());
      twin_median = twin_seconds[twin_seconds.size() / 2], ratio_median = step_ratios[step_ratios.size() / 2];
      report["paired_fp32"] = {{"median_step_seconds", twin_median},
                               {"min_step_seconds", twin_seconds.front()},
                               {"tokens_per_second", tokens / twin_median},
                               {"final_loss", twin_loss}};
      report["bf16_over_fp32"] = {{"ratio_of_median_steps", twin_median / median},
                                  {"median_of_step_ratios", ratio_median},
                                  {"method", "a float32 twin's step, then the bf16 step, alternating (--paired-fp32)"}};
    }
    if (!moelab::bench::write_json(out_path, report, "train_step_bench")) return 1;
    std::printf("moelab (%s, %s): %.0f tokens/s (median step %.1f ms, %d threads, %lld parameters, loss %.3f), "
                "%.4f TFLOPS",
                device_name.c_str(), precision.c_str(), tokens_per_second, median * 1e3, threads,
                static_cast<long long>(model.num_parameters()), last_loss, achieved_tflops);
    if (peak_tflops > 0)
      std::printf(" = %.1f%% of %g", 100.0 * achieved_tflops / peak_tflops, peak_tflops);
    else
      std::printf(" (no --peak-tflops or --cpu-peak-from: no fraction of peak)");
    std::printf(" -> %s\n", out_path.c_str());
    if (paired_fp32)
      std::printf("paired float32 twin: %.0f tokens/s (median step %.1f ms); bf16 / fp32 speed %.2fx (ratio of medians), "
                  "%.2fx (median of the step-by-step ratios)\n",
                  tokens / twin_median, twin_median * 1e3, twin_median / median, ratio_median);
  } catch (const Error& e) {
    std::fprintf(stderr, "train_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
