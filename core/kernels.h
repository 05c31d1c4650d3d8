// core/kernels.h — every computation moelab can run on a Tensor, independent of the device.
//
// These are the engine's primitive operations. Each function
//   1. checks its arguments and throws moelab::Error("moelab::<op>: ...") on anything wrong
//      (shapes, dtypes, mixed devices, index ranges, empty tensors where they make no sense),
//   2. allocates its outputs on the inputs' device,
//   3. hands the work to that device's Backend (core/backend.h): core/cpu/ on the host, cuda/ on
//      a GPU. The backends never re-check; the checks live here, once.
// Kernels know nothing of gradients: autograd/ builds differentiable ops from these forward and
// backward pairs. Float ops accept float32 and float64; index arguments are int32.
//
// Shapes are written the llm.c way: x: [N, d] means N rows of d. "[..., d]" means any number of
// leading axes, treated as one flattened N.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace moelab {
class Generator;  // core/random.h
}

namespace moelab::kernels {

// ---------------------------------------------------------------- copies and fills
void fill(Tensor& x, double value);                 // every element := value
void copy(Tensor& dst, const Tensor& src);          // same shape and dtype; may cross devices
Tensor cast(const Tensor& x, DType dtype);          // element type conversion (float->int truncates;
                                                    // to bfloat16 rounds to nearest even, core/bfloat16.h)

// ---------------------------------------------------------------- random fills (in place)
// x: any shape, float32 or float64, any device. Element i (row-major) takes the next numbers of
// `gen`, exactly as the factories uniform() / normal() (core/factories.h) draw them:
//   fill_uniform: x[i] = low + (high - low) * u,   u uniform in [0, 1) from 1 word of gen
//   fill_normal:  x[i] = mean + std * z,           z standard normal from 2 words (Box-Muller)
// and gen's counter advances by the words consumed (numel or 2 * numel), so later draws never
// repeat these. On a GPU the numbers are generated there (no host staging); they are the same
// words of the same Philox stream, so a CUDA fill equals the CPU fill up to the last bits of the
// float maths (core/cpu/random_fill.cpp, cuda/random_fill.cu).
void fill_uniform(Tensor& x, double low, double high, Generator& gen);
void fill_normal(Tensor& x, double mean, double std, Generator& gen);

// ---------------------------------------------------------------- matrix products
// a: [M, K] (stored [K, M] when trans_a), b: [K, N] (stored [N, K] when trans_b) -> [M, N].
// Batched: a: [B, M, K], b: [B, K, N] -> [B, M, N] (the same transposes apply to every batch).
// a and b float32 or float64 (the result has their dtype), or both bfloat16: then the result is
// float32, the bfloat16 values multiplied and summed in float32 (core/kernels/matmul.cpp).
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// The operands of a product (matmul, the grouped products): both float32 or both float64 (false),
// or both bfloat16 (true: the product is float32); otherwise throws naming op and the operands.
bool check_product_operands(const Tensor& a, const Tensor& b, const char* op, const char* a_name, const char* b_name);

// ---------------------------------------------------------------- grouped matrix products (MoE experts)
// Rows of x are sorted by group (expert); group e owns rows offsets[e] .. offsets[e+1]-1 and is
// multiplied by its own matrix w[e]:
//   x: [N, in], w: [E, in, out] (stored [E, out, in] when trans_w), offsets: int32 [E + 1]
//   non-decreasing with offsets[0] = 0 and offsets[E] <= N  ->  [N, out],
//   out[offsets[e]:offsets[e+1]] = x[offsets[e]:offsets[e+1]] @ op(w[e]);
//   rows offsets[E] .. N-1 belong to no group: their output rows are 0.
// x and w both bfloat16 give a float32 result, as matmul's do.
// Empty groups are allowed (they produce no rows). Its input gradient is again a grouped product:
//   dx = grouped_matmul(dy, w, offsets, !trans_w).
// The offsets stay where they are: the front end checks shapes and dtypes only, and the backend
// checks the offsets' values where they live (CPU: before computing, moelab::Error; CUDA: in the
// kernel, reported at the next synchronisation), so a GPU never waits for them. Rows past
// offsets[E] are how a MoE layer keeps a fixed row count when a capacity drops assignments
// (routing.cpp below), so that no shape depends on data the host has not seen.
Tensor grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& offsets, bool trans_w = false);
// The weight gradient: x: [N, in], dy: [N, out], offsets as above with E = groups
//   -> dw: [E, in, out], dw[e] = x_e^T @ dy_e (zeros for an empty group; rows past offsets[E] unused).
// For trans_w the stored gradient is its transpose: transpose(dw) (or swap x and dy: dy_e^T @ x_e).
Tensor grouped_matmul_weight_grad(const Tensor& x, const Tensor& dy, const Tensor& offsets, std::int64_t groups);

