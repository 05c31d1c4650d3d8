// tasks/routers/routers_tasks.h — the tasks `moelab routers` compares the routing schemes on, and
// its grid of (task, scheme, seed) points.
//
// Two tasks of the Mixture of Parrots paper, one that stores answers in the experts and one that
// asks for reasoning, each trained as its own experiment trains it (its data generator and its
// evaluation are called, not copied):
//
//   phone-book, one task point per size N of `book_sizes` (label "N1500"): the book, the test names
//     and the batches drawn as `moelab phonebook` draws them for the same seed and size
//     (tasks/phonebook/phonebook_data.h; a fresh shuffle of the book every epoch); decoder width
//     `d`, `steps` (or `epochs`) steps of `batch` entries, lr `lr`. Metric: exact match of all 8
//     digits on `test_names` names of the book (and the digit accuracy).
//   shortest path, one task point per graph size n of `path_n` (label "path-n8"): p calibrated to
//     `path_target_length` and the `path_test_examples` held-out graphs drawn from the run seed as
//     `moelab shortest-path` draws them (shortest_path::run_graphs: the same p and test graphs),
//     fresh training graphs every step (test graphs excluded), loss on the answer only
//     (tasks/shortest_path/graph_data.h); its own width `path_d` (the shortest-path experiment's MoE
//     width: 32 in its cpu preset), `path_steps` steps of `path_batch` graphs, lr `path_lr`. Metric:
//     exact match with the smallest shortest path, greedy decoding, as `moelab shortest-path`
//     reports it (and the share of answers that are some shortest path, valid_shortest).
//
// Shared by both: layers, heads, E = `experts` experts of the task's width, the scheme knobs, the
// AdamW settings (weight_decay, warmup_fraction, clip) and log_every. Within a task every scheme
// gets the same data and the same initial weights' seed.
//
// The grid: tasks (the books in order, then the graph sizes) x schemes x seeds (inner), each point
// named "<scheme>-<task label>-seed<t>" (aux-free-N1500-seed0, shared-top1-path-n8-seed1).
//
//   std::vector<RoutersTask> tasks = routers_tasks(settings);
//   std::map<std::int64_t, shortest_path::RunGraphs> graphs;   // the graphs of a process, by n
//   TaskTraining t = task_training(tasks[0], settings, ctx.seed, 1, graphs);
//   ... train build_scheme_decoder(scheme, t.base, t.vocab, t.max_seq, ...) on t.next_batch ...
//   std::map<std::string, double> score = t.score(model);        // exact_match and the second metric
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tasks/common/models.h"
#include "runner/settings.h"
#include "tasks/common/train.h"
#include "tasks/routers/router_schemes.h"
#include "tasks/shortest_path/graph_data.h"

namespace moelab {

enum class TaskKind { PhoneBook, ShortestPath };

struct RoutersTask {
  TaskKind kind = TaskKind::PhoneBook;
  std::int64_t size = 0;      // book entries, or graph vertices n
  std::string label;          // "N1500", "path-n8": in point and file names
  std::string title;          // "Book of 1500 entries", "Shortest path, 8-vertex graphs"
  std::string second_metric;  // "digit_accuracy" or "valid_shortest"
};

// The task names of the `tasks` setting.
std::vector<std::string> task_kind_names();  // {"phonebook", "shortest-path"}
// "phonebook,shortest-path" -> the kinds; UsageError for an unknown or empty name or a repeat.
std::vector<TaskKind> parse_task_list(const std::string& text);

// The task points of the settings, in grid order (books, then graph sizes).
std::vector<RoutersTask> routers_tasks(const Settings& s);

// The decoder of a task before the scheme is applied (width, layers, heads, E; k = 2).
ModelSpec task_spec(const RoutersTask& task, const Settings& s);

struct RoutersPoint {
  std::size_t scheme = 0;  // index into the schemes
  std::size_t task = 0;    // index into the tasks
  std::int64_t seed = 0;
  std::string name;  // "aux-free-N1500-seed0"
};

// Tasks (outer) x schemes x seeds (inner).
std::vector<RoutersPoint> routers_grid(const std::vector<RouterScheme>& schemes, const std::vector<RoutersTask>& tasks,
                                       const std::vector<std::int64_t>& seeds);

// Everything one point of a task trains with, for replicate `seed` of run seed `run_seed`.
struct TaskTraining {
  ModelSpec base;  // task_spec
  std::int64_t vocab = 0, max_seq = 0;
  TrainConfig train;  // steps, lr, weight decay, warmup, clip (eval_every: the caller's)
  std::uint64_t init_seed = 0, data_seed = 0;
  BatchSource next_batch;
  // After the last step: "exact_match" and the task's second metric.
  std::function<std::map<std::string, double>(Decoder&)> score;
  // What the report quotes about the task's data (shortest path: p, its mean path length, the
  // test graphs, the one-edge baseline); empty for the phone-book.
  nlohmann::ordered_json facts = nlohmann::ordered_json::object();
};

// `graphs` caches the shortest-path graphs of this process by n (calibrated on first use).
TaskTraining task_training(const RoutersTask& task, const Settings& s, std::uint64_t run_seed, std::int64_t seed,
                           std::map<std::int64_t, shortest_path::RunGraphs>& graphs);

}  // namespace moelab
