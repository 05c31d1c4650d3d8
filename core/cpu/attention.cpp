// core/cpu/attention.cpp — attention's core in one kernel on the host, forward and backward, causal
// (what follows) or, with causal = false, every query seeing every key (the same code with no row cut
// short: an encoder's bidirectional attention).
//
//   q: [B, T, H, hd], k, v: [B, S, H, hd], S >= T (query t sits at key position t + S - T and sees
//   keys 0 .. t + S - T), per head h (one (sequence, head) pair n = b * H + h):
//   p = softmax(causal_mask(scale * q_h @ k_h^T, -inf))   [B, H, T, S], exactly 0 above the diagonal
//   y_h = p @ v_h                                         y: [B, T, H, hd]
// Backward, with g = dL/dy:
//   dp = g_h @ v_h^T,   ds = scale * p * (dp - sum_j(dp * p))   (softmax's backward, row by row)
//   dq_h = ds @ k_h,    dk_h = ds^T @ q_h,   dv_h = p^T @ g_h
//
// The same function as permuting the heads out, matmul, causal_mask, softmax, matmul and permuting
// back (what nn/attention.cpp did before), computed without those copies and without touching the
// masked half. The heads are read and written in place in the projections' own layout: head h of
// sequence b is a [T, hd] matrix with row stride H * hd, which moelab's GEMM takes as a strided
// operand (core/cpu/gemm_f32.h). Each pair is one task (pairs run in parallel; one pair is never
// split, so results never depend on the thread count), and its T queries are cut into blocks of
// kRows rows. A block [r0, r1) sees keys 0 .. c = r1 + S - T - 1 at most, so its scores are one GEMM
// of [r1 - r0, hd] @ [hd, c + 1] written straight into p's rows (row stride S), its softmax runs
// over each row's own keys, and its output is [r1 - r0, c + 1] @ [c + 1, hd]: for S = T = 64, two
// thirds of the full products' work, less for longer sequences. In the backward, a block of keys
// [c0, c1) is seen only by queries t >= c0 - (S - T), so dk and dv are products over those queries
// alone. There is no mask pass and no -inf: masked entries of p are written as 0 and never
// exponentiated. The score scale is applied to each row before its softmax (in the backward, to ds).
// Blocks of 24 rows keep every non-transposed B read in place (at most two row panels,
// gemm_f32.cpp). On the benchmark model's heads (B 32, T 64, H 4, hd 32, one thread) the
// forward took about half and the backward three quarters of the composed ops' time.
//
// These blocks are still the slowest products of the training step: 21-28 GFLOP/s inside it
// (train_step_bench --gemm-profile), 15-25% of its product time, where the GEMM's register tile
// alone reaches 78-83 at an inner length of 16-32 (gemm_bench --micro-kernel). Measured and no
// better (one program alternating this code and a variant, both head widths 32 and 16, the same
// bits): blocks of 12, 18, 30, 36, 48 or 64 rows (0.87-1.07x); k and v transposed once per head
// so that the scores read B in place (0.87-0.94x); k^T packed once per head into the tile's
// panels and the tiles called directly, without the per-block packing and the GEMM driver
// (forward 0.98-1.03x); each head's q, k, v (and dy) first copied into contiguous buffers, so no
// operand is read 512 bytes a row apart (1.00-1.07x against an A-against-A 1.02-1.04x); the next
// pair's rows prefetched (1.02-1.12x, some 1% of the step); the scores computed in a buffer that
// stays in L1/L2 and copied to p after the pair (0.95-1.0x). It comes with the working set: per
// (sequence, head) pair the forward took 15 us and the backward 16-17 with 1-2 sequences (all in
// L2), 24 and 32 us with 32 (7 MB of q, k, v, p and y). Why, when neither prefetching nor copying
// recovers it, is not yet found (this machine gives perf no hardware counters).
//
// Arithmetic: float32 products run moelab's GEMM on the blocks; float64 (gradcheck) a plain loop.
// Each softmax row is computed as core/cpu/softmax.cpp computes it (the row max, exact_exp, a
// pairwise sum in double), over the row's visible keys.
//
// bfloat16 q, k, v (and dy): the bf16 policy's operands (autograd/ops_attention.cpp); y, p, dq, dk,
// dv are float32. Where the CPU multiplies bf16 natively (AMX or VDPBF16PS: core/cpu/gemm_bf16.h), the two
// products of two bf16 operands run there: the scores q_h @ k_h^T and, in the backward,
// dp = g_h @ v_h^T, with q_h and g_h read in place and k_h^T, v_h^T packed once per pair for all
// its query blocks (gemm_bf16_packed) (the gemm_profile of the float32 step put these at half of
// attention's product time, the slowest blocks of the step). The four products that read p or ds
// (float32, as the policy keeps them) run the float32 GEMM as before, on the pair's bf16 operand
// widened (exactly) into a contiguous buffer. Elsewhere every bf16 input is widened whole and the
// float32 kernel runs: what a CPU without the instruction computes, bit for bit.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <vector>

