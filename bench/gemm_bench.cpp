// bench/gemm_bench.cpp — float32 GEMM throughput of moelab's CPU matmul against OpenBLAS.
//
// Measures C = A @ B at 1024x1024x1024 and at the shapes of a small transformer's training step
// (2048x128 @ 128x128: attention projections; 2048x128 @ 128x512: an FFN with f = 4d), or at the
// shapes given with --shape (e.g. 64x64x64, one expert's product in the 64-expert model), both
// engines on the same thread count, in the same process, and writes GFLOP/s (2*M*N*K / seconds)
// to a JSON file. This is a benchmark, not a test: it asserts nothing about speed.
//
// Method: for each shape, alternate timed phases of moelab and OpenBLAS (each phase: one warm-up
// call, then `reps` timed calls), sleeping between phases so that the other library's worker
// threads (OpenMP and OpenBLAS both spin-wait after work) are idle; report each engine's median
// phase. The two results are compared elementwise as a sanity check.
//
//   gemm_bench [--threads 2] [--phases 7] [--shape MxKxN ...] [--out bench-results/gemm.json]
//
// --micro-kernel measures instead the register tile alone (core/cpu/gemm_kernels.h: the active
// instruction set's wide tile, mr x nr, from a row-major A and from a packed one) on operands
// that stay in L1, one thread, for inner lengths kc = 8 .. 256: the ceiling the kernel itself sets,
// to set beside the FMA peak (bench/fma_peak) and beside what whole products reach. Short kc is
// what attention's per-head products run (kc = the head width, 16 or 32). Where the CPU has
// AMX-BF16 it also measures the AMX kernel's block alone ("amx_block": C 32 x 32 in four tiles,
// core/cpu/gemm_bf16_amx.cpp) for 1 .. 16 steps of 16 pairs (k = 32 .. 512), operands on cache
// lines, A's rows 16 pairs a step apart as packed; null elsewhere.
//
// --layout nt|tn measures the other two products of a training step: nt is A @ B^T with B stored
// [N, K] (a layer's forward, x @ W^T), tn is A^T @ B with A stored [K, M] (a weight gradient,
// x^T @ dy). --bf16 adds a third engine to the alternation: moelab on bfloat16 operands (float32
// sums: core/cpu/gemm_bf16.h, VDPBF16PS where the CPU has AVX512_BF16, else the widened float32
// GEMM), on the same values rounded to bfloat16; its GFLOP/s count the same 2*M*N*K.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "bench/write_json.h"
#include "core/cpu/cpu_features.h"
#include "core/cpu/gemm_bf16.h"
#include "core/cpu/gemm_kernels.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/parallel.h"

#ifdef MOELAB_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_config(void);
#endif

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call, averaged over `reps` calls after one warm-up call.
template <class Fn>
double time_phase(Fn&& fn, int reps) {
  fn();
  const auto start = Clock::now();
  for (int i = 0; i < reps; ++i) fn();
  return std::chrono::duration<double>(Clock::now() - start).count() / reps;
}

// The wide tile of the active kernels, C [mr, nr] = A [mr, kc] @ B panel [kc, nr], on operands that
// fit in L1, for several kc: GFLOP/s of the best and the median of `phases` phases of ~0.1 s each,
// the row-major-A and packed-A variants alternating.
nlohmann::json micro_kernel_report(int phases) {
  using namespace moelab::cpu;
  const GemmTiles& tiles = gemm_kernels(active_isa()).wide;
  nlohmann::json rows = nlohmann::json::array();
  std::printf("micro-kernel %d x %d (%s), operands in L1, one thread:\n", tiles.mr, tiles.nr,
              isa_name(active_isa()));
  for (std::int64_t kc : {8, 16, 32, 64, 128, 256}) {
    // A row-major with rows 256 floats apart (a [T, d] activation at d 256), or packed [kc][mr].
    const std::int64_t a_stride = std::max<std::int64_t>(kc, 256);
    std::vector<float> a(static_cast<std::size_t>(tiles.mr * a_stride), 0.5f), b(static_cast<std::size_t>(kc * tiles.nr), 0.25f);
    std::vector<float> c(static_cast<std::size_t>(tiles.mr * tiles.nr));
    const double flops = 2.0 * tiles.mr * tiles.nr * static_cast<double>(kc);
    const int reps = static_cast<int>(1.0e10 / flops);  // ~0.1 s at 100 GFLOP/s
    std::vector<double> row_major, packed;
    for (int p = 0; p < phases; ++p) {
      row_major.push_back(time_phase([&] { tiles.tile_rows(kc, a.data(), a_stride, b.data(), tiles.nr, c.data(), tiles.nr, false); }, reps));
      packed.push_back(time_phase([&] { tiles.tile(kc, a.data(), tiles.mr, b.data(), tiles.nr, c.data(), tiles.nr, false); }, reps));
    }
    // The best phase is the ceiling (other load only ever slows a phase down); the median beside it.
    auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    const double g_rows = flops / best(row_major) / 1e9, g_packed = flops / best(packed) / 1e9;
    std::printf("  kc %3lld   row-major A %6.1f GFLOP/s (median %5.1f)   packed A %6.1f GFLOP/s (median %5.1f)\n",
                static_cast<long long>(kc), g_rows, flops / median(row_major) / 1e9, g_packed,
                flops / median(packed) / 1e9);
    rows.push_back({{"kc", kc}, {"row_major_a_gflops_best", g_rows}, {"packed_a_gflops_best", g_packed},
                    {"row_major_a_gflops_median", flops / median(row_major) / 1e9},
                    {"packed_a_gflops_median", flops / median(packed) / 1e9}});
  }
  return {{"mr", tiles.mr}, {"nr", tiles.nr}, {"rows", rows}};
}

