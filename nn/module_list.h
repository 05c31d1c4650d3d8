// nn/module_list.h — an ordered list of child modules named "0", "1", ... (PyTorch's ModuleList).
//
// Module names may not contain dots, so "layers.3.attn.q.weight" is spelled as a child "layers"
// (a ModuleList) whose child "3" is a block:
//   layers = register_module("layers", std::make_shared<ModuleList>());
//   layers->push_back(std::make_shared<DecoderBlock>(...));    // registered as "0"
// The list keeps the typed pointers for the owner to iterate; it has no forward of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/module.h"

namespace moelab {

template <class M>
class ModuleList : public Module {
 public:
  // Registers `child` under the next index and returns it.
  std::shared_ptr<M> push_back(std::shared_ptr<M> child) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(child)));
    return items_.back();
  }
  std::int64_t size() const { return static_cast<std::int64_t>(items_.size()); }
  M& operator[](std::int64_t i) const {
    MOELAB_CHECK(i >= 0 && i < size(), "ModuleList", "index ", i, " out of range [0, ", size(), ")");
    return *items_[static_cast<std::size_t>(i)];
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

}  // namespace moelab
