// nn/module.cpp — registration and recursive walks over parameters and children.
#include "nn/module.h"

#include "core/backend.h"
#include "core/error.h"

namespace moelab {

void Module::check_new_name(const std::string& name) const {
  MOELAB_CHECK(!name.empty() && name.find('.') == std::string::npos, "Module::register",
               "a name must be non-empty and contain no '.', got '", name, "'");
  for (const auto& [n, p] : parameters_) MOELAB_CHECK(n != name, "Module::register", "'", name, "' is already a parameter");
  for (const auto& [n, c] : children_) MOELAB_CHECK(n != name, "Module::register", "'", name, "' is already a child");
  for (const auto& [n, b] : buffers_) MOELAB_CHECK(n != name, "Module::register", "'", name, "' is already a buffer");
}

Variable Module::register_parameter(const std::string& name, Tensor init) {
  check_new_name(name);
  check_defined(init, "Module::register_parameter", name.c_str());
  Variable v(std::move(init), /*requires_grad=*/true);
  parameters_.emplace_back(name, v);
  return v;
}

Tensor Module::register_buffer(const std::string& name, Tensor init, BufferPlace place) {
  check_new_name(name);
  check_defined(init, "Module::register_buffer", name.c_str());
  MOELAB_CHECK(place != BufferPlace::Host || init.device().is_cpu(), "Module::register_buffer", "host buffer '",
               name, "' must be initialised on the CPU, got ", init.device());
  buffers_.emplace_back(name, init);
  buffer_places_.push_back(place);
  return init;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_new_name(name);
  MOELAB_CHECK(child != nullptr, "Module::register_module", "child '", name, "' is null");
  children_.emplace_back(name, std::move(child));
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out) const {
  for (const auto& [name, p] : parameters_) out.emplace_back(prefix + name, p);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

void Module::collect_buffers(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out,
                             bool movable_only) const {
  for (std::size_t i = 0; i < buffers_.size(); ++i)
    if (!movable_only || buffer_places_[i] == BufferPlace::WithParameters)
      out.emplace_back(prefix + buffers_[i].first, buffers_[i].second);
  for (const auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out, movable_only);
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_buffers("", out);
  return out;
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Variable>> out;
  collect("", out);
  return out;
}

std::vector<Variable> Module::parameters() const {
  std::vector<Variable> out;
  for (auto& [name, p] : named_parameters()) out.push_back(p);
  return out;
}

Variable Module::parameter(const std::string& dotted_name) const {
  const auto all = named_parameters();
  for (const auto& [name, p] : all)
    if (name == dotted_name) return p;
  std::string names;
  for (std::size_t i = 0; i < all.size() && i < 12; ++i) names += (i ? ", " : "") + all[i].first;
  if (all.size() > 12) names += ", ...";
  fail("Module::parameter", "no parameter named '", dotted_name, "'; the module has: ", names);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  try {
    (void)backend(device);  // an unavailable device fails here, before anything moves
  } catch (const Error& e) {
    fail("Module::to", "cannot move the parameters to ", device, ": ", e.what());
  }
  // A parameter registered twice (tied weights) is found again already moved: a no-op then.
  const auto params = named_parameters();
  std::vector<Tensor> state;  // handles: moving their storage moves the parameters' and buffers'
  for (const auto& [name, p] : params) state.push_back(p.data());
  std::vector<std::pair<std::string, Tensor>> buffers;
  collect_buffers("", buffers, /*movable_only=*/true);  // host buffers stay where they are
  for (const auto& [name, b] : buffers) state.push_back(b);
  std::vector<std::pair<Tensor, Device>> moved;  // to undo a move that fails part-way (out of memory)
  try {
    for (Tensor& data : state) {
      const Device from = data.device();
      if (from == device) continue;
      data.move_storage_to(device);
      moved.emplace_back(data, from);
    }
  } catch (...) {
    for (auto& [data, from] : moved) data.move_storage_to(from);
    throw;
  }
  for (const auto& [name, p] : params) {
    Variable handle = p;
    handle.zero_grad();  // a gradient would be on the old device
  }
}

Device Module::device() const {
  const auto params = named_parameters();
  return params.empty() ? Device::cpu() : params.front().second.device();
}

void Module::zero_grad() {
  for (auto& [name, p] : named_parameters()) p.zero_grad();
}

std::int64_t Module::num_parameters() const {
  std::int64_t n = 0;
  for (const auto& [name, p] : named_parameters()) n += p.numel();
  return n;
}

}  // namespace moelab
