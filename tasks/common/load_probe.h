// tasks/common/load_probe.h — what the routers did in a decoder's last forward: every MoE
// layer's per-expert load and its routing metrics, read back for logging.
//
// After a training step, each MoELayer (nn/moe/moe_layer.h) holds the last forward's kept
// assignments per expert (int32 [E], on the device) and a closure computing its router's metrics.
// read_load copies both to the host: it is a device read, so the routers experiment calls it only
// at its log points, in the training loop's evaluation callback, which runs outside the timed
// steps (nn/train_loop.h): the tokens per second it reports are not changed by it.
//
//   relative load of expert e in layer l   c_le / mean_e c_le      (1 = its fair share; 0 = idle)
//   load_max_over_mean, load_cv,           each layer's router metrics (nn/moe/router_toolkit.h),
//   max_violation, token_specialisation,   averaged over the layers; a metric is given only when
//   dropped_fraction, router_entropy,      every layer reports it (router_entropy needs a softmax
//   mean_slots
//                                          over the experts: aux-free's sigmoid scores have none;
//                                          mean_slots: variable-k schemes only)
//
// As logged metrics (LoadSnapshot::as_metrics): the averaged names above, and
// "load.l<layer>.e<expert>" for every relative load.
//
//   LoadSnapshot snap = read_load(model);   // after a training forward
//   snap.relative[0]                        // layer 0: E relative loads
//   snap.mean.at("load_cv")
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nn/decoder.h"

namespace moelab {

struct LoadSnapshot {
  std::vector<std::vector<double>> relative;  // [MoE layer][expert]: c_e / mean c
  std::map<std::string, double> mean;         // routing metrics averaged over the MoE layers

  std::map<std::string, double> as_metrics() const;
};

// The decoder's last forward; moelab::Error when it has no MoE layer or has not run one yet.
LoadSnapshot read_load(const Decoder& model);

// "load.l0.e3" -> {0, 3}; false for any other name.
bool parse_load_name(const std::string& name, std::int64_t& layer, std::int64_t& expert);

// Routing drift (nn/moe/routing_analysis.h) over training: the experiment routes one fixed probe
// batch (its first training batch) at every log point, in evaluation mode without gradients (no
// router state changes: no jitter, no aux-free counts), and compares each MoE layer's experts with
// the previous log point's. RoutingProbe keeps the last routing.
struct RoutingProbe {
  Tensor ids;                                         // int32 [B, S] the probe batch
  std::vector<std::vector<std::int32_t>> last;        // [MoE layer][T * k] at the previous log point
  // Routes ids; returns the mean over the MoE layers of the share of tokens whose experts changed
  // since the previous call, or -1 at the first call (nothing to compare with).
  double drift(Decoder& model);
};

// The routed expert width's parameters of the first MoE layer (one expert; 0 without MoE layers).
std::int64_t parameters_per_expert(const Decoder& model);

}  // namespace moelab
