// core/cpu/grouped_matmul.cpp — grouped matrix products on the host (the MoE expert layers).
//
// Group e owns rows r0 = offsets[e] .. r1 = offsets[e+1] - 1 of x; with rows = r1 - r0 + 1:
//   forward:        out[r0:r1+1] = x[r0:r1+1] @ op(w[e])      x_e: [rows, in], w[e]: [in, out]
//                                                             (stored [out, in] when trans_w)
//                   out[offsets[E]:N] = 0                      (rows in no group)
//   weight grad:    dw[e] = x_e^T @ dy_e                       [in, rows] @ [rows, out] -> [in, out]
// The offsets are an int32 tensor in host memory; they are checked here, before any output is
// written (the front end leaves that to the backend so a GPU need not read them back).
// Each group is one ordinary GEMM on pointers into the contiguous tensors (no copies):
//   float32: moelab's blocked GEMM (core/cpu/gemm_f32.h); the weight gradient passes trans_a, so
//            x_e is read in place as its transpose.
//   float64: Eigen's GEMM on row-major maps (gradcheck's precision; speed does not matter).
//   bfloat16 x and w (dy): float32 out (dw), through core/cpu/gemm_bf16.h's AMX or VDPBF16PS kernel
//            where the CPU has one, else widened to float32 (exact) and the float32 path above.
// Parallelism: one big group uses every thread inside its GEMM. Many small groups (the usual MoE
// case: E experts, a few dozen tokens each) would spend more time starting thread teams than
// multiplying, so then the groups themselves are shared out over threads and each GEMM, nested in
// that parallel region, runs on one thread; and when all groups together are a small amount of
// work, one thread does them all (core/cpu/thread_count.h). Either way each output element is summed over k in a
// fixed order by exactly one GEMM, so results do not depend on the thread count.
#include <algorithm>
#include <omp.h>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/gemm.h"
#include "core/cpu/gemm_bf16.h"
#include "core/cpu/thread_count.h"

namespace moelab {
namespace {

// A bfloat16 tensor's elements as the 16-bit words gemm_bf16 reads.
const std::uint16_t* bfloat16_bits(const Tensor& t) {
  return reinterpret_cast<const std::uint16_t*>(t.data<BFloat16>());
}

// Runs body(e) for every group: groups in parallel (one thread per GEMM) when there are several,
// the average group is small and all of them together are worth more than one thread
// (core/cpu/thread_count.h: one thread per kGemmGrainFlops, at most one per group), otherwise one
// after another (each GEMM then decides its own threads).
template <class Body>
void for_each_group(std::int64_t groups, double total_flops, Body&& body) {
  const bool small = total_flops / static_cast<double>(std::max<std::int64_t>(groups, 1)) < 4.0e6;
  const int threads = static_cast<int>(std::min<std::int64_t>(cpu::threads_for(total_flops, cpu::kGemmGrainFlops), groups));
  if (groups > 1 && small && threads > 1) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (std::int64_t e = 0; e < groups; ++e) body(e);
  } else {
    for (std::int64_t e = 0; e < groups; ++e) body(e);
  }
}

// offsets: int32 [groups + 1] in host memory -> the same as int64s, checked:
// 0 = offsets[0] <= offsets[1] <= ... <= offsets[groups] <= rows.
std::vector<std::int64_t> checked_offsets(const Tensor& offsets, std::int64_t rows, const char* op) {
  const std::int32_t* p = offsets.data<std::int32_t>();
  std::vector<std::int64_t> out(p, p + offsets.numel());
  const std::size_t groups = out.size() - 1;
  MOELAB_CHECK(out.front() == 0, op, "offsets[0] must be 0, got ", out.front());
  for (std::size_t e = 0; e < groups; ++e)
    MOELAB_CHECK(out[e] <= out[e + 1], op, "offsets must be non-decreasing, but offsets[", e, "] = ", out[e],
                 " > offsets[", e + 1, "] = ", out[e + 1]);
  MOELAB_CHECK(out.back() <= rows, op, "offsets[E] = ", out.back(), " is more than the number of rows N = ", rows);
  return out;
}

// One product per group, for every element type: `gemm(a, b, c, m, k, n, trans_a, trans_b)` is
// cpu::gemm (float32, float64) or the bf16 kernel (bfloat16 words in, float32 out).
const auto float_gemm = [](const auto* a, const auto* b, auto* c, std::int64_t m, std::int64_t k, std::int64_t n,
                           bool trans_a, bool trans_b) { cpu::gemm(a, b, c, m, k, n, trans_a, trans_b); };
const auto native_bf16_gemm = [](const std::uint16_t* a, const std::uint16_t* b, float* c, std::int64_t m,
                                 std::int64_t k, std::int64_t n, bool trans_a, bool trans_b) {
  cpu::gemm_bf16(cpu::native_bf16_kernel(), a, b, c, m, k, n, trans_a, trans_b);
};

// out[r0:r0+rows] = x_e @ op(w[e]) for every non-empty group, then zeros for the rows in no group.
template <class In, class Out, class Gemm>
void grouped_forward(const std::vector<std::int64_t>& offsets, std::int64_t groups, std::int64_t in,
                     std::int64_t n_out, double flops, bool trans_w, const In* px, const In* pw, Out* po,
                     std::int64_t out_numel, const Gemm& gemm) {
  for_each_group(groups, flops, [&](std::int64_t e) {
    const std::int64_t r0 = offsets[static_cast<std::size_t>(e)], rows = offsets[static_cast<std::size_t>(e) + 1] - r0;
    if (rows == 0) return;
    gemm(px + r0 * in, pw + e * in * n_out, po + r0 * n_out, rows, in, n_out, false, trans_w);
  });
  std::fill(po + offsets.back() * n_out, po + out_numel, Out(0));  // rows in no group
}

// dw[e] = x_e^T @ dy_e for every group; zeros for an expert that received no tokens.
template <class In, class Out, class Gemm>
void grouped_weight_grad(const std::vector<std::int64_t>& offsets, std::int64_t groups, std::int64_t in,
                         std::int64_t n_out, double flops, const In* px, const In* pdy, Out* pdw, const Gemm& gemm) {
  for_each_group(groups, flops, [&](std::int64_t e) {
    const std::int64_t r0 = offsets[static_cast<std::size_t>(e)], rows = offsets[static_cast<std::size_t>(e) + 1] - r0;
    Out* dst = pdw + e * in * n_out;
    if (rows == 0) {
      std::fill(dst, dst + in * n_out, Out(0));
      return;
    }
    gemm(px + r0 * in, pdy + r0 * n_out, dst, in, rows, n_out, true, false);
  });
}

}  // namespace

