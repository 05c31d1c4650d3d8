// nn/optim/step_hooks.cpp — see step_hooks.h. One registry for the process: (id, parameter node,
// hook) in registration order, behind a mutex; a StepHook owns one entry.
#include "nn/optim/step_hooks.h"

#include <mutex>
#include <unordered_set>
#include <utility>

#include "autograd/node.h"
#include "core/error.h"

namespace moelab {

namespace {

struct Entry {
  long id;
  const Node* node;
  std::function<void()> fn;
};

struct Registry {
  std::mutex mutex;
  std::vector<Entry> entries;
  long next_id = 0;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

StepHook::StepHook(const Variable& parameter, std::function<void()> fn) {
  MOELAB_CHECK(parameter.defined() && parameter.is_leaf() && parameter.requires_grad(), "StepHook",
               "a step hook attaches to a parameter (a leaf that requires a gradient)");
  MOELAB_CHECK(static_cast<bool>(fn), "StepHook", "the hook is empty");
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  id_ = r.next_id++;
  r.entries.push_back({id_, parameter.node().get(), std::move(fn)});
}

void StepHook::release() {
  if (id_ < 0) return;
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  for (auto it = r.entries.begin(); it != r.entries.end(); ++it)
    if (it->id == id_) {
      r.entries.erase(it);
      break;
    }
  id_ = -1;
}

StepHook::~StepHook() { release(); }

StepHook::StepHook(StepHook&& other) noexcept : id_(other.id_) { other.id_ = -1; }

StepHook& StepHook::operator=(StepHook&& other) noexcept {
  if (this != &other) {
    release();
    id_ = other.id_;
    other.id_ = -1;
  }
  return *this;
}

int run_step_hooks(const std::vector<Variable>& params) {
  std::unordered_set<const Node*> nodes;
  for (const Variable& p : params)
    if (p.node()) nodes.insert(p.node().get());
  std::vector<std::function<void()>> due;
  {
    Registry& r = registry();
    const std::lock_guard<std::mutex> lock(r.mutex);
    for (const Entry& e : r.entries)
      if (nodes.count(e.node)) due.push_back(e.fn);
  }
  for (const auto& fn : due) fn();  // outside the lock: a hook may register or drop hooks
  return static_cast<int>(due.size());
}

}  // namespace moelab
