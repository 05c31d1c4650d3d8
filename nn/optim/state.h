// nn/optim/state.h — naming, checking and restoring an optimizer's per-parameter buffers.
//
// Optimizers save their state as named tensors "<buffer>.<i>" (nn/optim/optimizer.h), i being
// the parameter's index in flat order. Two kinds of buffer exist:
//   Element  one value per parameter element: the parameter's shape and dtype (exp_avg,
//            exp_avg_sq, momentum_buffer);
//   Counter  a per-parameter count kept as a 0-d float64 tensor ([] shape; Adam's "step", as
//            PyTorch keeps state['step'] per parameter), a whole number >= 1.
// A parameter either has all of its optimizer's buffers (it has been updated) or none (never
// updated yet: it has had no gradient so far).
//
// read_state() checks a list of named tensors against that layout and gathers every problem
// into one moelab::Error: a name that is not "<buffer>.<i>", an unknown buffer, an index past the
// last parameter, a name given twice, a parameter with some buffers but not all, a wrong shape or
// dtype, a counter that is not a whole number >= 1. It never changes anything on failure.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace moelab::optim_state {

enum class BufferKind { Element, Counter };

struct BufferSpec {
  std::string name;
  BufferKind kind = BufferKind::Element;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// buffers[b][i]: buffer b of flat parameter i, copied onto that parameter's device (new storage,
// never shared with the caller's tensors); undefined where the parameter has no state.
struct State {
  std::vector<std::vector<Tensor>> buffers;
};

// Checks `state` against `specs` and `params` (see above); `op` starts every error message.
State read_state(const char* op, const NamedTensors& state, const std::vector<BufferSpec>& specs,
                 const std::vector<Variable>& params);

// A 0-d float64 counter tensor holding `value`, and the value of one (checked by read_state).
Tensor counter_tensor(std::int64_t value);
std::int64_t counter_value(const Tensor& counter);

}  // namespace moelab::optim_state
