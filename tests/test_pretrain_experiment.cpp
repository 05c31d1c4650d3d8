// tests/test_pretrain_experiment.cpp — `moelab pretrain` (tasks/pretrain/pretrain_experiment.h):
// bad settings are usage errors naming the key, before anything is written; a toy grid runs end
// to end (every file, every point, the report's four claims), resumes without retraining, and
// learns (validation perplexity far below the untrained model's). The corpus's invariants (held-out
// people never have a question in training, test problems never occur in training, answers are
// right) are tests/test_pretrain_corpus.cpp's.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "runner/run_dir.h"
#include "runner/run_start.h"
#include "tasks/pretrain/knowledge.h"
#include "tasks/pretrain/pretrain_experiment.h"
#include "temp_dir.h"

using namespace moelab;

namespace {

const Experiment& experiment() {
  static const Experiment e = pretrain_experiment();
  return e;
}

// The toy grid: a dense and a 4-expert MoE model of width 16, two seeds, a corpus of 6 people,
// character tokens (the word tokenizer has its own case below).
Settings toy(const std::vector<std::string>& extra = {}) {
  Settings s = experiment().settings();
  for (const char* kv : {"people=6", "bios_per_person=2", "qa_test_questions=6", "qa_train_eval_questions=6",
                         "math_train_problems=20", "min_ops=1", "max_ops=2", "math_test_problems=4",
                         "math_train_eval_problems=4", "math_unseen_test_problems=4", "validation_documents=6", "dense_widths=16", "moe_widths=16",
                         "experts=4", "seq=64", "steps=150", "batch=8", "lr=1e-2", "seeds=0,1", "tokens=char"})
    s.set_assignment(kv);
  for (const std::string& kv : extra) s.set_assignment(kv);
  return s;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("pretrain: bad settings are usage errors naming the key") {
  const Experiment& e = experiment();
  CHECK_NOTHROW(e.validate(toy()));
  for (const Preset& p : e.presets) {
    Settings s = e.settings();
    s.apply(p);
    CHECK_NOTHROW(e.validate(s));
  }
  auto refused = [&](const std::string& kv, const std::string& named) {
    INFO(kv);
    CHECK_THROWS_WITH_AS(e.validate(toy({kv})), doctest::Contains(named.c_str()), UsageError);
  };
  refused("people=0", "'people'");                           // zero people
  refused("people=6,1", "'people'");                         // one load of the sweep too small
  refused("people=6,6", "people");                           // a point twice
  CHECK_THROWS_WITH_AS(e.validate(toy({"passes=2", "math_fraction=1"})), doctest::Contains("passes"), UsageError);
  CHECK_NOTHROW(e.validate(toy({"passes=2", "eval_every=1000"})));  // the steps come from the passes
  refused("templates_per_sentence=0", "'templates_per_sentence'");  // an empty template list
  refused("max_ops=6", "'max_ops'");                         // more operations than supported
  refused("qa_test_questions=19", "'qa_test_questions'");    // more questions than the 3 held-out people have
  refused("math_train_eval_problems=21", "'math_train_eval_problems'");
  refused("eval_every=151", "eval_every");
  refused("seeds=1,1", "seeds");                             // a point twice
  refused("experts=1", "k = 2");                             // top-2 of one expert
  refused("math_max_value=4", "'math_max_value'");
  refused("math_max_operand=1", "'math_max_operand'");
  refused("math_unseen_share=0", "'math_unseen_test_problems'");  // an unseen test with nothing held out
  refused("perplexity_every=151", "perplexity_every");
  CHECK_THROWS_WITH_AS(e.validate(toy({"perplexity_every=20", "eval_every=30"})),
                       doctest::Contains("multiple of perplexity_every"), UsageError);
  CHECK_NOTHROW(e.validate(toy({"math_unseen_share=0", "math_unseen_test_problems=0"})));
  CHECK_THROWS_AS(toy({"tokens=bytes"}), UsageError);     // char or word
  CHECK_THROWS_AS(toy({"no_such_key=1"}), UsageError);
  CHECK_THROWS_AS(toy({"math_fraction=1.5"}), UsageError);
}

TEST_CASE("pretrain: a toy grid end to end: files, points, the four claims, a rerun trains nothing") {
  set_num_threads(1);
  const Experiment& e = experiment();
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "pt");
  const Settings s = toy({"perplexity_every=50"});
  begin_run(dir, run_config(e.name, "test", 0, 1, "cpu", "moelab pretrain", s), s);
  REQUIRE(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}) == 0);

  const auto results = read_csv(dir.file("results.csv"));
  REQUIRE(results.size() == 4);  // 2 models x 2 seeds
  for (const CsvRow& r : results) {
    CHECK(r.integer("steps") == 150);
    CHECK(r.integer("tokens") == 150 * 8 * 63);
    for (const char* m : {"knowledge_test", "knowledge_train", "math_test", "math_train", "math_unseen"}) {
      CHECK(r.real(m) >= 0.0);
      CHECK(r.real(m) <= 1.0);
    }
    CHECK(r.real("math_gap") == doctest::Approx(r.real("math_train") - r.real("math_test")));
    CHECK(r.real("math_unseen_gap") == doctest::Approx(r.real("math_train") - r.real("math_unseen")));
    // The perplexity ran at steps 50, 100 and 150: the best is one of them, never above the last.
    CHECK(r.real("best_perplexity") <= r.real("perplexity"));
    const std::int64_t best_step = r.integer("best_perplexity_step");
    CHECK((best_step == 50 || best_step == 100 || best_step == 150));
    // Untrained, every one of the 82 tokens is as likely: perplexity 82. 150 steps of a width-16
    // model already take it far below (the characters' frequencies alone are worth most of that).
    CHECK(r.real("perplexity") < 15.0);
    CHECK(std::exp(r.real("validation_loss")) == doctest::Approx(r.real("perplexity")).epsilon(1e-9));
    if (r.text("family") == "dense") CHECK(r.integer("total_params") == r.integer("active_params"));
    else CHECK(r.integer("total_params") > r.integer("active_params"));
  }
  CHECK(read_csv(dir.file("models.csv")).size() == 2);
  CHECK(!read_csv(dir.file("metrics.csv")).empty());
  const std::string summary = read_text(dir.file("summary.md"));
  for (const char* part : {"## Claims", "| Fig. 1: stored knowledge", "| Fig. 1: second row: knowledge extraction",
                           "| Fig. 1: math on unseen equations", "| Fig. 5: at similar total parameters",
                           "| Fig. 6: at a matched validation perplexity, MoEs store more knowledge",
                           "## Comparisons", "### Figure 6: against the dense model nearest in best validation",
                           "| moe-d16-4e |", "| dense-d16 |"})
    CHECK_MESSAGE(summary.find(part) != std::string::npos, part);
  // No second verdict outside the Claims section: the report states none of its own.
  CHECK(summary.find("## In numbers") == std::string::npos);
  CHECK(summary.find("point the paper's way") == std::string::npos);
  // Every 50 steps a perplexity went to metrics.csv; generation (knowledge_test) ran once, at the end.
  std::int64_t perplexities = 0, knowledge = 0;
  for (const CsvRow& r : read_csv(dir.file("metrics.csv")))
    if (r.text("job") == "dense-d16-p6-seed0") perplexities += r.text("metric") == "perplexity", knowledge += r.text("metric") == "knowledge_test";
  CHECK(perplexities == 3);
  CHECK(knowledge == 1);

  // Every model of a seed trains on the same corpus, and seeds differ: the untrained-corpus facts
  // are not in the results, but the two seeds' dense models must not be copies of each other.
  CHECK(results[0].text("final_loss") != results[1].text("final_loss"));

  // A rerun trains nothing: the points stay as they were.
  const auto stamp = std::filesystem::last_write_time(dir.file("points/dense-d16-p6-seed0.json"));
  REQUIRE(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}) == 0);
  CHECK(std::filesystem::last_write_time(dir.file("points/dense-d16-p6-seed0.json")) == stamp);
  CHECK(read_csv(dir.file("results.csv")) == results);
}