// The AMX block, C [32, 32] = A [32, 16 chunks pairs] @ B [16 chunks pairs, 32], the operands in L1
// up to 8 chunks (A and B 16 KiB each), for chunks = 1 .. 16; best and median of `phases` phases.
nlohmann::json amx_block_report(int phases) {
  using namespace moelab::cpu;
  if (!cpu_has_amx_bf16()) return nullptr;
  nlohmann::json rows = nlohmann::json::array();
  std::printf("AMX block 32 x 32 (TDPBF16PS), operands on cache lines, one thread:\n");
  gemm_bf16_detail::amx_tiles_begin();
  for (std::int64_t chunks : {1, 2, 4, 8, 16}) {
    const std::int64_t pairs = chunks * gemm_bf16_detail::AMX_PAIRS;
    // bf16 pairs of 0.001 (0x3A83): the sums stay far from overflow.
    std::vector<std::uint32_t, CacheLineAllocator<std::uint32_t>> a(static_cast<std::size_t>(32 * pairs), 0x3A833A83u),
        b(static_cast<std::size_t>(pairs * 32), 0x3A833A83u);
    std::vector<float, CacheLineAllocator<float>> c(32 * 32);
    const double flops = 2.0 * 32 * 32 * 2 * static_cast<double>(pairs);
    const int reps = static_cast<int>(1.0e11 / flops);  // ~0.1 s at 1 TFLOP/s
    std::vector<double> times;
    for (int p = 0; p < phases; ++p)
      times.push_back(time_phase(
          [&] { gemm_bf16_detail::amx_bf16_block(chunks, a.data(), pairs * 4, b.data(), c.data(), 32, false); }, reps));
    const double best = flops / *std::min_element(times.begin(), times.end()) / 1e9;
    std::printf("  k %3lld   %7.1f GFLOP/s (median %7.1f)\n", static_cast<long long>(2 * pairs), best,
                flops / median(times) / 1e9);
    rows.push_back({{"k", 2 * pairs}, {"gflops_best", best}, {"gflops_median", flops / median(times) / 1e9}});
  }
  return {{"c_rows", 32}, {"c_cols", 32}, {"by_k", rows}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"float32 GEMM throughput: moelab's blocked GEMM (core/cpu/gemm_f32.cpp) vs OpenBLAS sgemm; with --bf16 also "
                "moelab's bfloat16 product (core/cpu/gemm_bf16.h)"};
  int threads = 2, phases = 7;
  std::string out_path = "bench-results/gemm.json";
  std::vector<std::string> shape_texts;
  app.add_option("--threads", threads, "threads for both engines")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--phases", phases, "alternating timed phases per engine and shape")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--shape", shape_texts,
                 "a product M x K x N to measure instead of the default shapes, written MxKxN (repeat for several)");
  app.add_option("--out", out_path, "JSON file to write")->capture_default_str();
  std::string layout = "nn";
  app.add_option("--layout", layout, "the operands' transposition: nn (A @ B), nt (A @ B^T, B stored [N, K]), tn "
                                     "(A^T @ B, A stored [K, M])")
      ->check(CLI::IsMember({"nn", "nt", "tn"}))
      ->capture_default_str();
  bool with_bf16 = false;
  app.add_flag("--bf16", with_bf16, "also time moelab's product of bfloat16 operands (float32 sums)");
  bool micro_kernel = false;
  app.add_flag("--micro-kernel", micro_kernel,
               "measure the register tile alone on operands in L1 (kc = 8 .. 256, one thread) instead of whole "
               "products")
      ->excludes("--shape")
      ->excludes("--layout")
      ->excludes("--bf16");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (micro_kernel) {
    moelab::set_num_threads(1);
    nlohmann::json report = {{"cpu", moelab::cpu::cpu_description()}, {"phases", phases},
                             {"micro_kernel", micro_kernel_report(phases)}, {"amx_block", amx_block_report(phases)}};
    if (!moelab::bench::write_json(out_path, report, "gemm_bench")) return 1;
    std::printf("wrote %s\n", out_path.c_str());
    return 0;
  }

  moelab::set_num_threads(threads);
#ifdef MOELAB_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
#else
  std::fprintf(stderr, "gemm_bench: built without OpenBLAS (install libopenblas-dev and reconfigure); "
                       "reporting moelab only\n");
