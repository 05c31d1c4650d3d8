// tests/test_train_resume.cpp — a run stopped after a checkpoint and started again goes on from
// it bitwise as it would have gone on (tasks/common/train.h's TrainResume, as `moelab pretrain`'s
// points use it): the same results, curves and routing rows as a run never stopped, with the
// checkpoint gone once the point is done. A stop is simulated right after a checkpoint is written
// (simulate_stop_after_checkpoints), as a job killed there would stop, and a point is stopped at
// each of its checkpoints in turn, so a resumed run is resumed again too. The parts each checkpoint
// carries are checked on their own below: a sampler's and a data stream's state, a CSV's copy.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "runner/checked_file.h"
#include "runner/job_grid.h"
#include "runner/run_dir.h"
#include "runner/run_start.h"
#include "tasks/common/epoch_sampler.h"
#include "tasks/common/train.h"
#include "tasks/pretrain/corpus.h"
#include "tasks/pretrain/pretrain_experiment.h"
#include "temp_dir.h"

using namespace moelab;

namespace {

const Experiment& experiment() {
  static const Experiment e = pretrain_experiment();
  return e;
}

// A dense and a 4-expert MoE model of width 16 on 6 people, word tokens, one seed; 150 steps with
// every measurement every 70: checkpoints at steps 70 and 140 of each point (140 within the last
// 10% of the steps, whose losses final_loss averages: the restored losses count). No equation is
// held out, so math_unseen is NaN in every saved evaluation (a number JSON cannot hold).
Settings toy() {
  Settings s = experiment().settings();
  for (const char* kv : {"people=6", "bios_per_person=2", "qa_test_questions=6", "qa_train_eval_questions=6",
                         "math_train_problems=20", "min_ops=1", "max_ops=2", "math_test_problems=4",
                         "math_train_eval_problems=4", "math_unseen_test_problems=4", "validation_documents=6",
                         "dense_widths=16", "moe_widths=16", "experts=4", "seq=64", "steps=150", "batch=8", "lr=1e-2",
                         "seeds=0", "perplexity_every=70", "eval_every=70", "math_max_operand=9", "math_max_value=99",
                         "math_unseen_share=0", "math_unseen_test_problems=0"})
    s.set_assignment(kv);
  return s;
}

// A CSV's rows without the columns or rows that are timings (they differ between any two runs).
std::vector<CsvRow> without_timings(std::vector<CsvRow> rows) {
  std::vector<CsvRow> kept;
  for (CsvRow& r : rows) {
    if (r.count("metric") && r.at("metric") == "tokens_per_second") continue;
    r.erase("seconds");
    r.file.clear(), r.line = 0;
    kept.push_back(r);
  }
  return kept;
}

}  // namespace

TEST_CASE("pretrain: points stopped after each checkpoint and run again end bitwise as a run never stopped") {
  set_num_threads(1);
  const Experiment& e = experiment();
  const Settings s = toy();
  testing::TempDir tmp;
  const RunDir whole(tmp.path() / "whole"), stopped(tmp.path() / "stopped");
  begin_run(whole, run_config(e.name, "test", 0, 1, "cpu", "moelab pretrain", s), s);
  REQUIRE(e.run(RunContext{s, whole, "test", 0, 1, Device::cpu()}) == 0);

  begin_run(stopped, run_config(e.name, "test", 0, 1, "cpu", "moelab pretrain", s), s);
  int stops = 0;
  for (int attempt = 0; attempt < 10; ++attempt) {
    simulate_stop_after_checkpoints(1);
    try {
      if (e.run(RunContext{s, stopped, "test", 0, 1, Device::cpu()}) == 0) break;
    } catch (const Error& err) {
      CHECK(std::string(err.what()).find("stopped after a checkpoint") != std::string::npos);
      ++stops;
      // The stopped point left its checkpoint and no result.
      bool some_checkpoint = false;
      for (const char* point : {"dense-d16-p6-seed0", "moe-d16-4e-p6-seed0"})
        some_checkpoint = some_checkpoint || std::filesystem::exists(stopped.file(point_resume_file(point)));
      CHECK(some_checkpoint);
    }
  }
  simulate_stop_after_checkpoints(-1);
  CHECK(stops == 4);  // two checkpoints in each of the two points
  for (const char* point : {"dense-d16-p6-seed0", "moe-d16-4e-p6-seed0"}) {
    INFO(point);
    CHECK(point_done(stopped, point));
    CHECK(!std::filesystem::exists(stopped.file(point_resume_file(point))));  // removed when done
  }
  for (const char* file : {"results.csv", "metrics.csv", "routing.csv"}) {
    INFO(file);
    const auto a = without_timings(read_csv(whole.file(file))), b = without_timings(read_csv(stopped.file(file)));
    CHECK(!a.empty());
    CHECK(a == b);
  }
  // A checkpoint that is not the point's (the dense point's, under the MoE point's name) is refused
  // with what to do about it.
  const RunDir wrong(tmp.path() / "wrong");
  begin_run(wrong, run_config(e.name, "test", 0, 1, "cpu", "moelab pretrain", s), s);
  simulate_stop_after_checkpoints(1);
  CHECK_THROWS_WITH_AS(e.run(RunContext{s, wrong, "test", 0, 1, Device::cpu()}),
                       doctest::Contains("stopped after a checkpoint"), Error);
  simulate_stop_after_checkpoints(-1);
  std::filesystem::rename(wrong.file(point_resume_file("dense-d16-p6-seed0")),
                          wrong.file(point_resume_file("moe-d16-4e-p6-seed0")));
  CHECK_THROWS_WITH_AS(e.run(RunContext{s, wrong, "test", 0, 1, Device::cpu()}),
                       doctest::Contains("to start the job from its first step"), Error);
  CHECK(!point_done(wrong, "moe-d16-4e-p6-seed0"));
  // The resumed MoE point's routing rows span the whole run (its drift compares with the rows
  // before the stop), and its curves hold every evaluation once.
  std::int64_t perplexities = 0;
  for (const CsvRow& r : read_csv(stopped.file("metrics.csv")))
    if (r.text("job") == "moe-d16-4e-p6-seed0" && r.text("metric") == "perplexity") ++perplexities;
  CHECK(perplexities == 3);
}

