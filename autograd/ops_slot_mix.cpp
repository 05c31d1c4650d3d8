// autograd/ops_slot_mix.cpp — gradients of Soft MoE's token-order mixing.
//
// h = reduce(w, u): h[b, c, e, j] = sum_i w[b, i, e, j] u[b, i, c, e]. With g = dL/dh:
//   dL/du[b, i, c, e] = sum_j w[b, i, e, j] g[b, c, e, j]   = expand(w, g)
//   dL/dw[b, i, e, j] = sum_c u[b, i, c, e] g[b, c, e, j]   = dot(u, g)
// z = expand(w, v): z[b, i, c, e] = sum_j w[b, i, e, j] v[b, c, e, j]. With g = dL/dz:
//   dL/dv[b, c, e, j] = sum_i w[b, i, e, j] g[b, i, c, e]   = reduce(w, g)
//   dL/dw[b, i, e, j] = sum_c g[b, i, c, e] v[b, c, e, j]   = dot(g, v)
// Each gradient is one kernel of the trio; the inputs are kept by the graph, nothing else is saved.
#include "autograd/ops_slot_mix.h"

#include "autograd/record.h"
#include "core/kernels.h"

namespace moelab {

// w: [B, m, n, p], u: [B, m, f, n] -> [B, f, n, p]
Variable slot_mix_reduce(const Variable& w, const Variable& u) {
  return record("slot_mix_reduce", kernels::slot_mix_reduce(w.data(), u.data()), {w, u},
                [](const std::vector<Variable>& in, const Tensor& g) {
                  Tensor dw, du;
                  if (in[0].requires_grad()) dw = kernels::slot_mix_dot(in[1].data(), g);
                  if (in[1].requires_grad()) du = kernels::slot_mix_expand(in[0].data(), g);
                  return std::vector<Tensor>{dw, du};
                });
}

// w: [B, m, n, p], v: [B, f, n, p] -> [B, m, f, n]
Variable slot_mix_expand(const Variable& w, const Variable& v) {
  return record("slot_mix_expand", kernels::slot_mix_expand(w.data(), v.data()), {w, v},
                [](const std::vector<Variable>& in, const Tensor& g) {
                  Tensor dw, dv;
                  if (in[0].requires_grad()) dw = kernels::slot_mix_dot(g, in[1].data());
                  if (in[1].requires_grad()) dv = kernels::slot_mix_reduce(in[0].data(), g);
                  return std::vector<Tensor>{dw, dv};
                });
}

// xs = dispatch(w, x): xs[s, b] = sum_i w[b, i, s] x[b, i]. With g = dL/dxs:
//   dL/dx[b, i] = sum_s w[b, i, s] g[s, b] = combine(w, g);  dL/dw[b, i, s] = <x[b, i], g[s, b]> = dot(x, g)
// w: [B, m, S], x: [B, m, d] -> [S, B, d]
Variable slot_dispatch(const Variable& w, const Variable& x) {
  return record("slot_dispatch", kernels::slot_dispatch(w.data(), x.data()), {w, x},
                [](const std::vector<Variable>& in, const Tensor& g) {
                  Tensor dw, dx;
                  if (in[0].requires_grad()) dw = kernels::slot_dot(in[1].data(), g);
                  if (in[1].requires_grad()) dx = kernels::slot_combine(in[0].data(), g);
                  return std::vector<Tensor>{dw, dx};
                });
}

// y_out = combine(w, y): y_out[b, i] = sum_s w[b, i, s] y[s, b]. With g = dL/dy_out:
//   dL/dy[s, b] = sum_i w[b, i, s] g[b, i] = dispatch(w, g);  dL/dw[b, i, s] = <g[b, i], y[s, b]> = dot(g, y)
// w: [B, m, S], y: [S, B, d] -> [B, m, d]
Variable slot_combine(const Variable& w, const Variable& y) {
  return record("slot_combine", kernels::slot_combine(w.data(), y.data()), {w, y},
                [](const std::vector<Variable>& in, const Tensor& g) {
                  Tensor dw, dy;
                  if (in[0].requires_grad()) dw = kernels::slot_dot(g, in[1].data());
                  if (in[1].requires_grad()) dy = kernels::slot_dispatch(in[0].data(), g);
                  return std::vector<Tensor>{dw, dy};
                });
}

}  // namespace moelab
