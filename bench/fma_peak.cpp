// bench/fma_peak.cpp — one core's float32 fused multiply-add peak, measured, in GFLOP/s.
//
// A "fraction of peak" needs a peak. Datasheets give one per socket at a nominal clock, which is
// not what one core of a shared, turbo-clocked machine does; so this program measures it. The
// loop keeps everything in registers and does nothing but FMAs:
//
//   acc[i] = acc[i] * x + y        for i = 0 .. A-1, repeated `iters` times
//
// Each FMA waits for the previous one on the same accumulator (a latency of L cycles, typically 4),
// while the core can start P vector FMAs per cycle (typically 2), so at least L * P independent
// accumulators are needed to keep every FMA unit busy; A = 16 (AVX-512: 16 of the 32 zmm
// registers) and 12 (AVX2: 12 of the 16 ymm) cover L * P <= 12 with room to spare. The loop body is
// written with intrinsics in functions compiled for their instruction set (GCC's target
// attribute), and runs only when the CPU has it (core/cpu/cpu_features.h), so one binary measures
// every set the CPU offers:
//
//   avx512   16 lanes x 16 accumulators      avx2   8 lanes x 12 accumulators
//
// FLOPs = 2 (multiply and add) x lanes x A x iters. x = 0.999 and y = 0.001 keep every value near 1
// (no overflow, no denormals, whose microcode assists would slow the loop). The peak is the best of
// --reps repetitions (a core at full speed, undisturbed for that long); the median is reported too.
// The widest set's figure is the one core's peak the training-step benchmark is compared with
// (docs/results/bench.md): `train_step_bench --threads 1 --peak-tflops <peak / 1000>`.
//
//   fma_peak [--reps 15] [--iters 20000000] [--out bench-results/fma_peak.json]
//
// On a CPU with AVX512_BF16 it also measures the bf16 dot-product peak the bf16 GEMM's tile runs on
// (core/cpu/gemm_bf16.h): VDPBF16PS, 16 lanes each adding two bf16 products a step, so 64 FLOPs an
// instruction, on 16 accumulators (acc += x0 y0 + x1 y1 with x = y = 0.001: acc grows by 2e-6 a
// step, far from overflow). Reported apart ("bf16_dot"), as the float32 peak stays "peak_gflops".
// Where the CPU has AMX-BF16 (and Linux grants the tiles), also the peak of the AMX kernel's
// instruction ("bf16_amx"): TDPBF16PS on four 16 x 16 float32 accumulator tiles fed by two A and
// two B tiles (the kernel's 32 x 32 block, core/cpu/gemm_bf16_amx.cpp) without reloading them,
// 16 x 16 x 32 x 2 = 16 384 FLOPs an instruction; iters / 16 steps of four (each step is ~64
// cycles, against one for the FMA loops).
//
// A benchmark, not a test: it asserts nothing about speed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/write_json.h"
#include "core/cpu/cpu_features.h"
#include "core/cpu/gemm_bf16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using moelab::cpu::CpuIsa;

#if defined(__x86_64__)
// Accumulator i starts at 1 + i / 64, read from memory the compiler cannot see into (an empty asm
// that may have "changed" it), so that it cannot prove any two chains equal and merge them.
struct Starts {
  alignas(64) float value[16][16];
  Starts() {
    for (int i = 0; i < 16; ++i)
      for (float& lane : value[i]) lane = 1.0f + static_cast<float>(i) / 64.0f;
    asm volatile("" : : "r"(value) : "memory");
  }
};

template <class V>
float sum_lanes(V v) {
  float lanes[sizeof(V) / sizeof(float)];
  __builtin_memcpy(lanes, &v, sizeof(V));
  float total = 0;
  for (float lane : lanes) total += lane;
  return total;
}

// The AVX-512 loops keep 16 accumulators of 16 floats in an array the loops index with constants
// (fully unrolled, so it lives in 16 zmm registers), and return their sum so that the compiler
// keeps the loop.
#define MOELAB_AVX512_LOOP(TARGET, NAME, STEP)                                  \
  __attribute__((target(TARGET), noinline)) float NAME(std::int64_t iters) {    \
    const Starts s0;                                                            \
    __m512 a[16];                                                               \
    _Pragma("GCC unroll 16") for (int j = 0; j < 16; ++j) a[j] = _mm512_load_ps(s0.value[j]); \
    for (std::int64_t i = 0; i < iters; ++i) {                                  \
      _Pragma("GCC unroll 16") for (int j = 0; j < 16; ++j) a[j] = STEP(a[j]);  \
    }                                                                           \
    _Pragma("GCC unroll 8") for (int w = 8; w >= 1; w /= 2)                      \
      for (int j = 0; j < w; ++j) a[j] = _mm512_add_ps(a[j], a[j + w]);         \
    return sum_lanes(a[0]);                                                     \
  }