#endif

  struct GemmShape {
    std::int64_t m, k, n;
    const char* what;
  };
  std::vector<GemmShape> shapes = {{1024, 1024, 1024, "square"},
                                   {2048, 128, 128, "transformer step: x @ W_qkvo (d 128)"},
                                   {2048, 128, 512, "transformer step: x @ W_up (d 128, f 512)"}};
  if (!shape_texts.empty()) {
    shapes.clear();
    for (const std::string& text : shape_texts) {
      long long m = 0, k = 0, n = 0;
      char end = 0;
      if (std::sscanf(text.c_str(), "%lldx%lldx%lld%c", &m, &k, &n, &end) != 3 || m < 1 || k < 1 || n < 1 ||
          m * k > (1LL << 31) || k * n > (1LL << 31) || m * n > (1LL << 31)) {
        std::fprintf(stderr, "gemm_bench: --shape %s: expected MxKxN with positive sizes (e.g. 64x64x64), "
                             "each matrix at most 2^31 elements\n", text.c_str());
        return 2;
      }
      shapes.push_back({m, k, n, "--shape"});
    }
  }
  nlohmann::json report;
  report["threads"] = threads;
  report["cpu"] = moelab::cpu::cpu_description();  // CPU and the GEMM kernels' instruction set
  report["phases"] = phases;
  report["layout"] = layout;
  report["method"] = "median over alternating phases; GFLOP/s = 2*M*N*K / seconds per call";
#ifdef MOELAB_HAVE_OPENBLAS
  report["openblas_config"] = openblas_get_config();
#endif
  const bool trans_a = layout == "tn", trans_b = layout == "nt";
  moelab::Generator gen(1);
  for (const GemmShape& s : shapes) {
    moelab::Tensor a = trans_a ? moelab::uniform({s.k, s.m}, -1, 1, gen) : moelab::uniform({s.m, s.k}, -1, 1, gen);
    moelab::Tensor b = trans_b ? moelab::uniform({s.n, s.k}, -1, 1, gen) : moelab::uniform({s.k, s.n}, -1, 1, gen);
    const moelab::Tensor a16 = a.to(moelab::DType::BFloat16), b16 = b.to(moelab::DType::BFloat16);
    moelab::Tensor c_bf16;
    moelab::Tensor c_ours;
    std::vector<float> c_blas(static_cast<std::size_t>(s.m * s.n));
    const double flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
    const int reps = std::max(3, static_cast<int>(2.0e10 / flops));  // ~0.2 s per phase at 100 GFLOP/s
    std::vector<double> ours, blas, ours_bf16;
    for (int p = 0; p < phases; ++p) {
      ours.push_back(time_phase([&] { c_ours = moelab::kernels::matmul(a, b, trans_a, trans_b); }, reps));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (with_bf16) {
        ours_bf16.push_back(time_phase([&] { c_bf16 = moelab::kernels::matmul(a16, b16, trans_a, trans_b); }, reps));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
#ifdef MOELAB_HAVE_OPENBLAS
      blas.push_back(time_phase(
          [&] {
            cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                        static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, a.data<float>(),
                        static_cast<int>(trans_a ? s.m : s.k), b.data<float>(), static_cast<int>(trans_b ? s.k : s.n),
                        0.0f, c_blas.data(), static_cast<int>(s.n));
          },
          reps));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
#endif
    }
    nlohmann::json row = {{"m", s.m}, {"k", s.k}, {"n", s.n}, {"what", s.what}, {"reps_per_phase", reps}};
    row["moelab_gflops"] = flops / median(ours) / 1e9;
    std::printf("%5lldx%-4lld @ %4lldx%-4lld  moelab %7.1f GFLOP/s", static_cast<long long>(s.m),
                static_cast<long long>(s.k), static_cast<long long>(s.k), static_cast<long long>(s.n),
                row["moelab_gflops"].get<double>());
    if (with_bf16) {
      row["moelab_bf16_gflops"] = flops / median(ours_bf16) / 1e9;
      row["ratio_bf16_over_fp32"] = median(ours) / median(ours_bf16);
      std::printf("   bf16 %7.1f GFLOP/s (%.2fx)", row["moelab_bf16_gflops"].get<double>(),
                  row["ratio_bf16_over_fp32"].get<double>());
    }
#ifdef MOELAB_HAVE_OPENBLAS
    row["openblas_gflops"] = flops / median(blas) / 1e9;
    row["ratio_moelab_over_openblas"] = median(blas) / median(ours);
    double max_diff = 0;
    const float* co = c_ours.data<float>();
    for (std::size_t i = 0; i < c_blas.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(co[i] - c_blas[i])));
    row["max_abs_difference"] = max_diff;
    std::printf("   openblas %7.1f GFLOP/s   ratio %.2f   max |diff| %.1e", row["openblas_gflops"].get<double>(),
                row["ratio_moelab_over_openblas"].get<double>(), max_diff);
#endif
    std::printf("   (%s)\n", s.what);
    report["shapes"].push_back(row);
  }
  if (!moelab::bench::write_json(out_path, report, "gemm_bench")) return 1;
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