// ---------------------------------------------------------------- routing (core/kernels/routing.cpp)
// The counting sort a MoE layer runs every step, on the device of its input, so that routing
// never waits on the host. ids: int32 [T, k], the expert of assignment a = t*k + j, or -1 for an
// assignment that was dropped before (a router's own decision); capacity >= 0 keeps at most that
// many assignments per expert, the first ones in the order a = 0, 1, ... (capacity < 0: no limit).
struct ExpertGroups {
  Tensor kept;     // int32 [T, k]: ids, with -1 where dropped (by the router or by the capacity)
  Tensor order;    // int32 [T*k]: the kept assignments a sorted by expert, stably (increasing a
                   //   within an expert), then the dropped ones in increasing a
  Tensor rows;     // int32 [T*k]: order[i] / k, the token of each sorted assignment
  Tensor offsets;  // int32 [E + 1]: expert e's assignments are order[offsets[e] : offsets[e+1]];
                   //   offsets[0] = 0, offsets[E] = the number kept
  Tensor wanted;   // int32 [E]: how many assignments chose each expert, before the capacity
};
// An id outside [-1, experts) is an error (CPU: thrown here; CUDA: reported at the next
// synchronisation, that assignment then counts as dropped).
ExpertGroups group_by_expert(const Tensor& ids, std::int64_t experts, std::int64_t capacity = -1);
// offsets: int32 [E + 1] as above -> int32 [rows], the group of each row: e for rows in
// [offsets[e], offsets[e+1]), E for the rows past offsets[E] (in no group).
Tensor row_groups(const Tensor& offsets, std::int64_t rows);


// ---------------------------------------------------------------- elementwise
// An op is named by an enumerator of UnaryOp or BinaryOp. Here they are declared by name only
// (opaque enums): their enumerators, op_name() and the op tables are the one list of elementwise
// ops, core/kernels/elementwise_ops.h, which also says how to add one. Include that header where
// you name an op by its enumerator (exp(x)); the named forms further down
// (kernels::add, kernels::exp, ...) need nothing more. Kept apart so that adding an op recompiles
// the few files that include the list, not every file that includes this one.
enum class UnaryOp : int;
enum class BinaryOp : int;


