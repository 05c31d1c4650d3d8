// cuda/rounded_math.cuh — one IEEE operation each, rounded to nearest and never contracted.
//
// nvcc fuses `a * b + c` into one FMA by default, which rounds once where the CPU rounds twice.
// Kernels that must reproduce the CPU's results bit for bit (the optimizer updates, whose CPU
// file is built with -ffp-contract=off; rope's rotation; the norms' elementwise parts) spell their
// arithmetic with these, so every operation is a separate correctly rounded instruction:
//
//   using namespace moelab::cuda::rounded;
//   param = sub(param, mul(lr, div(m, add(sqrt_rn(v), eps))));
#pragma once

namespace moelab::cuda::rounded {

__device__ inline float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double sub(double a, double b) { return __dsub_rn(a, b); }
__device__ inline float div(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double div(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ inline double sqrt_rn(double a) { return __dsqrt_rn(a); }

}  // namespace moelab::cuda::rounded
