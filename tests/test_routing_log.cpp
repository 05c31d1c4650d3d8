// tests/test_routing_log.cpp — routing analysis in the decoder experiments' logs
// (tasks/common/routing_log.h):
//   - a MoE model's point file holds MaxVio, token specialisation and load CV at every log point
//     and the drift from the second on, each in its range; a dense model writes no file
//   - training with the log is bitwise training without it (the probe is the drawn batch, its
//     forward runs without gradients in evaluation mode)
//   - the report gathers the finished points' files in the order given, skips unfinished ones,
//     and removes a stale routing.csv when no point has a file
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <set>

#include "core/factories.h"
#include "runner/job_grid.h"
#include "tasks/common/models.h"
#include "tasks/common/routing_log.h"
#include "temp_dir.h"

using namespace moelab;

namespace {

constexpr std::int64_t kVocab = 13, kSeq = 6;

TokenBatch random_batch(Generator& g) {
  std::vector<std::vector<std::int32_t>> seqs(4, std::vector<std::int32_t>(kSeq + 1));
  for (auto& s : seqs)
    for (auto& t : s) t = static_cast<std::int32_t>(g.next_u32() % kVocab);
  return make_lm_batch(seqs, 0);
}

TrainReport train(const ModelSpec& spec, RoutingLog* log, const std::string& job) {
  Generator init(3), data(4);
  std::unique_ptr<Decoder> model = build_decoder(spec, kVocab, kSeq + 1, init);
  TrainConfig tc;
  tc.steps = 30, tc.eval_every = 10, tc.lr = 1e-2;
  const BatchSource source = random_batch;
  const Evaluation evaluate = [](Decoder&, std::int64_t) { return std::map<std::string, double>{{"score", 1.0}}; };
  return log ? train_decoder(*model, tc, log->probing(source), data, log->around(evaluate, job), job)
             : train_decoder(*model, tc, source, data, evaluate, job);
}

}  // namespace

TEST_CASE("a MoE point logs MaxVio, specialisation, load CV and drift; training is unchanged by it") {
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "run");
  dir.subfolder("points");
  const ModelSpec moe{.d = 8, .layers = 2, .heads = 2, .experts = 4, .k = 2};
  RoutingLog log(dir, "moe-point");
  const TrainReport with = train(moe, &log, "moe job");
  const TrainReport without = train(moe, nullptr, "moe job");
  CHECK(with.final_loss == without.final_loss);  // bitwise: no extra draw, no state change

  const auto rows = read_csv(dir.file(point_routing_file("moe-point")));
  std::map<std::string, std::set<std::string>> steps;  // metric -> steps logged
  for (const CsvRow& r : rows) {
    CHECK(r.text("job") == "moe job");
    steps[r.text("metric")].insert(r.text("step"));
    const double v = r.real("value");
    if (r.text("metric") == "max_violation" || r.text("metric") == "load_cv") CHECK(v >= 0);
    if (r.text("metric") == "token_specialisation") CHECK((v > 0 && v <= 1));
    if (r.text("metric") == "routing_drift") CHECK((v >= 0 && v <= 1));
  }
  const std::set<std::string> all = {"10", "20", "30"}, later = {"20", "30"};
  CHECK(steps["max_violation"] == all);
  CHECK(steps["token_specialisation"] == all);
  CHECK(steps["load_cv"] == all);
  CHECK(steps["routing_drift"] == later);  // nothing to compare with at the first log point

  // A dense model writes nothing; a restarted point starts its file afresh.
  RoutingLog dense_log(dir, "dense-point");
  train(ModelSpec{.d = 8, .layers = 1, .heads = 2}, &dense_log, "dense job");
  CHECK_FALSE(std::filesystem::exists(dir.file(point_routing_file("dense-point"))));
  RoutingLog again(dir, "moe-point");
  CHECK_FALSE(std::filesystem::exists(dir.file(point_routing_file("moe-point"))));
}

TEST_CASE("the routing report gathers finished points in the order given") {
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "run");
  dir.subfolder("points");
  const ModelSpec moe{.d = 8, .layers = 1, .heads = 2, .experts = 4, .k = 2};
  for (const std::string name : {"a", "b", "c"}) {
    RoutingLog log(dir, name);
    train(moe, &log, "job " + name);
    if (name != "c") write_point(dir, name, nlohmann::json{{"point", name}});  // c never finished
  }
  CHECK(write_routing_report(dir, {"b", "a", "c"}) == 2);
  std::vector<std::string> jobs;
  for (const CsvRow& r : read_csv(dir.file("routing.csv")))
    if (jobs.empty() || jobs.back() != r.text("job")) jobs.push_back(r.text("job"));
  CHECK(jobs == std::vector<std::string>{"job b", "job a"});
  CHECK(write_routing_report(dir, {"nosuch"}) == 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("routing.csv")));  // derived: nothing to gather now
}