Tensor unary(UnaryOp op, const Tensor& x);
// a op b, broadcasting the NumPy way (core/broadcast.h). Align the shapes from the right; a missing
// leading axis counts as 1; each aligned pair of axes must be equal or one of them 1, and the
// operand with the 1 is repeated along that axis. The result has the broadcast shape:
//   a: [N, d], b: [N, d] -> [N, d]        b: [] or [1] -> [N, d]       b: [d] -> [N, d]  (bias)
//   a: [N, d], b: [N, 1] -> [N, d]        (one value per row: a gate, a norm)
//   a: [B, 1, d], b: [T, d] -> [B, T, d]  a: [N, 1], b: [1, M] -> [N, M]  (both sides repeat)
// Either side may be the smaller one. Any other pair, e.g. [2, 3] with [3, 2], throws
// moelab::Error naming the op and both shapes. So layers never build an index tensor just to
// repeat a value along a row: mul(y, g) with g: [M, 1] does it. Every element is computed by the
// same scalar function whatever the shapes, so results are bitwise the same on any thread count.
// Differentiable ops (autograd/ops_elementwise.h) sum each operand's gradient back over the axes
// along which it was repeated.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary_scalar(BinaryOp op, const Tensor& a, double b);   // a op b
Tensor scalar_binary(BinaryOp op, double a, const Tensor& b);   // a op b (e.g. 1 / x, 1 - x)
// Named forms (core/kernels/elementwise.cpp), for code that does not dispatch by op:
//   add(a, b) = binary(BinaryOp::Add, a, b)   add(a, 2.0) = binary_scalar(BinaryOp::Add, a, 2.0)
//   sub(1.0, x) = scalar_binary(BinaryOp::Sub, 1.0, x)         exp(x) = unary(UnaryOp::Exp, x)
// Comparisons give 1 where the relation holds, else 0, in the operands' dtype. A new op of the
// list has only its enumerator form unless a line is added here.
Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, double b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double b);
Tensor pow(double a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, double b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor square(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor reciprocal(const Tensor& x);

// d relu: grad where x > 0, else 0.  x, grad: same shape.
Tensor relu_backward(const Tensor& x, const Tensor& grad);

// ---------------------------------------------------------------- reductions
// Sums run in a fixed order, so results are bitwise the same run after run.
Tensor sum(const Tensor& x);                                      // -> [] (0-d)
Tensor sum(const Tensor& x, int axis, bool keepdim = false);
Tensor mean(const Tensor& x);                                     // -> []; x must not be empty
Tensor mean(const Tensor& x, int axis, bool keepdim = false);
Tensor max(const Tensor& x);                                      // -> []; x must not be empty
struct MaxResult {
  Tensor values;   // the maxima
  Tensor indices;  // int32 position along `axis` of the first maximum
};
MaxResult max(const Tensor& x, int axis, bool keepdim = false);

// ---------------------------------------------------------------- softmax
// softmax along `axis` (default: the last; negative counts from the end); log_softmax along the
// last axis. Sums below are along that axis.
Tensor softmax(const Tensor& x, int axis = -1);                             // same shape as x
Tensor softmax_backward(const Tensor& y, const Tensor& dy, int axis = -1);  // dx = y * (dy - sum(dy * y))
Tensor log_softmax(const Tensor& x);                              // x - logsumexp(x)
Tensor log_softmax_backward(const Tensor& y, const Tensor& dy);   // dx = dy - exp(y) * sum(dy)

// ---------------------------------------------------------------- cross-entropy
// Fused, numerically stable (log-sum-exp with the row max subtracted) mean cross-entropy.
// logits: [N, V] float, targets: [N] int32 in [0, V) or == ignore_index (that row is skipped).
// loss = mean over kept rows of (logsumexp(logits[i]) - logits[i, targets[i]]); 0 if none kept.
// Nothing is read back to the host: the kept count stays on the device for the backward.
struct CrossEntropyResult {
  Tensor loss;       // [] scalar
  Tensor logsumexp;  // [N] per row (saved for the backward)
  Tensor kept;       // [] float64 on the logits' device: the number of rows not ignored
  std::int64_t kept_count() const;  // kept read back to the host (a device->host copy on a GPU)
};
CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, int ignore_index = -100);
// dlogits[i] = (softmax(logits[i]) - onehot(targets[i])) * dloss / kept; 0 for ignored rows.
// dloss: [] float64 and kept: [] float64 (the forward's), both on the logits' device.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& logsumexp,
                              const Tensor& dloss, const Tensor& kept, int ignore_index = -100);
// The same with host values (tests, hand-written gradients): also checks kept against the
// targets, which reads them to the host.
Tensor cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& logsumexp,
                              double dloss, std::int64_t kept, int ignore_index = -100);

// ---------------------------------------------------------------- gathering and scattering rows
// index_select: src: [N, ...], index: [M] int32 in [0, N) -> [M, ...] (row m = src[index[m]]).
Tensor index_select(const Tensor& src, const Tensor& index);
// scatter_add_rows: src: [M, ...], index: [M] -> [num_rows, ...] zeros, then out[index[m]] += src[m]
// for m = 0, 1, ..., M-1 in that order (fixed order, no atomics: deterministic).
Tensor scatter_add_rows(const Tensor& src, const Tensor& index, std::int64_t num_rows);
// scatter_add_rows_scaled: src: [M, ...], scale: [M], index: [M] -> [num_rows, ...] zeros, then
// out[index[m]] += scale[m] * src[m] in the same fixed order, each product rounded before it is
// added: bitwise scatter_add_rows(src * scale[:, None], index, num_rows) without the [M, ...]
// product in memory (the MoE layer's combine step: expert outputs times gates, back to tokens).
Tensor scatter_add_rows_scaled(const Tensor& src, const Tensor& scale, const Tensor& index, std::int64_t num_rows);
// Its backward, one pass over the rows: with gy = dy[index[m]] (dy: [num_rows, ...]),
//   dsrc[m] = scale[m] * gy              [M, ...]
//   dscale[m] = sum_c src[m, c] * gy[c]  [M] (each product rounded, summed as kernels::sum sums a row)
// bitwise what the unfused ops' gradients (index_select, then mul's and sum's) give on the CPU; on
// CUDA dsrc is bitwise the CPU's and dscale agrees to rounding (cuda/index.cu).
struct ScaledRowsGrad {
  Tensor src;    // [M, ...]
  Tensor scale;  // [M]
};
ScaledRowsGrad scatter_add_rows_scaled_backward(const Tensor& dy, const Tensor& src, const Tensor& scale,
                                                const Tensor& index);