// acc = acc * x + y, one float32 FMA a lane (2 FLOPs).
#define MOELAB_FMA_STEP(acc) _mm512_fmadd_ps(acc, _mm512_set1_ps(0.999f), _mm512_set1_ps(0.001f))
MOELAB_AVX512_LOOP("avx512f", fma_loop_avx512, MOELAB_FMA_STEP)

// 12 accumulators of 8 floats.
__attribute__((target("avx2,fma"), noinline)) float fma_loop_avx2(std::int64_t iters) {
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(0.001f);
  const Starts s0;
  __m256 a0 = _mm256_load_ps(s0.value[0]), a1 = _mm256_load_ps(s0.value[1]), a2 = _mm256_load_ps(s0.value[2]), a3 = _mm256_load_ps(s0.value[3]);
  __m256 a4 = _mm256_load_ps(s0.value[4]), a5 = _mm256_load_ps(s0.value[5]), a6 = _mm256_load_ps(s0.value[6]), a7 = _mm256_load_ps(s0.value[7]);
  __m256 a8 = _mm256_load_ps(s0.value[8]), a9 = _mm256_load_ps(s0.value[9]), a10 = _mm256_load_ps(s0.value[10]), a11 = _mm256_load_ps(s0.value[11]);
  for (std::int64_t i = 0; i < iters; ++i) {
    a0 = _mm256_fmadd_ps(a0, x, y), a1 = _mm256_fmadd_ps(a1, x, y), a2 = _mm256_fmadd_ps(a2, x, y);
    a3 = _mm256_fmadd_ps(a3, x, y), a4 = _mm256_fmadd_ps(a4, x, y), a5 = _mm256_fmadd_ps(a5, x, y);
    a6 = _mm256_fmadd_ps(a6, x, y), a7 = _mm256_fmadd_ps(a7, x, y), a8 = _mm256_fmadd_ps(a8, x, y);
    a9 = _mm256_fmadd_ps(a9, x, y), a10 = _mm256_fmadd_ps(a10, x, y), a11 = _mm256_fmadd_ps(a11, x, y);
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                 _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)),
                                               _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11))));
  return sum_lanes(s);
}

// acc += x0 y0 + x1 y1, one VDPBF16PS a lane (4 FLOPs), x = y = bf16 0.001 (0x3A83) in both halves.
#define MOELAB_DOT_STEP(acc) \
  _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(0x3A833A83), (__m512bh)_mm512_set1_epi32(0x3A833A83))
MOELAB_AVX512_LOOP("avx512f,avx512bf16", dot_loop_avx512_bf16, MOELAB_DOT_STEP)

// Four TDPBF16PS a step on the tiles of a 32 x 32 block; A and B hold bf16 0.001 (C grows by
// 3.2e-5 an instruction). The sum of C's first tile is returned.
__attribute__((target("amx-tile,amx-bf16"), noinline)) float amx_loop_bf16(std::int64_t steps) {
  struct alignas(64) TileConfig {
    std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
    std::uint16_t bytes_per_row[16] = {};
    std::uint8_t rows[16] = {};
  } config;
  for (int t = 0; t < 8; ++t) config.bytes_per_row[t] = 64, config.rows[t] = 16;
  alignas(64) static std::uint16_t operand[16 * 32];
  std::fill(std::begin(operand), std::end(operand), std::uint16_t{0x3A83});
  alignas(64) float c[16 * 16];
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (std::int64_t i = 0; i < steps; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  float sum = 0.0f;
  for (const float x : c) sum += x;
  return sum;
}
#endif

// GFLOP/s of `reps` timed runs of `run` (after a warm-up), sorted: flops_per_iter x iters / seconds.
template <class Run>
std::vector<double> timed_rates(Run run, std::int64_t iters, int reps, double flops_per_iter, float& sink) {
  sink += run(iters / 10);  // warm-up: the core reaches its clock for this width
  std::vector<double> gflops;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    sink += run(iters);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    gflops.push_back(flops_per_iter * static_cast<double>(iters) / seconds / 1e9);
  }
  std::sort(gflops.begin(), gflops.end());
  return gflops;
}

