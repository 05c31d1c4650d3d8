// tasks/routers/routing_replay.h — `moelab routers`' record_routing and replay_from settings: a
// point's training routing written to a file, and a later run that trains with it.
//
// With `--set record_routing=true` every point records, through a RoutingTape
// (nn/moe/routing_tape.h), each MoE layer's selected experts of every training forward to
// routing/<point>.tape.gz in the run folder (finished before the point's result file, so a point
// that is done has its tape). With `--set replay_from=RUN/POINT` every point of the new run replays
// that tape: in each training step its routers select the recorded experts, their gates computed
// from the new run's weights. So one routing can be shared by several schemes' gates, or a
// scheme's own routing replayed to check it reproduces the recording bit for bit.
//
// A replay needs the recording's forwards on the recording's batches, so replay_from is checked
// before anything runs: the tape and the point's result exist in RUN (regular files, not links),
// every point of the new run has the recorded point's task and seed, the new run trains no more
// steps than the recording, and every scheme's router can replay (topk, topk-aux, topk-cap,
// aux-free, shared-top1; not top-p, whose slots vary per token, nor balanced). The batches come
// from the run seed and the task's settings, which the user keeps equal; a mismatch the settings
// do not show (another batch size) stops the point at its first step, naming the entry.
//
//   moelab routers --preset demo --set schemes=topk --set tasks=phonebook --set record_routing=true --out a
//   moelab routers --preset demo --set schemes=topk,aux-free --set tasks=phonebook
//                  --set replay_from=a/topk-N800-seed0 --out b         (one command line)
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runner/settings.h"
#include "tasks/routers/router_schemes.h"
#include "tasks/routers/routers_tasks.h"

namespace moelab {

// Declares record_routing and replay_from.
void add_routing_replay_settings(Settings& s);

// "routing/<point>.tape.gz" (relative to a run folder).
std::string routing_tape_file(const std::string& point);

// The recorded point replay_from names.
struct ReplaySource {
  std::filesystem::path tape;  // RUN/routing/POINT.tape.gz
  std::string point, task;     // the recorded point's name and task label
  std::int64_t seed = 0, steps = 0;
};

// Empty when replay_from is empty; else the source, checked against this run's grid (see above):
// UsageError naming replay_from and the cause.
std::optional<ReplaySource> checked_replay_source(const Settings& s, const std::vector<RouterScheme>& schemes,
                                                  const std::vector<RoutersTask>& tasks,
                                                  const std::vector<RoutersPoint>& points);

}  // namespace moelab
