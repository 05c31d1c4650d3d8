// tasks/routers/routers_tasks.cpp — see routers_tasks.h.
#include "tasks/routers/routers_tasks.h"

#include <algorithm>
#include <memory>
#include <sstream>

#include "tasks/common/epoch_sampler.h"
#include "runner/job_grid.h"
#include "tasks/phonebook/phonebook_data.h"

namespace moelab {

namespace {

std::string joined_kinds() {
  std::string all;
  for (const std::string& n : task_kind_names()) all += (all.empty() ? "" : ", ") + n;
  return all;
}

}  // namespace

std::vector<std::string> task_kind_names() { return {"phonebook", "shortest-path"}; }

std::vector<TaskKind> parse_task_list(const std::string& text) {
  if (text.empty() || text.back() == ',')
    throw UsageError("tasks: an empty name in '" + text + "' (the tasks: " + joined_kinds() + ")");
  std::vector<TaskKind> out;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    TaskKind kind;
    if (name == "phonebook") {
      kind = TaskKind::PhoneBook;
    } else if (name == "shortest-path") {
      kind = TaskKind::ShortestPath;
    } else {
      throw UsageError("tasks: no task '" + name + "' (the tasks: " + joined_kinds() + ")");
    }
    if (std::find(out.begin(), out.end(), kind) != out.end()) throw UsageError("tasks: '" + name + "' is listed twice");
    out.push_back(kind);
  }
  return out;
}

std::vector<RoutersTask> routers_tasks(const Settings& s) {
  const std::vector<TaskKind> kinds = parse_task_list(s.text("tasks"));
  std::vector<RoutersTask> out;
  if (std::find(kinds.begin(), kinds.end(), TaskKind::PhoneBook) != kinds.end())
    for (std::int64_t n : s.ints("book_sizes"))
      out.push_back({TaskKind::PhoneBook, n, "N" + std::to_string(n), "Book of " + std::to_string(n) + " entries",
                     "digit_accuracy"});
  if (std::find(kinds.begin(), kinds.end(), TaskKind::ShortestPath) != kinds.end())
    for (std::int64_t n : s.ints("path_n"))
      out.push_back({TaskKind::ShortestPath, n, "path-n" + std::to_string(n),
                     "Shortest path, " + std::to_string(n) + "-vertex graphs", "valid_shortest"});
  return out;
}

ModelSpec task_spec(const RoutersTask& task, const Settings& s) {
  ModelSpec spec;
  spec.d = s.integer(task.kind == TaskKind::PhoneBook ? "d" : "path_d");
  spec.layers = s.integer("layers"), spec.heads = s.integer("heads");
  spec.experts = s.integer("experts"), spec.k = 2;
  return spec;
}

std::vector<RoutersPoint> routers_grid(const std::vector<RouterScheme>& schemes, const std::vector<RoutersTask>& tasks,
                                       const std::vector<std::int64_t>& seeds) {
  std::vector<RoutersPoint> out;
  for (std::size_t t = 0; t < tasks.size(); ++t)
    for (std::size_t r = 0; r < schemes.size(); ++r)
      for (std::int64_t seed : seeds)
        out.push_back({r, t, seed, schemes[r].name + "-" + tasks[t].label + "-seed" + std::to_string(seed)});
  return out;
}

TaskTraining task_training(const RoutersTask& task, const Settings& s, std::uint64_t run_seed, std::int64_t seed,
                           std::map<std::int64_t, shortest_path::RunGraphs>& graphs) {
  const std::uint64_t rs = replicate_seed(run_seed, seed);
  TaskTraining t;
  t.base = task_spec(task, s);
  t.train.weight_decay = s.real("weight_decay"), t.train.warmup_fraction = s.real("warmup_fraction");
  t.train.clip = s.real("clip");
  t.init_seed = rs * 7919;
  if (task.kind == TaskKind::PhoneBook) {
    // The book, the test names and the batches as `moelab phonebook` draws them for this seed and size.
    const std::int64_t size = task.size;
    Generator book_gen(rs * 1000003 + static_cast<std::uint64_t>(size));
    auto book = std::make_shared<const std::vector<phonebook::Entry>>(phonebook::make_book(size, book_gen));
    auto tested = std::make_shared<const std::vector<std::int64_t>>(
        phonebook::test_indices(size, s.integer("test_names"), book_gen));
    auto sampler = std::make_shared<EpochSampler>(size, s.integer("batch"), parse_sampling(s.text("sampling")));
    t.vocab = phonebook::kVocab, t.max_seq = phonebook::kSequenceLength;
    t.train.steps = s.integer("epochs") > 0 ? sampler->steps_for_epochs(s.integer("epochs")) : s.integer("steps");
    t.train.lr = s.real("lr");
    t.data_seed = rs * 104729 + static_cast<std::uint64_t>(size);
    t.next_batch = [book, sampler](Generator& g) { return phonebook::training_batch(*book, sampler->next(g)); };
    t.score = [book, tested](Decoder& m) {
      const phonebook::RecallResult r = phonebook::recall(m, *book, *tested);
      return std::map<std::string, double>{{"exact_match", r.exact_match}, {"digit_accuracy", r.digit_accuracy}};
    };
    return t;
  }
  // Shortest path: the run's p and test graphs (the same in every process), fresh training graphs
  // drawn as `moelab shortest-path` draws them for training seed `seed` (its data_gen).
  const int n = static_cast<int>(task.size);
  auto it = graphs.find(task.size);
  if (it == graphs.end())
    it = graphs.emplace(task.size, shortest_path::run_graphs(n, 0, s.real("path_target_length"),
                                                             s.integer("path_test_examples"), run_seed)).first;
  const shortest_path::RunGraphs* g = &it->second;
  const std::int64_t batch = s.integer("path_batch");
  t.vocab = shortest_path::Vocab{n}.size(), t.max_seq = shortest_path::max_sequence_length(n);
  t.train.steps = s.integer("path_steps"), t.train.lr = s.real("path_lr");
  t.data_seed = rs * 104729 + 1;
  t.next_batch = [g, n, batch](Generator& gen) {
    return shortest_path::training_batch(n, g->cal.p, batch, gen, &g->test);
  };
  t.score = [g](Decoder& m) {
    const shortest_path::PathResult r = shortest_path::evaluate(m, g->test, 128);
    return std::map<std::string, double>{{"exact_match", r.exact_match}, {"valid_shortest", r.valid_shortest}};
  };
  t.facts["p"] = g->cal.p;
  t.facts["mean_path_length"] = g->cal.mean_length;
  t.facts["reached_target"] = g->cal.reached_target;
  t.facts["test_graphs"] = static_cast<std::int64_t>(g->test.examples.size());
  t.facts["one_edge_baseline"] = g->baseline;
  return t;
}

}  // namespace moelab