struct Loop {
  CpuIsa isa;
  int lanes, accumulators;
  float (*run)(std::int64_t iters);
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fma_peak: one core's measured float32 FMA peak (GFLOP/s), per vector instruction set"};
  int reps = 15;
  std::int64_t iters = 20'000'000;
  std::string out_path = "bench-results/fma_peak.json";
  app.add_option("--reps", reps, "timed repetitions per instruction set (the best is the peak)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--iters", iters, "loop iterations per repetition")->check(CLI::Range(1, 1 << 30))->capture_default_str();
  app.add_option("--out", out_path, "JSON file to write")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  std::vector<Loop> loops;
#if defined(__x86_64__)
  const CpuIsa detected = moelab::cpu::detected_isa();
  if (detected >= CpuIsa::Avx2) loops.push_back({CpuIsa::Avx2, 8, 12, &fma_loop_avx2});
  if (detected >= CpuIsa::Avx512) loops.push_back({CpuIsa::Avx512, 16, 16, &fma_loop_avx512});
#endif
  if (loops.empty()) {
    std::fprintf(stderr, "fma_peak: this CPU has neither AVX2+FMA nor AVX-512; nothing to measure\n");
    return 1;
  }

  nlohmann::json sets = nlohmann::json::object();
  double peak = 0;
  std::string peak_isa;
  float sink = 0;
  for (const Loop& loop : loops) {
    const std::vector<double> gflops = timed_rates(loop.run, iters, reps, 2.0 * loop.lanes * loop.accumulators, sink);
    const double best = gflops.back(), median = gflops[gflops.size() / 2];
    sets[moelab::cpu::isa_name(loop.isa)] = {{"lanes", loop.lanes},
                                              {"accumulators", loop.accumulators},
                                              {"best_gflops", best},
                                              {"median_gflops", median},
                                              {"min_gflops", gflops.front()}};
    std::printf("%-7s %2d lanes x %2d accumulators: best %.1f GFLOP/s, median %.1f, min %.1f\n",
                moelab::cpu::isa_name(loop.isa), loop.lanes, loop.accumulators, best, median, gflops.front());
    if (best > peak) peak = best, peak_isa = moelab::cpu::isa_name(loop.isa);
  }
  nlohmann::json bf16_dot = nullptr;  // null: this CPU has no AVX512_BF16
#if defined(__x86_64__)
  if (moelab::cpu::cpu_has_avx512_bf16()) {
    // 16 accumulators x 16 lanes x 2 products x 2 FLOPs a step.
    const std::vector<double> gflops = timed_rates(&dot_loop_avx512_bf16, iters, reps, 4.0 * 16 * 16, sink);
    bf16_dot = {{"instruction", "vdpbf16ps"}, {"lanes", 16}, {"accumulators", 16}, {"flops_per_instruction", 64},
                {"best_gflops", gflops.back()}, {"median_gflops", gflops[gflops.size() / 2]},
                {"min_gflops", gflops.front()}};
    std::printf("bf16    VDPBF16PS, 16 lanes x 16 accumulators: best %.1f GFLOP/s, median %.1f, min %.1f\n",
                gflops.back(), gflops[gflops.size() / 2], gflops.front());
  }
#endif
  nlohmann::json bf16_amx = nullptr;  // null: no AMX-BF16 (or no tiles granted)
#if defined(__x86_64__)
  if (moelab::cpu::cpu_has_amx_bf16()) {
    const std::int64_t steps = std::max<std::int64_t>(1, iters / 16);
    const std::vector<double> gflops = timed_rates(&amx_loop_bf16, steps, reps, 4.0 * 16 * 16 * 32 * 2, sink);
    bf16_amx = {{"instruction", "tdpbf16ps"}, {"accumulator_tiles", 4}, {"flops_per_instruction", 16384},
                {"steps", steps}, {"best_gflops", gflops.back()}, {"median_gflops", gflops[gflops.size() / 2]},
                {"min_gflops", gflops.front()}};
    std::printf("bf16    TDPBF16PS (AMX), 4 accumulator tiles: best %.1f GFLOP/s, median %.1f, min %.1f\n",
                gflops.back(), gflops[gflops.size() / 2], gflops.front());
  }
#endif
  nlohmann::json report = {{"benchmark", "fma_peak"},
                           {"cpu", moelab::cpu::cpu_description()},
                           {"dtype", "float32"},
                           {"threads", 1},
                           {"reps", reps},
                           {"iters", iters},
                           {"sets", sets},
                           {"peak_gflops", peak},
                           {"peak_isa", peak_isa},
                           {"bf16_dot", bf16_dot},
                           {"bf16_amx", bf16_amx},
                           {"checksum", sink}};
  if (!moelab::bench::write_json(out_path, report, "fma_peak")) return 1;
  std::printf("one core's float32 FMA peak: %.1f GFLOP/s (%s) -> %s\n", peak, peak_isa.c_str(), out_path.c_str());
  return 0;
}