#include "core/cpu/accumulate.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/exact_math.h"
#include "core/cpu/gemm_bf16.h"
#include "core/cpu/gemm_f32.h"
#include "core/dtype_dispatch.h"
#include "core/cpu/thread_count.h"

namespace moelab {
namespace {

// Query rows per block: two 12-row panels of the AVX-512 GEMM tile (four of the AVX2 one).
constexpr std::int64_t kRows = 24;
// With the bf16 products on AMX, one 32-row panel of its blocks (gemm_bf16.h): 24-row blocks made
// every scores product a partial panel, packed and computed on 32 rows with its edge copied out.
// A block's rows see the same keys' scores either way (the rows past a row's causal limit are
// masked and their p is 0 in the float32 products), so the block height changes no bit.
std::int64_t bf16_block_rows() {
  return cpu::native_bf16_kernel() == cpu::Bf16DotKernel::Amx ? cpu::gemm_bf16_detail::AMX_ROWS : kRows;
}

// c[m, n] (row stride ldc) = op(a) @ op(b), a: [m, k] (row stride lda; stored [k, m] when ta),
// b: [k, n] (row stride ldb; stored [n, k] when tb).
void block_gemm(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc,
                std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb) {
  cpu::gemm_f32_strided(a, lda, b, ldb, c, ldc, m, k, n, ta, tb);
}
void block_gemm(const double* a, std::int64_t lda, const double* b, std::int64_t ldb, double* c, std::int64_t ldc,
                std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb) {
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (std::int64_t p = 0; p < k; ++p) acc += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = acc;
    }
}

// pairwise_sum (core/cpu/accumulate.h) of a[i] (* b[i]) for i < n, in double, as one flat loop
// with restrict pointers for the rows up to one leaf (128 terms): the same 8 lanes, the same tree,
// the same bits; through the generic callable the compiler kept the short rows scalar.
template <class T>
double row_sum(const T* __restrict a, const T* __restrict b, std::int64_t n) {
  if (n > cpu::kPairwiseLeaf)
    return b ? cpu::pairwise_sum(0, n, [a, b](std::int64_t i) { return double(a[i]) * double(b[i]); })
             : cpu::pairwise_sum(0, n, [a](std::int64_t i) { return double(a[i]); });
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  if (b) {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) lane[j] += double(a[i + j]) * double(b[i + j]);
  } else {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) lane[j] += double(a[i + j]);
  }
  double tail = 0;
  for (; i < n; ++i) tail += b ? double(a[i]) * double(b[i]) : double(a[i]);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])) + tail;
}

// Runs body(n) for every pair n of N, in parallel when there are several and the work is large.
template <class Body>
void for_each_pair(std::int64_t pairs, std::int64_t work, const Body& body) {
#pragma omp parallel for schedule(static) num_threads(cpu::element_threads(work)) if (pairs > 1 && cpu::element_threads(work) > 1)
  for (std::int64_t n = 0; n < pairs; ++n) body(n);
}

// Rows [r0, r1) of one pair's p (row stride s), holding the scores: each becomes the softmax of
// its `scale`d visible keys (query r sees min(s, r + off + 1) of them), 0 after.
//
// Each row is a chain (scale and max, then exp(x - max), then the sum, then 1 / sum, then the
// normalisation), and rows are short (1 .. s keys), so one row after another ran at the chain's
// latency: 56 ns a row of the benchmark's 64 x 64 causal block, against 33 with every step done
// for kGroupRows rows before the next (one program, both ways alternating, same bits; the
// exponentials alone take 20). Each row's arithmetic is the same either way.
constexpr std::int64_t kGroupRows = 32;

