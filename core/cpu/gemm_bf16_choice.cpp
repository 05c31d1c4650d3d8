// core/cpu/gemm_bf16_choice.cpp — which bf16 kernel this CPU can run, and which one the products
// use: the CPUID and XCR0 checks for AVX512_BF16 and AMX-BF16, Linux's grant of the AMX tile
// registers, and MOELAB_CPU_BF16 (the choices: core/cpu/gemm_bf16.h).
#include <cstdlib>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/cpu/cpu_features.h"
#include "core/cpu/gemm_bf16.h"
#include "core/error.h"

namespace moelab::cpu {
bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    // __builtin_cpu_supports also checks (XGETBV) that the OS saves the 512-bit registers. The
    // packers use AVX512BW's 16-bit moves (and AVX512VL's 256-bit masked loads), the conversion
    // (core/cpu/bf16_convert.h) AVX512DQ's VFPCLASSPS: every CPU with AVX512_BF16 has them.
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_amx_bf16() {
#if defined(__x86_64__)
  static const bool has = [] {
    if (!cpu_has_avx512_bf16()) return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool amx_bf16 = (edx >> 22) & 1u, amx_tile = (edx >> 24) & 1u;  // CPUID.(7, 0):EDX
    if (!amx_bf16 || !amx_tile) return false;
    // XCR0 bits 17 and 18: the OS manages the tile configuration and data (the OSXSAVE bit was
    // checked by __builtin_cpu_supports above, XGETBV being what it asks).
    std::uint32_t xcr0_low = 0, xcr0_high = 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    if (((xcr0_low >> 17) & 3u) != 3u) return false;
    // Linux (5.16 on) hands the 8 KiB of tile data only to a process that asks for it.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return has;
#else
  return false;
#endif
}

namespace {

// The kernel CpuBackend's bf16 products use, or none (widened): MOELAB_CPU_BF16 and the CPU.
struct Bf16Choice {
  bool native;
  Bf16DotKernel kernel;
};

const Bf16Choice& bf16_choice() {
  static const Bf16Choice choice = [] {
    const char* setting = std::getenv("MOELAB_CPU_BF16");
    const std::string value = setting ? setting : "";
    if (value == "widen") return Bf16Choice{false, Bf16DotKernel::Emulated};
    MOELAB_CHECK(value.empty() || value == "native" || value == "amx" || value == "vdpbf16ps", "MOELAB_CPU_BF16",
                 "is '", value,
                 "': use native (the fastest bf16 instruction the CPU has: amx, else vdpbf16ps; the default), amx, "
                 "vdpbf16ps or widen");
    const bool amx = cpu_has_amx_bf16(), vdpbf16ps = cpu_has_avx512_bf16();
    MOELAB_CHECK(value != "amx" || amx, "MOELAB_CPU_BF16", "amx needs a CPU with AMX-BF16 whose tiles Linux grants");
    MOELAB_CHECK(value != "vdpbf16ps" || vdpbf16ps, "MOELAB_CPU_BF16", "vdpbf16ps needs a CPU with AVX512_BF16");
    MOELAB_CHECK(value != "native" || vdpbf16ps, "MOELAB_CPU_BF16",
                 "native needs a CPU with AVX512_BF16 or AMX-BF16; this one has neither");
    // MOELAB_CPU_ISA=avx2 (or generic) asks to run as a CPU of that set runs, and none of those
    // has a bf16 instruction: its bf16 products widen, so one machine can reproduce an AVX2
    // machine's bf16 run.
    const bool narrowed = active_isa() != CpuIsa::Avx512;
    MOELAB_CHECK(value.empty() || !narrowed, "MOELAB_CPU_BF16", value, " needs the avx512 kernels; MOELAB_CPU_ISA is ",
                 isa_name(active_isa()));
    if (narrowed || !vdpbf16ps) return Bf16Choice{false, Bf16DotKernel::Emulated};
    const bool use_amx = value == "amx" || (value != "vdpbf16ps" && amx);
    return Bf16Choice{true, use_amx ? Bf16DotKernel::Amx : Bf16DotKernel::Avx512Bf16};
  }();
  return choice;
}

}  // namespace

bool use_native_bf16_gemm() { return bf16_choice().native; }

Bf16DotKernel native_bf16_kernel() { return bf16_choice().kernel; }

const char* bf16_kernel_name(Bf16DotKernel kernel) {
  switch (kernel) {
    case Bf16DotKernel::Emulated: return "emulated";
    case Bf16DotKernel::Avx512Bf16: return "vdpbf16ps";
    case Bf16DotKernel::Amx: return "amx";
  }
  return "?";
}

}  // namespace moelab::cpu
