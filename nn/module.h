// nn/module.h — the base class of every layer and model: named parameters and children.
//
// A Module owns parameters (Variables with requires_grad) and child Modules, each registered
// under a name. named_parameters() walks them depth-first in registration order and joins names
// with dots, PyTorch style:
//
//   class Block : public Module {
//     Block() { norm = register_module("attn_norm", std::make_shared<RMSNorm>(64));
//               w = register_parameter("weight", zeros({64})); }
//   };
//   // a Decoder registering Blocks as "layers.0", "layers.1": names "layers.0.attn_norm.weight", ...
//
// That one stable order of dotted names is what checkpoints, optimizers, the PyTorch reference
// fixtures and tests all use.
//
// Buffers (PyTorch's name) are state that is not trained by gradient but belongs to the model:
// register_buffer("expert_bias", zeros({E})) returns a Tensor handle sharing the buffer's storage,
// which the module updates in place (kernels::copy). named_buffers() walks them like parameters;
// to(device) moves them; checkpoints save and restore them beside the parameters
// (nn/io/checkpoint.h), so a resumed run continues bitwise. Optimizers never see them. A buffer
// registered with BufferPlace::Host stays on the CPU whatever to(device) does: small state that
// host code reads every step, such as a random stream's key and counter (nn/random_stream.h),
// which would otherwise cost a device-to-host copy per read. Modules are held by std::shared_ptr
// (children are shared with whoever built them); parameters are Variable handles, so a copy of one sees updates made
// through any other (optimizers write into Variable::data() in place).
//
// Devices. Modules are built on the CPU; to(device) then moves every parameter there in place:
//
//   auto model = std::make_unique<Decoder>(config, gen);   // parameters on the CPU
//   model->to(Device::cuda());                              // now on the GPU; build the optimizer after
//
// "In place" means the parameter's Storage moves (core/storage.h), not the handle: layers keep
// their own copies of their parameters' handles (Linear::weight_, ...) and all of them see the
// new device. Parameters are all there is to move: the only other tensors modules keep are the
// last forward's diagnostics (MoELayer's tokens per expert, SoftMoE's last expert mask), remade by
// every forward, and buffers, which move with the parameters (host buffers excepted); caches such
// as nn/kv_cache.h are made per call on the inputs' device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace moelab {

// Where a buffer lives: with the parameters (moved by Module::to), or always on the host.
enum class BufferPlace { WithParameters, Host };

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter of this module and its children, depth-first in registration order.
  std::vector<std::pair<std::string, Variable>> named_parameters() const;
  std::vector<Variable> parameters() const;
  // The parameter with this dotted name; throws moelab::Error listing close names if absent.
  Variable parameter(const std::string& dotted_name) const;
  // Every buffer of this module and its children, depth-first in registration order.
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // Direct children in registration order.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

  // Training mode (the default) or evaluation mode, recursively. Layers that behave differently
  // (router noise, dropout) read is_training().
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves every parameter and buffer (recursively; not host buffers) to `device`, in place, and
  // drops the parameters' gradients. A
  // no-op for parameters already there. Call it before building an optimizer: an optimizer's
  // state (Adam's moments) is made on the parameters' device at its first step and is not moved.
  // Throws moelab::Error naming the device when it is unavailable (no CUDA in this build, no GPU),
  // with every parameter left where it was.
  void to(Device device);
  // Where the parameters live: the first parameter's device (the CPU for a module without any).
  Device device() const;

  // Drops every parameter's accumulated gradient.
  void zero_grad();
  // Number of scalar parameters (all of them).
  std::int64_t num_parameters() const;

 protected:
  // Registers a trainable parameter initialised to `init`; returns its handle.
  Variable register_parameter(const std::string& name, Tensor init);
  // Registers a non-trainable buffer initialised to `init`; returns a handle sharing its storage.
  // A Host buffer must be initialised on the CPU (moelab::Error otherwise) and stays there.
  Tensor register_buffer(const std::string& name, Tensor init, BufferPlace place = BufferPlace::WithParameters);
  // Registers a child module; returns it (typed) for the caller to keep.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    add_child(name, child);
    return child;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> child);
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const;
  void collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out,
                       bool movable_only = false) const;

  std::vector<std::pair<std::string, Variable>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<BufferPlace> buffer_places_;  // [buffers_.size()]
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Evaluation mode for a scope: the module's mode is set to evaluation now and restored to what it
// was when the guard goes away, also when an exception leaves the scope.
//   { EvalModeGuard eval(model); NoGradGuard no_grad; ... generate ... }  // model back in its mode
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& module) : module_(module), was_training_(module.is_training()) { module_.eval(); }
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace moelab