// gather_last: src: [..., K], index: [..., J] int32 in [0, K) -> [..., J], out[r, j] = src[r, index[r, j]].
Tensor gather_last(const Tensor& src, const Tensor& index);
// scatter_add_last: src: [..., J], index: [..., J] -> [..., K] zeros, out[r, index[r, j]] += src[r, j].
Tensor scatter_add_last(const Tensor& src, const Tensor& index, std::int64_t k);
// embedding: weight: [V, d], ids: [...] int32 in [0, V) -> [..., d].
Tensor embedding(const Tensor& weight, const Tensor& ids);
// embedding_backward: dy: [..., d], ids: [...] -> dweight: [V, d] (rows summed in a fixed order).
Tensor embedding_backward(const Tensor& dy, const Tensor& ids, std::int64_t vocab);

// ---------------------------------------------------------------- selection and sorting
struct TopKResult {
  Tensor values;   // [..., k] largest first
  Tensor indices;  // [..., k] int32; among equal values the lower index comes first
};
TopKResult topk(const Tensor& x, int k);   // over the last axis; 1 <= k <= x.size(-1)
// Stable ascending argsort of int32 keys over the last axis: keys [..., n] -> int32 [..., n];
// equal keys keep their original order (what sort-by-expert needs).
Tensor argsort(const Tensor& keys);

// ---------------------------------------------------------------- shape operations (all copy)
Tensor concat(const std::vector<Tensor>& xs, int axis);   // sizes equal except along axis
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis);
Tensor narrow(const Tensor& x, int axis, std::int64_t start, std::int64_t length);
Tensor transpose(const Tensor& x, int axis0 = -2, int axis1 = -1);
Tensor permute(const Tensor& x, const std::vector<int>& order);  // out axis i = x axis order[i]

// ---------------------------------------------------------------- masking
// scores: [..., T, S] -> copy with every entry where column > row + (S - T) set to `fill`
// (decoder self-attention uses T == S: a position sees itself and the past). The backward is
// causal_mask(dy, 0).
Tensor causal_mask(const Tensor& scores, double fill);

// ---------------------------------------------------------------- causal attention (fused)
// Heads in the projections' layout, q: [B, T, H, hd], k, v: [B, S, H, hd] with S >= T (query t sees
// keys 0 .. t + S - T), scale > 0; for each sequence b and head h (q_h = q[b, :, h, :]: [T, hd]):
//   p[b, h] = softmax(causal_mask(scale * q_h @ k_h^T, -inf))   [B, H, T, S], exactly 0 above the diagonal
//   y[b, :, h, :] = p[b, h] @ v_h                              y: [B, T, H, hd]
// The function of permuting the heads out, those four ops and permuting back, computed without the
// copies and without touching the masked half (core/cpu/attention.cpp). p is kept for the backward:
//   dp = dy_h @ v_h^T, ds = scale * p * (dp - sum(dp * p)), dq_h = ds @ k_h, dk_h = ds^T @ q_h, dv_h = p^T @ dy_h.
struct AttentionResult {
  Tensor y;  // [B, T, H, hd]
  Tensor p;  // [B, H, T, S]
};
struct AttentionGrads {
  Tensor dq, dk, dv;  // q's, k's and v's shapes
};
AttentionResult causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale);
AttentionGrads causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                         const Tensor& p, const Tensor& dy);
// The same with `causal` chosen: false lets every query see every key (an encoder's bidirectional
// attention: p = softmax(scale * q_h @ k_h^T), no mask, any S >= 1); true is causal_attention.
AttentionResult attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal);
AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                  const Tensor& p, const Tensor& dy);

// ---------------------------------------------------------------- normalisation (fused)
// rmsnorm:   y = x * rstd * w,             rstd = 1 / sqrt(mean(x^2) + eps)
// layernorm: y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var(x) + eps)   (biased variance)
// x: [..., d], w, b: [d]. mean, rstd: [N] with N = numel / d, saved for the backward.
struct NormResult {
  Tensor y;
  Tensor mean;  // undefined for rmsnorm
  Tensor rstd;
};
struct NormGrads {
  Tensor dx;  // [..., d]
  Tensor dw;  // [d]
  Tensor db;  // [d]; undefined for rmsnorm
};
NormResult rmsnorm(const Tensor& x, const Tensor& w, double eps);
NormGrads rmsnorm_backward(const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dy);
NormResult layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps);
NormGrads layernorm_backward(const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                             const Tensor& dy);

