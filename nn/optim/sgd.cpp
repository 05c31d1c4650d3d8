// nn/optim/sgd.cpp — SGD's step and state (the formulas are in sgd.h and core/cpu/optim.cpp).
#include "nn/optim/sgd.h"

#include <cmath>

#include "core/factories.h"
#include "core/kernels.h"
#include "nn/optim/state.h"

namespace moelab {
namespace {

const std::vector<optim_state::BufferSpec>& sgd_buffers() {
  static const std::vector<optim_state::BufferSpec> specs = {{"momentum_buffer", optim_state::BufferKind::Element}};
  return specs;
}

}  // namespace

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options) : Optimizer(std::move(groups)), options_(options) {
  const char* op = "SGD";
  MOELAB_CHECK(std::isfinite(options_.momentum) && options_.momentum >= 0, op, "momentum must be finite and >= 0, got ",
               options_.momentum);
  MOELAB_CHECK(std::isfinite(options_.dampening), op, "dampening must be finite, got ", options_.dampening);
  MOELAB_CHECK(!options_.nesterov || (options_.momentum > 0 && options_.dampening == 0), op,
               "nesterov momentum needs momentum > 0 and dampening == 0, got momentum ", options_.momentum,
               ", dampening ", options_.dampening);
  momentum_buffer_.resize(flat_params().size());
}

SGD::SGD(std::vector<Variable> params, double lr, SGDOptions options, double weight_decay)
    : SGD(std::vector<ParamGroup>{ParamGroup{std::move(params), lr, -1, weight_decay}}, options) {}

void SGD::update() {
  std::size_t i = 0;
  for (ParamGroup& g : groups_) {
    for (Variable& p : g.params) {
      const std::size_t index = i++;
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      kernels::SgdHyper h;
      h.lr = g.lr;
      h.weight_decay = g.weight_decay;
      h.momentum = options_.momentum;
      h.dampening = options_.dampening;
      h.nesterov = options_.nesterov;
      // A new buffer is kept only once the update succeeded (sgd_update checks its arguments).
      Tensor buf = momentum_buffer_[index];
      h.first_step = !buf.defined();
      if (h.momentum != 0 && h.first_step) buf = Tensor::empty(p.shape(), p.dtype(), p.device());
      kernels::sgd_update(p.data(), grad, buf, h);
      momentum_buffer_[index] = buf;
    }
  }
  ++steps_taken_;
}

std::vector<std::pair<std::string, Tensor>> SGD::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (std::size_t i = 0; i < momentum_buffer_.size(); ++i)
    if (momentum_buffer_[i].defined()) out.emplace_back("momentum_buffer." + std::to_string(i), momentum_buffer_[i].clone());
  return out;
}

void SGD::load_state_tensors(const std::vector<std::pair<std::string, Tensor>>& state) {
  MOELAB_CHECK(options_.momentum != 0 || state.empty(), "SGD::load_state_tensors",
               "SGD without momentum keeps no state, but ", state.size(), " tensors were given (the first is '",
               state.empty() ? "" : state.front().first, "')");
  optim_state::State s = optim_state::read_state("SGD::load_state_tensors", state, sgd_buffers(), flat_params());
  momentum_buffer_ = std::move(s.buffers[0]);
}

}  // namespace moelab
