// core/cpu/cpu_features.h — which vector instruction set the CPU kernels use, chosen at run time.
//
// A binary is compiled once but runs on many CPUs. moelab's default build compiles the engine for
// a baseline that every modern x86-64 CPU has (x86-64-v3: AVX2 and FMA, set by MOELAB_BASE_ARCH in
// CMakeLists.txt) and compiles the few kernels that gain from wider vectors once per instruction
// set (today the float32 GEMM micro-kernels: core/cpu/gemm_kernels_*.cpp). At the first matrix
// product it asks the CPU what it supports and picks the widest kernel it can run:
//
//   avx512   AVX-512F (and the OS saves the 512-bit registers): the 12 x 32 micro-kernel
//   avx2     AVX2 and FMA: the 6 x 16 micro-kernel
//   generic  anything else (or a non-x86 CPU): plain C++ vectors, the compiler's best
//
// The environment variable MOELAB_CPU_ISA=avx2 (or generic) lowers the choice, so one machine can
// test the narrower kernels; asking for a wider set than the CPU has is an error, not a crash.
// Both x86 micro-kernels compute every element of C as the same chain of fused multiply-adds, so
// avx2 and avx512 give bitwise the same products (tests/test_cpu_isa.cpp checks it).
#pragma once

#include <string>

namespace moelab::cpu {

enum class CpuIsa { Generic, Avx2, Avx512 };

const char* isa_name(CpuIsa isa);  // "generic", "avx2", "avx512"

// The widest instruction set this CPU supports (ignores MOELAB_CPU_ISA).
CpuIsa detected_isa();

// The instruction set the kernels use: detected_isa(), lowered by MOELAB_CPU_ISA when set. Read
// once and cached. Throws moelab::Error when MOELAB_CPU_ISA names an unknown set or one this CPU
// lacks.
CpuIsa active_isa();

// "AMD EPYC 9R14 (avx512)": the CPU's brand string and the active set, for recorded results.
std::string cpu_description();

}  // namespace moelab::cpu
