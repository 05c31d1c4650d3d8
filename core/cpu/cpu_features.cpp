// core/cpu/cpu_features.cpp — see cpu_features.h.
//
// This file is compiled for the plain x86-64 baseline (CMakeLists.txt), whatever the rest of the
// engine is compiled for, so that it can run on any x86-64 CPU and say clearly when the CPU lacks
// what the build assumes: a binary compiled for x86-64-v3 would otherwise die of SIGILL at some
// AVX2 instruction in the middle of a run. The check runs as a constructor of priority 101,
// before any ordinary static initialiser of the program (those may already use AVX2).
#include "core/cpu/cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define MOELAB_X86 1
#endif

namespace moelab::cpu {

#if defined(MOELAB_X86) && defined(MOELAB_BASE_ARCH_LEVEL)
namespace {

// MOELAB_BASE_ARCH_LEVEL is N of x86-64-vN, the level the rest of the engine is compiled for.
[[gnu::constructor(101)]] void require_base_arch() {
  __builtin_cpu_init();
  bool supported = true;
#if MOELAB_BASE_ARCH_LEVEL >= 4
  supported = __builtin_cpu_supports("x86-64-v4");
#elif MOELAB_BASE_ARCH_LEVEL == 3
  supported = __builtin_cpu_supports("x86-64-v3");
#elif MOELAB_BASE_ARCH_LEVEL == 2
  supported = __builtin_cpu_supports("x86-64-v2");
#endif
  if (!supported) {
    std::fprintf(stderr,
                 "moelab: this program was built for x86-64-v%d CPUs (v3: AVX2 and FMA; v4: AVX-512) and this "
                 "CPU lacks some of that. Rebuild for an older baseline, e.g. "
                 "MOELAB_CMAKE_ARGS=\"-DMOELAB_BASE_ARCH=x86-64\" ./test.sh (any x86-64 CPU).\n",
                 MOELAB_BASE_ARCH_LEVEL);
    std::_Exit(1);
  }
}

}  // namespace
#endif

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Generic: return "generic";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
  }
  return "?";
}

CpuIsa detected_isa() {
#if defined(MOELAB_X86)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks (XGETBV) that the OS saves the wide registers.
  if (__builtin_cpu_supports("avx512f")) return CpuIsa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::Avx2;
#endif
  return CpuIsa::Generic;
}

namespace {

CpuIsa choose_isa() {
  const CpuIsa detected = detected_isa();
  const char* requested = std::getenv("MOELAB_CPU_ISA");
  if (requested == nullptr || *requested == '\0') return detected;
  for (CpuIsa isa : {CpuIsa::Generic, CpuIsa::Avx2, CpuIsa::Avx512}) {
    if (std::strcmp(requested, isa_name(isa)) != 0) continue;
    MOELAB_CHECK(isa <= detected, "cpu", "MOELAB_CPU_ISA=", requested, " but this CPU supports only up to ",
                 isa_name(detected));
    return isa;
  }
  fail("cpu", "MOELAB_CPU_ISA=", requested, " is not one of generic, avx2, avx512");
}

}  // namespace

CpuIsa active_isa() {
  static const CpuIsa isa = choose_isa();
  return isa;
}

std::string cpu_description() {
  std::string brand;
#if defined(MOELAB_X86)
  unsigned int regs[12] = {};
  if (__get_cpuid(0x80000000u, &regs[0], &regs[1], &regs[2], &regs[3]) && regs[0] >= 0x80000004u) {
    for (unsigned int leaf = 0; leaf < 3; ++leaf)
      __get_cpuid(0x80000002u + leaf, &regs[4 * leaf], &regs[4 * leaf + 1], &regs[4 * leaf + 2], &regs[4 * leaf + 3]);
    char text[49] = {};
    std::memcpy(text, regs, 48);
    brand = text;
    while (!brand.empty() && brand.back() == ' ') brand.pop_back();
    while (!brand.empty() && brand.front() == ' ') brand.erase(brand.begin());
  }
#endif
  if (brand.empty()) brand = "unknown CPU";
  return brand + " (" + isa_name(active_isa()) + ")";
}

}  // namespace moelab::cpu