template <class T>
void softmax_rows(T* pn, std::int64_t r0, std::int64_t r1, std::int64_t s, std::int64_t off, T sc) {
  using namespace Eigen::internal;
  using Packet = typename packet_traits<T>::type;
  constexpr std::int64_t lanes = packet_traits<T>::size;
  const auto seen = [&](std::int64_t r) { return std::min(s, r + off + 1); };
  for (std::int64_t g0 = r0; g0 < r1; g0 += kGroupRows) {
    const std::int64_t g1 = std::min(r1, g0 + kGroupRows);
    T row_max[kGroupRows], inverse_sum[kGroupRows];
    for (std::int64_t r = g0; r < g1; ++r) {  // x *= scale, and the row's max (exact in any order)
      T* x = pn + r * s;
      const std::int64_t n = seen(r);
      const Packet scale = pset1<Packet>(sc);
      Packet vmax = pset1<Packet>(-std::numeric_limits<T>::infinity());
      std::int64_t i = 0;
      for (; i + lanes <= n; i += lanes) {
        const Packet v = pmul(ploadu<Packet>(x + i), scale);
        pstoreu(x + i, v);
        vmax = pmax(vmax, v);
      }
      T m = predux_max(vmax);
      for (; i < n; ++i) {
        x[i] *= sc;
        m = std::max(m, x[i]);
      }
      row_max[r - g0] = m;  // (a NaN anywhere in the row makes the whole row NaN below, whatever m is)
    }
    for (std::int64_t r = g0; r < g1; ++r) cpu::exp_shifted(pn + r * s, row_max[r - g0], pn + r * s, seen(r));
    for (std::int64_t r = g0; r < g1; ++r)
      inverse_sum[r - g0] = static_cast<T>(1.0 / row_sum<T>(pn + r * s, nullptr, seen(r)));
    for (std::int64_t r = g0; r < g1; ++r) {
      T* x = pn + r * s;
      const std::int64_t n = seen(r);
      const T inv = inverse_sum[r - g0];
      for (std::int64_t j = 0; j < n; ++j) x[j] *= inv;
      std::fill(x + n, x + s, T(0));
    }
  }
}

// Rows [r0, r1) of ds (row stride s), holding dp: ds = scale * p * (dp - sum(dp * p)) on the
// visible keys, 0 after (softmax's backward). (Grouped as softmax_rows is, it ran no faster.)
template <class T>
void softmax_backward_rows(T* ds, const T* pn, std::int64_t r0, std::int64_t r1, std::int64_t s, std::int64_t off,
                           T sc) {
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t seen = std::min(s, r + off + 1);
    T* dsr = ds + r * s;
    const T* pr = pn + r * s;
    const T dot = static_cast<T>(row_sum<T>(dsr, pr, seen));
    for (std::int64_t j = 0; j < seen; ++j) dsr[j] = pr[j] * (dsr[j] - dot) * sc;
    std::fill(dsr + seen, dsr + s, T(0));
  }
}

// Asks for the visible part of p's rows [r0, r1) (row stride s) to be brought into the cache, before
// the block's dp product, so that the rows have arrived when softmax_backward_rows reads them. p was
// written by the forward, long before: in the 64-expert bf16 step the backward rows' loads of it
// were most of their 4.0-4.9% of perf's samples, 2.1-2.5% with this (the step's products went
// from 44.0-44.4% of the samples to 44.6-46.3%, about what the smaller softmax share alone gives).
template <class T>
void prefetch_row(const T* row, std::int64_t n) {  // the cache lines of row[0, n)
  for (std::int64_t c = 0; c < n; c += 64 / static_cast<std::int64_t>(sizeof(T))) __builtin_prefetch(row + c);
}
template <class T>
void prefetch_visible(const T* pn, std::int64_t r0, std::int64_t r1, std::int64_t s, std::int64_t off) {
  for (std::int64_t r = r0; r < r1; ++r) prefetch_row(pn + r * s, std::min(s, r + off + 1));
}

