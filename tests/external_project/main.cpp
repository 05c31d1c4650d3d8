// tests/external_project/main.cpp — a user's own program on the installed engine: a MoE layer's
// forward and backward, and one optimizer step. Prints "ok" and the loss; exit 1 if the router
// got no gradient.
#include <cstdio>

#include "autograd/ops.h"
#include "core/factories.h"
#include "nn/moe/moe_layer.h"
#include "nn/optim/adam.h"

int main() {
  using namespace moelab;
  Generator gen(0);
  MoELayer moe(MoEConfig{.d = 16, .experts = 4, .k = 2}, gen);
  Adam opt(moe.parameters(), AdamOptions{.lr = 1e-3});
  const Variable x(normal({2, 8, 16}, 0.0, 1.0, gen));
  AuxLosses aux;
  const Variable y = moe.forward_with_aux(x, aux);
  const Variable loss = aux.added_to(mean(y * y));
  loss.backward();
  const Tensor g = moe.router().parameters().front().grad();
  double norm = 0;
  for (float v : g.to_vector<float>()) norm += double(v) * v;
  opt.step();
  std::printf("ok: loss %.6f, router gradient norm^2 %.3g\n", loss.data().item<float>(), norm);
  return norm > 0 ? 0 : 1;
}