// ---------------------------------------------------------------- rotary position embedding
// x: [B, T, H, hd] float, hd even -> [B, T, H, hd]. Token t sits at position p = position_offset + t;
// each pair (x[2i], x[2i+1]) of every head is rotated by the angle a = p * theta^(-2i / hd):
//   y[2i] = x[2i] cos a - x[2i+1] sin a,   y[2i+1] = x[2i] sin a + x[2i+1] cos a.
// inverse rotates by -a: the transpose of the rotation, hence also the backward (dx = rope(dy, .., !inverse)).
Tensor rope(const Tensor& x, std::int64_t position_offset, double theta, bool inverse);

// ---------------------------------------------------------------- Soft MoE mixing in token order
// (core/kernels/slot_mix.cpp) B examples of m tokens, n experts with p slots each, f features,
// feature-major (the expert or slot axis innermost):
//   w: [B, m, n, p]  dispatch or combine weights      u: [B, m, f, n]  per token, feature, expert
//   v: [B, f, n, p]  per example, feature, slot
// reduce: out[b, c, e, j] = sum_i w[b, i, e, j] * u[b, i, c, e]     -> [B, f, n, p]
// expand: out[b, i, c, e] = sum_j w[b, i, e, j] * v[b, c, e, j]     -> [B, m, f, n]
// dot:    out[b, i, e, j] = sum_c u[b, i, c, e] * v[b, c, e, j]     -> [B, m, n, p]
// Each is the other two's backward: d reduce(w, u) = (dw = dot(u, g), du = expand(w, g)),
// d expand(w, v) = (dw = dot(g, v), dv = reduce(w, g)). Sums run in index order (i, j or c
// ascending) in the tensors' dtype, so the result is the same on any thread count.
Tensor slot_mix_reduce(const Tensor& w, const Tensor& u);
Tensor slot_mix_expand(const Tensor& w, const Tensor& v);
Tensor slot_mix_dot(const Tensor& u, const Tensor& v);
// Slot order's mixing, with the slots expert-major (S = n*p slots, slot s = e*p + j):
//   w: [B, m, S]  dispatch or combine weights   x: [B, m, d]  tokens   y: [S, B, d]  slot rows
// dispatch: out[s, b, :] = sum_i w[b, i, s] * x[b, i, :]     -> [S, B, d]   (Xs = D^T X, per slot)
// combine:  out[b, i, :] = sum_s w[b, i, s] * y[s, b, :]     -> [B, m, d]   (Y = C Ys)
// dot:      out[b, i, s] = sum_c x[b, i, c] * y[s, b, c]     -> [B, m, S]
// The backwards again: d dispatch(w, x) = (dw = dot(x, g), dx = combine(w, g)), d combine(w, y)
// = (dw = dot(g, y), dy = dispatch(w, g)). [S, B, d] viewed [n, p*B, d] gives each expert its rows
// contiguously, so the experts run as one batched product without a permute. dispatch and
// combine sum in index order; dot in 8 interleaved partial sums (c mod 8) added as
// ((0+1)+(2+3))+((4+5)+(6+7)), on every device and thread count.
Tensor slot_dispatch(const Tensor& w, const Tensor& x);
Tensor slot_combine(const Tensor& w, const Tensor& y);
Tensor slot_dot(const Tensor& x, const Tensor& y);

// ---------------------------------------------------------------- optimizer updates (fused, in place)
// One pass over memory per parameter, PyTorch 1.13's single-tensor formulas evaluated in the
// tensors' dtype (core/cpu/optim.cpp spells them out). param, grad and the buffers share one
// shape, float dtype and device, and no two share storage.
struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = true;     // true: AdamW (param *= 1 - lr*wd); false: Adam (grad += wd*param)
  std::int64_t step = 1;     // this parameter's update count including this one (bias correction)
};
// m = beta1*m + (1-beta1)*g;  v = beta2*v + (1-beta2)*g*g;
// param -= lr/(1-beta1^step) * m / (sqrt(v)/sqrt(1-beta2^step) + eps).
void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, const AdamHyper& h);
struct SgdHyper {
  double lr = 1e-2, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  bool first_step = false;   // momentum buffer is created now: buf = d instead of buf = mu*buf + (1-damp)*d
};
// d = g + wd*param; buf = mu*buf + (1-dampening)*d; d = nesterov ? d + mu*buf : buf; param -= lr*d.
// momentum_buffer is unused (may be undefined) when momentum == 0.
void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buffer, const SgdHyper& h);

}  // namespace moelab::kernels