// Asks for one head's [rows, hd] block (rows ld elements apart) to be brought into the cache. The
// bf16 paths ask for the next pair's q, k, v (and dy) heads while this pair computes (for_each_pair
// hands each thread its pairs in order, so pair n + 1 is most often the same thread's next): their
// first reads (widening into float32, packing k^T or v^T) waited on memory, the heads being rows of
// hd values 2 * H * hd bytes apart. In the bf16 dense step the widening, the pairs' bodies and the
// softmax rows went from 11.3-12.1% of perf's samples to 9.6-10.1% (the widening alone from 3.6-3.8%
// to 1.4-1.5%); in the 64-expert one (hd 16) the widening went from 1.5% to 0.7-0.9% but the whole
// stayed (10.8-10.9% before, 11.2% after). The float32 paths read the heads inside their products,
// where the same prefetch measured no better (the header).
template <class T>
void prefetch_head(const T* head, std::int64_t rows, std::int64_t hd, std::int64_t ld) {
  for (std::int64_t r = 0; r < rows; ++r) prefetch_row(head + r * ld, hd);
}

// A bfloat16 tensor's elements as the 16-bit words gemm_bf16 reads.
const std::uint16_t* bf16_words(const Tensor& t) { return reinterpret_cast<const std::uint16_t*>(t.data<BFloat16>()); }

// One head's [rows, hd] block of a bf16 [B, L, H, hd] tensor (rows ld apart) widened into a
// contiguous float32 [rows, hd] buffer (exact).
// (A row at a time through restrict pointers, so that the compiler vectorises the shifts: the
// element-wise loop over the vector took 4% of the bf16 training step.)
void widen_row(const std::uint16_t* __restrict in, float* __restrict out, std::int64_t n) {
  for (std::int64_t c = 0; c < n; ++c) {
    const std::uint32_t word = static_cast<std::uint32_t>(in[c]) << 16;
    std::memcpy(out + c, &word, sizeof(word));
  }
}
void widen_head(const std::uint16_t* head, std::int64_t rows, std::int64_t hd, std::int64_t ld, std::vector<float>& out) {
  out.resize(static_cast<std::size_t>(rows * hd));
  for (std::int64_t r = 0; r < rows; ++r) widen_row(head + r * ld, out.data() + r * hd, hd);
}

}  // namespace