TEST_CASE("pretrain: tokens=word trains on word pieces: its own vocabulary, fewer positions for the same text") {
  set_num_threads(1);
  const Experiment& e = experiment();
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "pt");
  const Settings s = toy({"tokens=word", "seeds=0", "math_max_operand=9", "math_max_value=99"});
  begin_run(dir, run_config(e.name, "test", 0, 1, "cpu", "moelab pretrain", s), s);
  REQUIRE(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}) == 0);
  const auto results = read_csv(dir.file("results.csv"));
  REQUIRE(results.size() == 2);
  for (const CsvRow& r : results) {
    CHECK(r.integer("tokens") == 150 * 8 * 63);
    // Untrained, perplexity is the vocabulary's size (82 characters + about 190 words for this
    // corpus: 271 to 273 tokens over seeds 0-2); 150 steps take it below a fifth of that.
    CHECK(r.real("perplexity") < 55.0);
  }
  // One seed: the comparisons give the differences without a spread to set them against (a std
  // of 0 from one seed would put every difference "beyond" it).
  const std::string summary = read_text(dir.file("summary.md"));
  CHECK(summary.find("one seed on a side: no spread to compare with") != std::string::npos);
  CHECK(summary.find("the seeds' spread, ") == std::string::npos);
}

TEST_CASE("pretrain: a load sweep with passes: the steps follow each load, stored bits, one claim cell per load") {
  set_num_threads(1);
  const Experiment& e = experiment();
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "pt");
  // Two loads, one seed, steps from 3 passes over each load's knowledge text.
  const Settings s = toy({"people=6,12", "seeds=0,1", "passes=3", "qa_train_eval_questions=6"});
  begin_run(dir, run_config(e.name, "test", 0, 1, "cpu", "moelab pretrain", s), s);
  REQUIRE(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}) == 0);
  const auto results = read_csv(dir.file("results.csv"));
  REQUIRE(results.size() == 8);  // 2 loads x 2 models x 2 seeds
  // (people, seed) -> steps: the same for every model of a corpus (each seed draws its own text).
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> steps;
  for (const CsvRow& r : results) {
    const std::int64_t people = r.integer("people");
    CHECK((people == 6 || people == 12));
    CHECK(std::filesystem::exists(dir.file("points/" + r.text("model") + "-p" + std::to_string(people) + "-seed" +
                                           r.text("seed") + ".json")));
    // 3 passes, rounded up to whole steps: never fewer, and less than one step's knowledge more.
    const double passes = r.real("knowledge_passes");
    CHECK(passes >= 3.0);
    CHECK(passes < 3.0 * (1.0 + 1.0 / static_cast<double>(r.integer("steps"))) + 1e-12);
    const std::pair<std::int64_t, std::int64_t> corpus{people, r.integer("seed")};
    if (steps.count(corpus)) CHECK(steps[corpus] == r.integer("steps"));
    steps[corpus] = r.integer("steps");
    CHECK(r.integer("tokens") == r.integer("steps") * 8 * 63);
    // Bits: the corpus's are the people's facts; the stored ones never exceed the trained half's
    // and are knowledge_train's share of them only when every attribute is answered alike.
    CHECK(r.real("corpus_bits") == doctest::Approx(static_cast<double>(people) * pretrain::person_bits()));
    CHECK(r.real("stored_bits") >= 0.0);
    CHECK(r.real("stored_bits") <= static_cast<double>(people / 2) * pretrain::person_bits() + 1e-9);
    CHECK(r.real("stored_bits_per_param") ==
          doctest::Approx(r.real("stored_bits") / r.real("total_params")).epsilon(1e-6));
    if (r.real("knowledge_train") == 0.0) CHECK(r.real("stored_bits") == 0.0);
  }
  // Twice the people, about twice the knowledge text: about twice the steps for the same passes.
  for (std::int64_t seed : {0, 1}) CHECK(steps[{12, seed}] > steps[{6, seed}] * 3 / 2);
  CHECK(read_csv(dir.file("models.csv")).size() == 4);
  const std::string summary = read_text(dir.file("summary.md"));
  for (const char* part : {"6 and 12 people", "| moe-d16-4e | 12 |", "| dense-d16 | 6 |", "moe-d16-4e, 12 people",
                           "read the knowledge text 3 times", "one cell per corpus size (2)"})
    CHECK_MESSAGE(summary.find(part) != std::string::npos, part);
}
