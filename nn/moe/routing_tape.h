// nn/moe/routing_tape.h — recording which experts every MoE layer chose, forward after forward, and
// replaying them in a later run.
//
// Router replay (Router::replay) forces one router's selection for one batch. A RoutingTape does it
// for a whole run: attached to a model's MoE layers (attach_routing_tape), it either
//
//   records  every forward of its phase: after layer l routes T tokens, the layer hands the tape
//            the plan's `selected` experts (int32 [T, k], the choice before any capacity drop),
//            which it appends to a file; or
//   replays  a recorded file: before layer l routes, the tape gives it the next entry, checked
//            to be for layer l, T tokens and k slots, and the layer's router selects those
//            experts (gates recomputed from the current weights, a capacity applied again).
//
// Entries come and go in forward order (layer 0, 1, ... of forward 1, then of forward 2, ...), so a
// replay must make the same forwards on the same batches as the recording: the same task, data
// seed and batch size (a run with fewer steps replays a prefix). The phase says which forwards
// count: Training (modules in training mode with gradients on: the training steps, micro-batches
// included) or Eval (modules in evaluation mode: a test pass, a rollout's scoring forward);
// the other kind pass the tape by untouched. With the same model, seed and data, a replay of a
// router's own recording trains bit for bit as the recording run did (tests/test_routing_tape.cpp).
//
// The RL use case (routing replay, as Megatron-LM's and vLLM's): the experts a model chose while
// scoring a rollout's tokens (evaluation) are replayed in the training forward over the same tokens,
// so the policy gradient flows through the routing the rollout used:
//
//   auto tape = RoutingTape::record("rollout.tape.gz", RoutingTape::Phase::Eval);
//   attach_routing_tape(model, tape); model.eval(); model.forward(tokens); tape->finish();
//   attach_routing_tape(model, RoutingTape::replay("rollout.tape.gz", RoutingTape::Phase::Training));
//   model.train(); loss = ...model.forward(tokens)...;    // the rollout's experts, current gates
//
// The file is gzip (zlib) of: the line "moelab routing tape 1\n", then per entry the little-endian
// int32 layer, int32 k, int64 T and T*k int32 expert ids, row-major. A recording is written to a
// temporary name in the same folder (created with O_EXCL | O_NOFOLLOW: core/safe_file.h) and
// renamed over the path by finish(), so a crash leaves no half file under the real name, and a
// link at the path is replaced, never written through. Recording reads each layer's ids back to
// the host (a GPU waits once per layer and forward): it is for runs that ask for it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/tensor.h"

namespace moelab {

class Decoder;

class RoutingTape {
 public:
  enum class Phase { Training, Eval };

  // A tape that records the forwards of `phase` into `path` (its folder must exist). Error naming
  // the path when the temporary file cannot be created.
  static std::shared_ptr<RoutingTape> record(const std::string& path, Phase phase);
  // A tape that replays `path`, recorded earlier. Error naming the path when it is missing, a link,
  // not a regular file, or not a routing tape.
  static std::shared_ptr<RoutingTape> replay(const std::string& path, Phase phase);

  ~RoutingTape();
  RoutingTape(const RoutingTape&) = delete;
  RoutingTape& operator=(const RoutingTape&) = delete;

  bool recording() const { return recording_; }
  Phase phase() const { return phase_; }
  const std::string& path() const { return path_; }
  // Entries recorded or replayed so far.
  std::int64_t entries() const { return entries_; }

  // Whether a forward of a module in training mode (`training`) with gradients on or off
  // (`grad`) belongs to the phase.
  bool sees(bool training, bool grad) const;

  // Recording: appends layer `layer`'s experts of this forward (int32 [T, k], any device).
  void append(std::int64_t layer, const Tensor& experts);
  // Replaying: the next entry as int32 [T, k] on `device`; Error naming the file and the entry when
  // it is for another layer, T or k, or when the tape has no more entries.
  Tensor next(std::int64_t layer, std::int64_t T, std::int64_t k, Device device);

  // Recording: writes the end of the gzip stream and renames the file to its path (Error naming it
  // when the disk is full or the rename fails). Replaying: closes the file. Idempotent. A recording
  // tape destroyed without finish() removes its temporary file.
  void finish();

 private:
  RoutingTape(std::string path, Phase phase, bool recording);
  std::string path_, temp_path_;
  Phase phase_;
  bool recording_;
  void* file_ = nullptr;  // zlib's gzFile
  std::int64_t entries_ = 0;
};

// Attaches `tape` to every MoE layer of `model` (block order gives the layer numbers 0, 1, ...;
// blocks whose FFN is not a MoELayer are skipped); a null tape detaches. Error when the model has
// no MoE layer, or, for a replaying tape, when a layer's router cannot replay (Router::can_replay:
// naming the layer, the scheme and why).
void attach_routing_tape(Decoder& model, const std::shared_ptr<RoutingTape>& tape);

}  // namespace moelab