void CpuBackend::attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal, Tensor& y,
                           Tensor& p) {
  // Query r sees keys 0 .. min(S, r + off + 1) - 1: off = S - T when causal; without the mask
  // off = S, so every row sees all S keys (and the blocks below run the full products).
  const std::int64_t batch = q.size(0), t = q.size(1), heads = q.size(2), hd = q.size(3), s = k.size(1);
  const std::int64_t off = causal ? s - t : s;
  const std::int64_t ld = heads * hd;  // row stride of one head's [T, hd] (or [S, hd]) inside [B, T, H, hd]
  if (q.dtype() == DType::BFloat16) {
    if (!cpu::use_native_bf16_gemm())  // widened whole: the float32 kernel on the same values
      return attention(q.to(DType::Float32), k.to(DType::Float32), v.to(DType::Float32), scale, causal, y, p);
    const std::uint16_t *pq = bf16_words(q), *pk = bf16_words(k), *pv = bf16_words(v);
    float* py = y.data<float>();
    float* pp = p.data<float>();
    const float sc = static_cast<float>(scale);
    for_each_pair(batch * heads, p.numel(), [&](std::int64_t n) {
      thread_local std::vector<float> v_rows;  // this pair's v head, widened: [S, hd]
      thread_local cpu::Bf16PackedB k_packed;  // this pair's k_h^T, packed once for every query block
      const std::int64_t b = n / heads, h = n % heads;
      if (n + 1 < batch * heads) {
        const std::int64_t nq = (n + 1) / heads * t * ld + (n + 1) % heads * hd;
        const std::int64_t nk = (n + 1) / heads * s * ld + (n + 1) % heads * hd;
        prefetch_head(pq + nq, t, hd, ld);
        for (const std::uint16_t* x : {pk + nk, pv + nk}) prefetch_head(x, s, hd, ld);
      }
      const std::uint16_t* qn = pq + b * t * ld + h * hd;
      cpu::pack_bf16_b(cpu::native_bf16_kernel(), pk + b * s * ld + h * hd, ld, hd, s, true, k_packed);
      widen_head(pv + b * s * ld + h * hd, s, hd, ld, v_rows);
      float* yn = py + b * t * ld + h * hd;
      float* pn = pp + n * t * s;
      const std::int64_t block_rows = bf16_block_rows();
      for (std::int64_t r0 = 0; r0 < t; r0 += block_rows) {
        const std::int64_t r1 = std::min(t, r0 + block_rows), keys = std::min(s, r1 + off);
        cpu::gemm_bf16_packed(cpu::native_bf16_kernel(), qn + r0 * ld, ld, k_packed, keys, pn + r0 * s, s, r1 - r0,
                              false);  // q @ k^T
        softmax_rows(pn, r0, r1, s, off, sc);
        block_gemm(pn + r0 * s, s, v_rows.data(), hd, yn + r0 * ld, ld, r1 - r0, keys, hd, false, false);  // p @ v
      }
    });
    return;
  }
  dispatch_float(q.dtype(), [&]<class T>() {
    const T* pq = q.data<T>();
    const T* pk = k.data<T>();
    const T* pv = v.data<T>();
    T* py = y.data<T>();
    T* pp = p.data<T>();
    const T sc = static_cast<T>(scale);
    for_each_pair(batch * heads, p.numel(), [&](std::int64_t n) {
      const std::int64_t b = n / heads, h = n % heads;
      const T* qn = pq + b * t * ld + h * hd;
      const T* kn = pk + b * s * ld + h * hd;
      const T* vn = pv + b * s * ld + h * hd;
      T* yn = py + b * t * ld + h * hd;
      T* pn = pp + n * t * s;
      for (std::int64_t r0 = 0; r0 < t; r0 += kRows) {
        const std::int64_t r1 = std::min(t, r0 + kRows), keys = std::min(s, r1 + off);  // keys the last row sees
        block_gemm(qn + r0 * ld, ld, kn, ld, pn + r0 * s, s, r1 - r0, hd, keys, false, true);  // q @ k^T
        softmax_rows(pn, r0, r1, s, off, sc);
        block_gemm(pn + r0 * s, s, vn, ld, yn + r0 * ld, ld, r1 - r0, keys, hd, false, false);  // p @ v
      }
    });
  });
}