void CpuBackend::grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& offsets_tensor, bool trans_w,
                                Tensor& out) {
  // x: [N, in], w: [E, in, out] or [E, out, in], out: [N, out].
  const std::vector<std::int64_t> offsets = checked_offsets(offsets_tensor, x.size(0), "grouped_matmul");
  const std::int64_t groups = w.size(0), in = x.size(1), n_out = out.size(1);
  if (in == 0) {  // every product is a sum over nothing
    fill(out, 0.0);
    return;
  }
  const double flops = 2.0 * static_cast<double>(x.size(0)) * static_cast<double>(in) * static_cast<double>(n_out);
  if (x.dtype() == DType::BFloat16) {
    if (!cpu::use_native_bf16_gemm()) return grouped_matmul(x.to(DType::Float32), w.to(DType::Float32), offsets_tensor,
                                                            trans_w, out);
    return grouped_forward(offsets, groups, in, n_out, flops, trans_w, bfloat16_bits(x), bfloat16_bits(w),
                           out.data<float>(), out.numel(), native_bf16_gemm);
  }
  dispatch_float(x.dtype(), [&]<class T>() {
    grouped_forward(offsets, groups, in, n_out, flops, trans_w, x.data<T>(), w.data<T>(), out.data<T>(), out.numel(),
                    float_gemm);
  });
}

void CpuBackend::grouped_matmul_weight_grad(const Tensor& x, const Tensor& dy, const Tensor& offsets_tensor,
                                            Tensor& dw) {
  // x: [N, in], dy: [N, out], dw: [E, in, out]; dw[e] = x_e^T @ dy_e with k = rows of group e.
  const std::vector<std::int64_t> offsets = checked_offsets(offsets_tensor, x.size(0), "grouped_matmul_weight_grad");
  if (dw.numel() == 0) return;
  const std::int64_t groups = dw.size(0), in = x.size(1), n_out = dy.size(1);
  const double flops = 2.0 * static_cast<double>(x.size(0)) * static_cast<double>(in) * static_cast<double>(n_out);
  if (x.dtype() == DType::BFloat16) {
    if (!cpu::use_native_bf16_gemm())
      return grouped_matmul_weight_grad(x.to(DType::Float32), dy.to(DType::Float32), offsets_tensor, dw);
    return grouped_weight_grad(offsets, groups, in, n_out, flops, bfloat16_bits(x), bfloat16_bits(dy),
                               dw.data<float>(), native_bf16_gemm);
  }
  dispatch_float(x.dtype(), [&]<class T>() {
    grouped_weight_grad(offsets, groups, in, n_out, flops, x.data<T>(), dy.data<T>(), dw.data<T>(), float_gemm);
  });
}

}  // namespace moelab
