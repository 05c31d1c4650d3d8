// nn/optim/optimizer.cpp — what every optimizer shares: validated parameter groups, zero_grad,
// learning-rate factors and the flat parameter order that names checkpoint state.
//
// The constructor checks the groups once, as PyTorch's Optimizer.add_param_group does:
//   - there is at least one parameter in all the groups together;
//   - every parameter is a defined float32/float64 Variable;
//   - no parameter appears twice, within a group or across groups (it would be updated twice);
//   - lr and weight_decay are finite and >= 0; base_lr < 0 means "copy lr", otherwise it is finite.
#include "nn/optim/optimizer.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "nn/optim/step_hooks.h"

namespace moelab {
namespace {

// Two handles are one parameter when they share the autograd node (leaves that need a gradient)
// or, for parameters without one, point at the same first element.
bool same_parameter(const Variable& a, const Variable& b) {
  if (a.node() || b.node()) return a.node() == b.node();
  return a.numel() > 0 && b.numel() > 0 && a.data().raw() == b.data().raw();
}

}  // namespace

Optimizer::Optimizer(std::vector<ParamGroup> groups) : groups_(std::move(groups)) {
  const char* op = "Optimizer";
  std::vector<Variable> seen;
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    ParamGroup& g = groups_[gi];
    MOELAB_CHECK(std::isfinite(g.lr) && g.lr >= 0, op, "group ", gi, ": lr must be finite and >= 0, got ", g.lr);
    MOELAB_CHECK(std::isfinite(g.weight_decay) && g.weight_decay >= 0, op, "group ", gi,
                 ": weight_decay must be finite and >= 0, got ", g.weight_decay);
    MOELAB_CHECK(std::isfinite(g.base_lr), op, "group ", gi, ": base_lr must be finite, got ", g.base_lr);
    if (g.base_lr < 0) g.base_lr = g.lr;
    for (std::size_t pi = 0; pi < g.params.size(); ++pi) {
      const Variable& p = g.params[pi];
      const std::string what = "group " + std::to_string(gi) + " param " + std::to_string(pi);
      check_floating(p.data(), op, what.c_str());
      for (std::size_t s = 0; s < seen.size(); ++s)
        MOELAB_CHECK(!same_parameter(seen[s], p), op, what, " ", p.data().str(),
                     " is the same parameter as flat param ", s, "; a parameter may appear only once");
      seen.push_back(p);
    }
  }
  MOELAB_CHECK(!seen.empty(), op, "got no parameters (", groups_.size(), " groups, all empty)");
}

void Optimizer::zero_grad() {
  for (ParamGroup& g : groups_)
    for (Variable& p : g.params) p.zero_grad();
}

void Optimizer::set_lr_factor(double factor) {
  MOELAB_CHECK(std::isfinite(factor) && factor >= 0, "Optimizer::set_lr_factor", "factor must be finite and >= 0, got ",
               factor);
  for (ParamGroup& g : groups_) g.lr = g.base_lr * factor;
}

std::vector<Variable> Optimizer::flat_params() const {
  std::vector<Variable> out;
  for (const ParamGroup& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

void Optimizer::step() {
  update();
  run_step_hooks(flat_params());
}

}  // namespace moelab