void CpuBackend::attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                    const Tensor& p, const Tensor& dy, Tensor& dq, Tensor& dk, Tensor& dv) {
  const std::int64_t batch = q.size(0), t = q.size(1), heads = q.size(2), hd = q.size(3), s = k.size(1);
  const std::int64_t off = causal ? s - t : s;  // as in the forward
  const std::int64_t ld = heads * hd;
  if (q.dtype() == DType::BFloat16) {
    if (!cpu::use_native_bf16_gemm())  // widened whole, as in the forward
      return attention_backward(q.to(DType::Float32), k.to(DType::Float32), v.to(DType::Float32), scale, causal, p,
                                dy.to(DType::Float32), dq, dk, dv);
    const std::uint16_t *pq = bf16_words(q), *pk = bf16_words(k), *pv = bf16_words(v), *pg = bf16_words(dy);
    const float* pp = p.data<float>();
    float* pdq = dq.data<float>();
    float* pdk = dk.data<float>();
    float* pdv = dv.data<float>();
    const float sc = static_cast<float>(scale);
    for_each_pair(batch * heads, p.numel(), [&](std::int64_t n) {
      thread_local std::vector<float> scratch, q_rows, k_rows, g_rows;  // ds [T, S]; the pair's q, k, g widened
      thread_local cpu::Bf16PackedB v_packed;                           // v_h^T, packed once
      scratch.resize(static_cast<std::size_t>(t * s));
      float* ds = scratch.data();
      const std::int64_t b = n / heads, h = n % heads;
      const std::int64_t q_at = b * t * ld + h * hd, k_at = b * s * ld + h * hd;
      if (n + 1 < batch * heads) {
        const std::int64_t nq = (n + 1) / heads * t * ld + (n + 1) % heads * hd;
        const std::int64_t nk = (n + 1) / heads * s * ld + (n + 1) % heads * hd;
        for (const std::uint16_t* x : {pq + nq, pg + nq}) prefetch_head(x, t, hd, ld);
        for (const std::uint16_t* x : {pk + nk, pv + nk}) prefetch_head(x, s, hd, ld);
      }
      widen_head(pq + q_at, t, hd, ld, q_rows);
      widen_head(pk + k_at, s, hd, ld, k_rows);
      widen_head(pg + q_at, t, hd, ld, g_rows);
      cpu::pack_bf16_b(cpu::native_bf16_kernel(), pv + k_at, ld, hd, s, true, v_packed);
      const float* pn = pp + n * t * s;
      const std::int64_t block_rows = bf16_block_rows();
      for (std::int64_t r0 = 0; r0 < t; r0 += block_rows) {
        const std::int64_t r1 = std::min(t, r0 + block_rows), keys = std::min(s, r1 + off);
        prefetch_visible(pn, r0, r1, s, off);
        cpu::gemm_bf16_packed(cpu::native_bf16_kernel(), pg + q_at + r0 * ld, ld, v_packed, keys, ds + r0 * s, s,
                              r1 - r0, false);  // dp = g @ v^T
        softmax_backward_rows(ds, pn, r0, r1, s, off, sc);
        block_gemm(ds + r0 * s, s, k_rows.data(), hd, pdq + q_at + r0 * ld, ld, r1 - r0, keys, hd, false, false);
      }
      for (std::int64_t c0 = 0; c0 < s; c0 += kRows) {
        const std::int64_t c1 = std::min(s, c0 + kRows), t0 = std::max<std::int64_t>(0, c0 - off);
        block_gemm(ds + t0 * s + c0, s, q_rows.data() + t0 * hd, hd, pdk + k_at + c0 * ld, ld, c1 - c0, t - t0, hd, true,
                   false);
        block_gemm(pn + t0 * s + c0, s, g_rows.data() + t0 * hd, hd, pdv + k_at + c0 * ld, ld, c1 - c0, t - t0, hd, true,
                   false);
      }
    });
    return;
  }
  dispatch_float(q.dtype(), [&]<class T>() {
    const T* pq = q.data<T>();
    const T* pk = k.data<T>();
    const T* pv = v.data<T>();
    const T* pp = p.data<T>();
    const T* pg = dy.data<T>();
    T* pdq = dq.data<T>();
    T* pdk = dk.data<T>();
    T* pdv = dv.data<T>();
    const T sc = static_cast<T>(scale);
    for_each_pair(batch * heads, p.numel(), [&](std::int64_t n) {
      thread_local std::vector<T> scratch;  // ds of this pair: [T, S]
      scratch.resize(static_cast<std::size_t>(t * s));
      T* ds = scratch.data();
      const std::int64_t b = n / heads, h = n % heads;
      const std::int64_t q_at = b * t * ld + h * hd, k_at = b * s * ld + h * hd;  // this head's [T, hd], [S, hd]
      const T* pn = pp + n * t * s;
      for (std::int64_t r0 = 0; r0 < t; r0 += kRows) {
        const std::int64_t r1 = std::min(t, r0 + kRows), keys = std::min(s, r1 + off);
        prefetch_visible(pn, r0, r1, s, off);
        block_gemm(pg + q_at + r0 * ld, ld, pv + k_at, ld, ds + r0 * s, s, r1 - r0, hd, keys, false, true);  // dp = g @ v^T
        softmax_backward_rows(ds, pn, r0, r1, s, off, sc);
        block_gemm(ds + r0 * s, s, pk + k_at, ld, pdq + q_at + r0 * ld, ld, r1 - r0, keys, hd, false, false);  // dq = ds @ k
      }
      // dk = ds^T @ q and dv = p^T @ g over key blocks [c0, c1): queries t0 = c0 - off .. T - 1 see them.
      for (std::int64_t c0 = 0; c0 < s; c0 += kRows) {
        const std::int64_t c1 = std::min(s, c0 + kRows), t0 = std::max<std::int64_t>(0, c0 - off);
        block_gemm(ds + t0 * s + c0, s, pq + q_at + t0 * ld, ld, pdk + k_at + c0 * ld, ld, c1 - c0, t - t0, hd, true, false);
        block_gemm(pn + t0 * s + c0, s, pg + q_at + t0 * ld, ld, pdv + k_at + c0 * ld, ld, c1 - c0, t - t0, hd, true, false);
      }
    });
  });
}

}  // namespace moelab
