// tasks/routers/routing_replay.cpp — see routing_replay.h.
#include "tasks/routers/routing_replay.h"

#include "core/safe_file.h"
#include "nn/moe/moe_layer.h"
#include "runner/json_file.h"

namespace moelab {

void add_routing_replay_settings(Settings& s) {
  s.add_flag("record_routing", false,
             "write every point's training routing (each MoE layer's selected experts, every step) to "
             "routing/<point>.tape.gz for a later replay_from (nn/moe/routing_tape.h; 4 T k bytes a layer and step "
             "before gzip)");
  s.add_text("replay_from", "",
             "RUN/POINT: every point replays the training routing that point of an earlier `moelab routers` run "
             "recorded (record_routing=true): the recorded experts each step, the gates from this run's weights; this "
             "run's points must have that point's task and seed (tasks/routers/routing_replay.h)",
             {}, /*may_be_empty=*/true);
  // Recording writes one more file; it changes no result.
  s.may_change_on_resume({"record_routing"});
}

std::string routing_tape_file(const std::string& point) { return "routing/" + point + ".tape.gz"; }

namespace {

[[noreturn]] void refuse(const std::string& why) { throw UsageError("replay_from: " + why); }

// The steps a point of `task` trains, when the settings say it without building the data (a
// phone-book trained for epochs depends on its book: checked when the tape runs out instead).
std::optional<std::int64_t> planned_steps(const RoutersTask& task, const Settings& s) {
  if (task.kind == TaskKind::ShortestPath) return s.integer("path_steps");
  if (s.integer("epochs") > 0) return std::nullopt;
  return s.integer("steps");
}

}  // namespace

std::optional<ReplaySource> checked_replay_source(const Settings& s, const std::vector<RouterScheme>& schemes,
                                                  const std::vector<RoutersTask>& tasks,
                                                  const std::vector<RoutersPoint>& points) {
  const std::string given = s.text("replay_from");
  if (given.empty()) return std::nullopt;
  std::filesystem::path named(given);
  if (!named.has_filename()) named = named.parent_path();  // "RUN/POINT/" names the same point
  ReplaySource src;
  src.point = named.filename().string();
  const std::filesystem::path run = named.parent_path().empty() ? std::filesystem::path(".") : named.parent_path();
  src.tape = run / routing_tape_file(src.point);
  const std::filesystem::path result = run / "points" / (src.point + ".json");
  if (file_kind(result.string()) != "a regular file")
    refuse("'" + given + "' names no finished point: '" + result.string() + "' is " + file_kind(result.string()) +
           " (give RUN/POINT, e.g. runs/a/topk-N800-seed0)");
  if (file_kind(src.tape.string()) != "a regular file")
    refuse("the point '" + src.point + "' has no routing tape: '" + src.tape.string() + "' is " +
           file_kind(src.tape.string()) + " (record it with --set record_routing=true)");
  nlohmann::ordered_json recorded;
  try {
    recorded = read_json_file(result, "the recorded point's result", "give another replay_from");
    src.task = recorded.at("task").get<std::string>();
    src.seed = recorded.at("seed").get<std::int64_t>();
    src.steps = recorded.at("steps").get<std::int64_t>();
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    refuse("'" + result.string() + "' is not a `moelab routers` point result (" + e.what() + ")");
  }

  for (const RoutersPoint& p : points) {
    const RoutersTask& task = tasks[p.task];
    if (task.label != src.task || p.seed != src.seed)
      refuse("the tape of '" + src.point + "' is task " + src.task + ", seed " + std::to_string(src.seed) +
             ", but this run has point " + p.name + ": replay needs the recording's batches, so set tasks, "
             "book_sizes / path_n and seeds to that point's (and keep its batch settings)");
    const std::optional<std::int64_t> steps = planned_steps(task, s);
    if (steps && *steps > src.steps)
      refuse("this run trains " + std::to_string(*steps) + " steps, the recording " + std::to_string(src.steps) +
             ": a replay can follow at most the recorded steps");
  }
  // Every scheme's router must take recorded experts: a small decoder of each tells.
  for (const RouterScheme& scheme : schemes) {
    Generator gen(0);
    const std::unique_ptr<Decoder> probe = build_scheme_decoder(scheme, task_spec(tasks.front(), s), 4, 4, gen);
    for (std::int64_t i = 0; i < probe->config().layers; ++i)
      if (const auto* moe = dynamic_cast<const MoELayer*>(&probe->layer(i).ffn()); moe && !moe->router().can_replay())
        refuse("scheme " + scheme.name + " (router " + scheme.router + ") cannot replay recorded experts: " +
               moe->router().why_no_replay());
  }
  return src;
}

}  // namespace moelab
