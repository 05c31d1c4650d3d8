// tasks/routers/routers_experiment.cpp — settings, presets and the sweep of `moelab routers` (see
// the header). The report is in routers_report.cpp, the schemes in router_schemes.cpp.
#include "tasks/routers/routers_experiment.h"

#include <algorithm>
#include <map>
#include <optional>

#include "nn/moe/routing_tape.h"
#include "tasks/common/epoch_sampler.h"
#include "runner/job_grid.h"
#include "tasks/common/models.h"
#include "tasks/common/precision_setting.h"
#include "tasks/common/train.h"
#include "tasks/phonebook/phonebook_data.h"
#include "tasks/common/load_probe.h"
#include "tasks/routers/routers_report.h"
#include "tasks/routers/routers_tasks.h"
#include "tasks/routers/routing_replay.h"

namespace moelab {

namespace {

std::string all_schemes() {
  std::string all;
  for (const std::string& n : scheme_names()) all += (all.empty() ? "" : ",") + n;
  return all;
}

Settings routers_settings() {
  Settings s;
  s.add_text("schemes", all_schemes(),
             "routing schemes to compare, comma-separated (tasks/routers/router_schemes.h; expert choice is left out: "
             "not causal)");
  s.add_text("custom_schemes", "",
             "more schemes as data, to name in `schemes`: NAME:ROUTER[:KEY=VALUE]... separated by ';' (KEY k: slots "
             "per token, default 2; shared: always-active experts; others: router options), e.g. "
             "dsv3:aux-free:groups=2:topk_groups=1:scale=2.5",
             {}, /*may_be_empty=*/true);
  s.add_text("tasks", "phonebook,shortest-path",
             "tasks, comma-separated: phonebook (one task per size of book_sizes), shortest-path (one per size of "
             "path_n)");
  s.add_int("layers", 2, "decoder blocks (every task)", 1, 256);
  s.add_int("heads", 4, "attention heads (d / heads and path_d / heads must be even)", 1, 256);
  s.add_int("experts", 8, "experts per MoE layer, E, each of the task's width (shared-top1: 1 shared + E - 1 routed)",
            2, 4096);
  s.add_int("d", 64, "phone-book: model width (every expert's FFN width is d)", 2, 1 << 16);
  s.add_int_list("book_sizes", {1500, 2000}, "phone-book sizes N, one task each", 1, phonebook::kMaxBookSize);
  s.add_int("steps", 1200, "phone-book: optimizer steps per run (when epochs = 0); no early stop", 1, 1e9);
  s.add_int("epochs", 0, "phone-book: passes over the book per run instead of a step count (0: use steps)", 0, 1e6);
  s.add_int("batch", 128, "phone-book: entries per optimizer step", 1, 1 << 20);
  s.add_text("sampling", "epochs", kSamplingHelp, sampling_choices());
  s.add_real("lr", 3e-3, "phone-book: peak learning rate", 1e-9, 10);
  s.add_int("test_names", 1000, "phone-book: names of the book asked after training", 1, 1e8);
  s.add_int_list("path_n", {8}, "shortest path: vertices per graph n, one task each (moelab shortest-path's n)", 3,
                 200);
  s.add_real("path_target_length", 3.5, "shortest path: mean path length p is calibrated to (the peak when unreachable)",
             1, 100);
  s.add_int("path_d", 32, "shortest path: model width (moelab shortest-path's MoE width)", 2, 1 << 16);
  s.add_int("path_steps", 2000, "shortest path: optimizer steps per run (fresh graphs every step); no early stop", 1,
            1e9);
  s.add_int("path_batch", 64, "shortest path: graphs per optimizer step", 1, 1 << 20);
  s.add_real("path_lr", 3e-3, "shortest path: peak learning rate", 1e-9, 10);
  s.add_int("path_test_examples", 1000, "shortest path: held-out test graphs (drawn from the run seed)", 1, 1e7);
  s.add_real("weight_decay", 0.1, "AdamW weight decay on matrices", 0, 10);
  s.add_real("warmup_fraction", 0.2, "share of the steps with a linear warmup (then linear decay to 0)", 0, 1);
  s.add_real("clip", 1.0, "gradient clipping: max global norm (0: none)", 0, 1e9);
  s.add_int("log_every", 50, "read the routers' load every N steps (outside the timed steps)", 1, 1e9);
  s.add_real("load_balance", 0.01, "Switch load-balancing loss coefficient of topk-aux, topk-cap and top-p", 0, 10);
  s.add_real("capacity_factor", 1.25, "topk-cap: each expert keeps ceil(factor * T * 2 / E) assignments", 0.01, 100);
  s.add_real("aux_free_rate", 1e-3, "aux-free: the expert bias's update rate u per step", 0, 10);
  s.add_real("top_p_threshold", 0.4, "top-p: probability mass a token's experts must reach", 1e-6, 1);
  s.add_int("top_p_max_k", 0, "top-p: most experts per token (0: all E)", 0, 4096);
  s.add_int_list("seeds", {0}, "replicates of every (task, scheme): each draws its own book (or training graphs), "
                 "test names, initial weights and batches, the same for every scheme", 0, 1e9);
  add_routing_replay_settings(s);
  add_job_settings(s, "aux-free-N1500-seed0");
  add_precision_setting(s);
  // Each point depends only on its scheme, task and seed: more of them add points, they change none.
  s.may_change_on_resume({"schemes", "custom_schemes", "tasks", "book_sizes", "path_n", "seeds"});
  return s;
}

std::vector<Preset> routers_presets() {
  return {
      {"demo",
       "a quick look (151 s on one thread of a busy 2-core machine): d 32, 8 experts, a book of 800 "
       "entries (the demo top-2 model's edge in `moelab phonebook --preset demo`), 1000 steps of 64; shortest path "
       "on 8-vertex graphs, 400 steps of 64, 300 test graphs; one seed",
       {{"d", "32"}, {"book_sizes", "800"}, {"steps", "1000"}, {"batch", "64"}, {"lr", "1e-2"}, {"test_names", "300"},
        {"path_steps", "400"}, {"path_test_examples", "300"}}},
      {"cpu",
       "docs/EXPERIMENTS.md's CPU setting: 8 experts per layer; a book of 1500 entries (top-2 memorizes 92-100% in "
       "docs/results/phonebook-cpu: at its edge), d 64, 1200 steps of 128; shortest path at `moelab shortest-path "
       "--preset cpu`'s settings (8-vertex graphs, d 32, 2000 steps of 64, 1000 test graphs); seeds 0, 1, 2 (42 "
       "points: about 40 minutes on one thread, 20 as jobs two at a time)",
       {{"book_sizes", "1500"}, {"seeds", "0,1,2"}}},
      {"paper",
       "the Mixture of Parrots scales (a GPU and days; not run here): 12 layers, 8 heads, 16 experts; phone-books "
       "of 500k and 1M entries at d 256, 10 epochs of batch 32, lr 1e-3; shortest path on 50-vertex graphs at d "
       "256, 31250 steps of 32, lr 5e-4; three seeds",
       {{"layers", "12"}, {"heads", "8"}, {"d", "256"}, {"experts", "16"}, {"book_sizes", "500000,1000000"},
        {"epochs", "10"}, {"batch", "32"}, {"lr", "1e-3"}, {"path_n", "50"}, {"path_d", "256"},
        {"path_steps", "31250"}, {"path_batch", "32"}, {"path_lr", "5e-4"}, {"log_every", "2000"},
        {"seeds", "0,1,2"}}},
  };
}

SchemeSettings scheme_settings(const Settings& s) {
  return {.load_balance = s.real("load_balance"), .capacity_factor = s.real("capacity_factor"),
          .aux_free_rate = s.real("aux_free_rate"), .top_p_threshold = s.real("top_p_threshold"),
          .top_p_max_k = s.integer("top_p_max_k"), .custom = parse_custom_schemes(s.text("custom_schemes"))};
}

std::vector<RouterScheme> schemes_of(const Settings& s) {
  std::vector<RouterScheme> out;
  const SchemeSettings settings = scheme_settings(s);
  for (const std::string& name : parse_scheme_list(s.text("schemes"), settings))
    out.push_back(router_scheme(name, settings, s.integer("experts")));
  return out;
}

std::vector<RoutersPoint> points_of(const Settings& s) {
  return routers_grid(schemes_of(s), routers_tasks(s), s.ints("seeds"));
}

// Every refusal before any work (exit 2): an unknown scheme or task, a scheme the experts cannot
// hold, and every scheme's decoder at every task's width, its router built with its options.
void validate_routers(const Settings& s) {
  const std::vector<RouterScheme> schemes = schemes_of(s);
  const std::vector<RoutersTask> tasks = routers_tasks(s);
  if (tasks.empty()) throw UsageError("tasks: give at least one");
  for (const RoutersTask& t : tasks) check_schemes(schemes, task_spec(t, s));
  if (s.ints("seeds").empty()) throw UsageError("seeds: give at least one value");
  for (const char* key : {"book_sizes", "path_n"}) {
    const std::vector<std::int64_t> sizes = s.ints(key);
    for (std::size_t i = 1; i < sizes.size(); ++i)
      if (sizes[i] <= sizes[i - 1]) throw UsageError(std::string(key) + " must be strictly ascending");
  }
  std::vector<std::string> names;
  const std::vector<RoutersPoint> points = points_of(s);
  for (const RoutersPoint& p : points) names.push_back(p.name);
  validate_job_settings(s, names);
  checked_replay_source(s, schemes, tasks, points);
}

// One point: the scheme's decoder trained on its task, its load read at every log step.
void run_point(const RunContext& ctx, const RouterScheme& scheme, const RoutersTask& task, const RoutersPoint& p,
               std::map<std::int64_t, shortest_path::RunGraphs>& graphs, const std::optional<ReplaySource>& replay) {
  const Settings& s = ctx.settings;
  const std::int64_t log_every = s.integer("log_every");
  // The data and the initial weights' generator are the same for every scheme of the task.
  TaskTraining t = task_training(task, s, ctx.seed, p.seed, graphs);
  Generator init_gen(t.init_seed), data_gen(t.data_seed);
  std::unique_ptr<Decoder> model = build_scheme_decoder(scheme, t.base, t.vocab, t.max_seq, init_gen);
  model->to(ctx.device);
  const ModelSize size = model_size(*model);
  TrainConfig tc = t.train;
  tc.eval_every = log_every;
  // The routing tape (routing_replay.h): training forwards only, so the load probe's and the
  // test's forwards pass it by.
  std::shared_ptr<RoutingTape> tape;
  if (replay) {
    tape = RoutingTape::replay(replay->tape.string(), RoutingTape::Phase::Training);
  } else if (s.flag("record_routing")) {
    ctx.dir.subfolder("routing");
    tape = RoutingTape::record(ctx.dir.file(routing_tape_file(p.name)).string(), RoutingTape::Phase::Training);
  }
  if (tape) attach_routing_tape(*model, tape);

  // The loop calls the evaluation every log_every steps and after the last (never stopped early):
  // call c follows step min(c * log_every, steps). The load comes first, from the step's own
  // training forward; the task's test (its forwards replace that) only after the last step.
  std::int64_t calls = 0;
  std::map<std::string, std::pair<double, std::int64_t>> sums;  // averaged load figures over the logs
  std::map<std::string, double> last_load, score;
  CsvFile curves = ctx.dir.csv(point_curve_file(p.name), {"job", "step", "metric", "value"});
  // The routing-drift probe is the first training batch, kept as it is drawn (drawing one more
  // would move the data stream, and the phone-book's epoch sampler with it).
  RoutingProbe probe;
  const BatchSource draw = [&probe, inner = t.next_batch](Generator& g) {
    TokenBatch b = inner(g);
    if (!probe.ids.defined()) probe.ids = b.inputs;
    return b;
  };
  const TrainReport report = train_decoder(
      *model, tc, draw, data_gen,
      [&](Decoder& m, std::int64_t) {
        const std::int64_t step = std::min(++calls * log_every, tc.steps);
        LoadSnapshot load = read_load(m);  // the step's training forward: before the probe's
        const double drift = probe.drift(m);
        if (drift >= 0) load.mean["routing_drift"] = drift;  // from the second log point on
        last_load = load.mean;
        for (const auto& [name, value] : load.mean) sums[name].first += value, ++sums[name].second;
        std::map<std::string, double> out = load.as_metrics();
        if (step >= tc.steps) {
          score = t.score(m);
          for (const auto& [name, value] : score) out[name] = value;
        }
        return out;
      },
      scheme.name + " " + task.label + " seed " + std::to_string(p.seed), &curves);

  if (tape) tape->finish();  // before the result file: a point that is done has its tape
  nlohmann::ordered_json mean_load = nlohmann::ordered_json::object(), final_load = nlohmann::ordered_json::object();
  for (const auto& [name, sn] : sums) mean_load[name] = sn.first / static_cast<double>(sn.second);
  for (const auto& [name, value] : last_load) final_load[name] = value;
  // Active parameters at the mean slots per token (top-p's vary per token; the others' equal them).
  const double slots = mean_load.contains("mean_slots") ? mean_load["mean_slots"].get<double>()
                                                        : static_cast<double>(scheme.k);
  const double per_expert = static_cast<double>(parameters_per_expert(*model));
  nlohmann::ordered_json j;
  j["point"] = p.name;
  j["scheme"] = scheme.name;
  j["router"] = scheme.router;
  j["task"] = task.label;
  j["seed"] = p.seed;
  j["run_seed"] = ctx.seed;
  j["d"] = t.base.d;
  j["total_params"] = size.non_embedding;
  j["active_params"] = size.active;
  j["active_params_at_mean_slots"] =
      static_cast<double>(size.active) - (static_cast<double>(scheme.k) - slots) * s.integer("layers") * per_expert;
  j["steps"] = report.steps_done;
  j["exact_match"] = score.at("exact_match");
  j[task.second_metric] = score.at(task.second_metric);
  j["final_loss"] = report.final_loss;
  j["tokens_per_second"] = report.tokens_per_second;
  j["seconds"] = report.seconds;
  j["logs"] = calls;
  j["task_facts"] = t.facts;
  if (replay) j["replayed_from"] = replay->point;
  j["mean_load"] = mean_load;
  j["final_load"] = final_load;
  write_point(ctx.dir, p.name, j);  // last: its presence marks the point done
}

int run_routers(const RunContext& ctx) {
  const Settings& s = ctx.settings;
  validate_routers(s);
  const std::vector<RouterScheme> schemes = schemes_of(s);
  const std::vector<RoutersTask> tasks = routers_tasks(s);
  const std::vector<RoutersPoint> points = points_of(s);
  std::map<std::int64_t, shortest_path::RunGraphs> graphs;  // calibrated once per process, on first use
  const std::optional<ReplaySource> replay = checked_replay_source(s, schemes, tasks, points);
  JobGrid g = job_grid_for(routers_experiment());
  for (const RoutersPoint& p : points) g.points.push_back(p.name);
  g.run_point = [&](std::size_t i) {
    run_point(ctx, schemes[points[i].scheme], tasks[points[i].task], points[i], graphs, replay);
  };
  g.report = [&] { write_routers_report(ctx, schemes, tasks, points); };
  return run_job_grid(ctx, g);
}

}  // namespace

Experiment routers_experiment() {
  Experiment e;
  e.name = "routers";
  e.summary = "routing schemes side by side on phone-book memorization and shortest path: accuracy, load balance, speed";
  e.details =
      "Trains the same MoE decoder (E experts of the task's width) once per routing scheme at equal active "
      "parameters: topk (top-2, no aux loss), topk-aux (+ Switch loss), topk-cap (+ capacity, drops), aux-free "
      "(DeepSeek-V3 bias balancing), balanced (BASE-style assignment in training), top-p (dynamic k: active "
      "parameters vary per token, the report gives the mean slots), shared-top1 (1 shared + top-1 of E - 1). "
      "Expert choice is left out: its experts choose among the batch's tokens, later positions included, which a "
      "causal decoder cannot do. Tasks (`tasks`): phone-books of each size of book_sizes (width d, steps of batch; "
      "test_names names asked, exact match of the 8 digits) and shortest path on graphs of each size of path_n, "
      "trained and scored as `moelab shortest-path` does (width path_d, path_steps of path_batch, exact match on "
      "path_test_examples held-out graphs). Every log_every steps it reads each expert's load in that step's forward "
      "(outside the timed steps): max/mean, coefficient of variation, dropped fraction, router entropy. Writes "
      "results.csv, load_curves.csv, summary.md (per task: tables and verdict in numbers) and per-expert load heat "
      "maps over the steps (heat_<task>_<scheme>.png). Every (task, scheme, seed) is an independent job: --set "
      "mode=list prints one command line per missing point (docs/jobs.md), mode=point runs one, mode=report gathers "
      "them, mode=all (default) runs the missing ones in order and reports. record_routing=true writes each point's training "
      "routing to routing/<point>.tape.gz; replay_from=RUN/POINT trains every point on that recorded routing "
      "(tasks/routers/routing_replay.h).";
  e.settings = routers_settings;
  e.presets = routers_presets();
  e.default_preset = "cpu";
  e.validate = validate_routers;
  e.run = run_routers;
  return e;
}

}  // namespace moelab
