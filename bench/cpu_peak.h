// bench/cpu_peak.h — the CPU's peak for a benchmark's fraction_of_peak, read from what
// bench/fma_peak measured on this machine, rather than typed in by hand.
//
//   const CpuPeak peak = cpu_peak_from("bench-results/fma_peak.json", threads);
//   fraction_of_peak = achieved_tflops / peak.tflops;
//
// fma_peak times one core's float32 FMA rate for each vector instruction set the CPU has
// ("sets": {"avx2": {"best_gflops": ...}, "avx512": {...}}). The peak that a step's products can
// reach is that of the set its GEMM kernels run, cpu::active_isa() (MOELAB_CPU_ISA=avx2 on an
// AVX-512 machine runs the AVX2 kernels, against the AVX2 peak), times the threads. The file must
// be fma_peak's and from this CPU model (its "cpu" brand string, the part before " (<set>)"): a
// peak measured elsewhere would make the fraction meaningless. Anything else is a moelab::Error
// that says what was wrong.
//
// For a bf16 step (cpu_peak_from(path, threads, true)) the peak is that of the instruction its
// products run (cpu::native_bf16_kernel(), core/cpu/gemm_bf16.h): "bf16_amx" for AMX, "bf16_dot"
// for VDPBF16PS; where bf16 products widen to the float32 GEMM, the float32 set's as above.
#pragma once

#include <cstdio>
#include <string>

#include "core/cpu/cpu_features.h"
#include "core/cpu/gemm_bf16.h"
#include "core/error.h"
#include "runner/json_file.h"

namespace moelab::bench {

struct CpuPeak {
  double tflops = 0;    // the peak of `threads` cores in TFLOPS
  std::string source;   // "fma_peak FILE: avx2 best 93.2 GFLOP/s x 1 thread"
};

// "AMD EPYC (avx2)" -> "AMD EPYC": cpu_description()'s brand, without the active set.
inline std::string cpu_brand(const std::string& description) {
  const std::size_t open = description.rfind(" (");
  return open == std::string::npos ? description : description.substr(0, open);
}

inline CpuPeak cpu_peak_from(const std::string& path, int threads, bool bf16 = false) {
  const nlohmann::ordered_json j =
      read_json_file(path, "fma_peak's figures", "run build/fma_peak --out " + path + " on this machine first");
  const std::string here = cpu::cpu_description();
  if (!j.is_object() || j.value("benchmark", std::string()) != "fma_peak")
    throw Error("'" + path + "' is not bench/fma_peak's output (no \"benchmark\": \"fma_peak\")");
  const std::string there = j.value("cpu", std::string());
  if (cpu_brand(there) != cpu_brand(here))
    throw Error("'" + path + "' was measured on another CPU (" + there + "), this one is " + here +
                ": run build/fma_peak here");
  if (bf16 && cpu::use_native_bf16_gemm()) {
    const bool amx = cpu::native_bf16_kernel() == cpu::Bf16DotKernel::Amx;
    const char* entry = amx ? "bf16_amx" : "bf16_dot";
    if (!j.contains(entry) || !j[entry].is_object() || !j[entry].contains("best_gflops") ||
        !j[entry]["best_gflops"].is_number() || !(j[entry]["best_gflops"].get<double>() > 0))
      throw Error("'" + path + "' has no \"" + entry + "\" peak, the bf16 instruction the products run here (" +
                  cpu::bf16_kernel_name(cpu::native_bf16_kernel()) + "): run build/fma_peak again");
    const double gflops = j[entry]["best_gflops"].get<double>();
    char text[160];
    std::snprintf(text, sizeof text, ": %s best %.1f GFLOP/s x %d thread%s", entry, gflops, threads,
                  threads == 1 ? "" : "s");
    return {gflops * threads / 1e3, "fma_peak " + path + text};
  }
  const std::string isa = cpu::isa_name(cpu::active_isa());
  if (!j.contains("sets") || !j["sets"].is_object() || !j["sets"].contains(isa) ||
      !j["sets"][isa].contains("best_gflops") || !j["sets"][isa]["best_gflops"].is_number() ||
      !(j["sets"][isa]["best_gflops"].get<double>() > 0))
    throw Error("'" + path + "' has no peak for " + isa + ", the instruction set the GEMM kernels run here");
  const double gflops = j["sets"][isa]["best_gflops"].get<double>();
  char text[160];
  std::snprintf(text, sizeof text, ": %s best %.1f GFLOP/s x %d thread%s", isa.c_str(), gflops, threads,
                threads == 1 ? "" : "s");
  return {gflops * threads / 1e3, "fma_peak " + path + text};
}

}  // namespace moelab::bench