TEST_CASE("resume_number: every double back with its bits, NaN and the infinities included") {
  const std::map<std::string, double> values = {{"a", 0.1},
                                                {"b", -0.0},
                                                {"c", 5e-324},
                                                {"d", 1.7976931348623157e308},
                                                {"nan", std::numeric_limits<double>::quiet_NaN()},
                                                {"inf", std::numeric_limits<double>::infinity()},
                                                {"-inf", -std::numeric_limits<double>::infinity()}};
  const auto back = resume_numbers_from(nlohmann::json::parse(resume_numbers(values).dump()));
  REQUIRE(back.size() == values.size());
  for (const auto& [name, value] : values) {
    INFO(name);
    CHECK(std::bit_cast<std::uint64_t>(back.at(name)) == std::bit_cast<std::uint64_t>(value));
  }
  CHECK_THROWS_AS(resume_number(nlohmann::json("one")), Error);
  CHECK_THROWS(resume_number(nlohmann::json(nullptr)));
}

TEST_CASE("EpochSampler: a restored state hands out what the sampler would have") {
  EpochSampler a(7, 3, Sampling::Epochs);
  Generator ga(5);
  for (int i = 0; i < 4; ++i) a.next(ga);  // into the second epoch
  EpochSampler b(7, 3, Sampling::Epochs);
  b.restore(a.state());
  Generator gb(ga.seed());
  gb.set_state(ga.seed(), ga.counter());
  for (int i = 0; i < 9; ++i) CHECK(a.next(ga) == b.next(gb));
  CHECK(a.epochs_started() == b.epochs_started());
  EpochSampler other(8, 3, Sampling::Epochs);
  CHECK_THROWS_AS(other.restore(a.state()), Error);  // another training set's order
  EpochSampler::State bad = a.state();
  bad.order[0] = 7;
  CHECK_THROWS_AS(b.restore(bad), Error);  // an index outside the set
}

TEST_CASE("TrainingStream: a restored state draws the same windows") {
  pretrain::CorpusConfig c;
  c.people = 6, c.bios_per_person = 2, c.qa_test_questions = 6, c.qa_train_eval_questions = 6;
  c.math_train_problems = 20, c.min_ops = 1, c.max_ops = 2, c.math_test_problems = 4, c.math_train_eval_problems = 4;
  c.math_unseen_test_problems = 4, c.validation_documents = 6;
  const pretrain::Corpus corpus = pretrain::make_corpus(c, 3);
  pretrain::TrainingStream a(corpus, 32), b(corpus, 32);
  Generator ga(9);
  for (int i = 0; i < 25; ++i) a.next_sequence(ga);
  b.restore(nlohmann::json::parse(a.state().dump()));  // through text, as a checkpoint keeps it
  Generator gb(ga.seed());
  gb.set_state(ga.seed(), ga.counter());
  for (int i = 0; i < 40; ++i) CHECK(a.next_sequence(ga) == b.next_sequence(gb));
  CHECK(a.total_tokens() == b.total_tokens());
  CHECK(a.math_tokens() == b.math_tokens());
  nlohmann::json broken = a.state();
  broken.erase("pending");
  CHECK_THROWS_AS(b.restore(broken), Error);
}

TEST_CASE("CsvFile::restore: the file becomes the saved copy; a copy of another file is refused") {
  testing::TempDir tmp;
  const std::filesystem::path path = tmp.path() / "curve.csv";
  CsvFile f(path, {"step", "value"});
  f.row({"1", "0.5"});
  const std::string saved = read_regular_file(path);
  f.row({"2", "0.25"});
  f.restore(saved);
  f.row({"2", "0.125"});
  CHECK(read_regular_file(path) == "step,value\n1,0.5\n2,0.125\n");
  CHECK_THROWS_AS(f.restore("job,value\n"), Error);
}
