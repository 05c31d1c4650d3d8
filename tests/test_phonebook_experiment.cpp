// tests/test_phonebook_experiment.cpp — `moelab phonebook` end to end at toy size: the sweep
// writes one result file per point, the derived results, capacity table and summary, skips books
// after a failure, and a second run resumes instead of training again; a damaged point file is an
// error naming it. The stop rule's walk over finished points (walk_books) on its own.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/parallel.h"
#include "runner/run_dir.h"
#include "tasks/phonebook/phonebook_experiment.h"
#include "tasks/phonebook/phonebook_report.h"
#include "temp_dir.h"

using namespace moelab;

TEST_CASE("phonebook sweep: results, report, skipping and resuming") {
  set_num_threads(1);
  const Experiment e = phonebook_experiment();
  Settings s = e.settings();
  // One dense and one MoE model of width 16; a 12-entry book is learnable in 150 steps, a
  // 3000-entry one is not (so the 6000-entry book is skipped).
  for (const char* kv : {"dense_widths=16", "moe_widths=16", "experts=4", "book_sizes=12,3000,6000", "steps=150",
                         "batch=32", "eval_every=50", "test_names=12", "lrs=1e-2", "heads=2", "layers=1"})
    s.set_assignment(kv);
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "phonebook");
  const RunContext ctx{s, dir, "test", /*seed=*/0, /*threads=*/1, Device::cpu()};
  REQUIRE(e.run(ctx) == 0);

  const auto rows = read_csv(dir.file("results.csv"));
  REQUIRE(rows.size() == 4);  // 2 models x books 12 and 3000; 6000 skipped after the failure
  for (const auto& r : rows) {
    CHECK((r.at("model") == "dense-d16" || r.at("model") == "moe-d16-4e"));
    const double acc = std::stod(r.at("exact_match"));
    if (r.at("book_size") == "12") CHECK(acc >= 0.9);   // memorized
    if (r.at("book_size") == "3000") CHECK(acc < 0.9);  // too large for this budget
  }
  const auto capacity = read_csv(dir.file("capacity.csv"));
  REQUIRE(capacity.size() == 2);
  for (const auto& c : capacity) CHECK(c.at("largest_book_memorized") == "12");
  CHECK(std::stod(capacity[1].at("total_params")) > std::stod(capacity[1].at("active_params")));
  CHECK(std::filesystem::exists(dir.file("summary.md")));
  CHECK(std::filesystem::exists(dir.file("fig4a_total.dat")));
  {
    // The comparisons in numbers, and no second verdict beside the Claims section.
    std::ifstream summary_file(dir.file("summary.md"));
    const std::string summary((std::istreambuf_iterator<char>(summary_file)), std::istreambuf_iterator<char>());
    CHECK(summary.find("## Comparisons") != std::string::npos);
    CHECK(summary.find("## In numbers") == std::string::npos);
  }
  CHECK(!read_csv(dir.file("metrics.csv")).empty());

  CHECK(std::filesystem::exists(dir.file("points/moe-d16-4e-N12-seed0.json")));
  CHECK(!std::filesystem::exists(dir.file("points/moe-d16-4e-N6000-seed0.json")));  // skipped

  // Started again: every point is found, nothing is trained again.
  const auto before = std::filesystem::last_write_time(dir.file("points/moe-d16-4e-N12-seed0.json"));
  REQUIRE(e.run(ctx) == 0);
  CHECK(read_csv(dir.file("results.csv")).size() == 4);
  CHECK(std::filesystem::last_write_time(dir.file("points/moe-d16-4e-N12-seed0.json")) == before);

  // Settings that cannot work together are usage errors.
  Settings bad = e.settings();
  bad.set_assignment("book_sizes=500,250");
  const RunContext bad_ctx{bad, dir, "test", 0, 1, Device::cpu()};
  CHECK_THROWS_AS(e.run(bad_ctx), UsageError);

  // A damaged point file is an error naming it, never a point taken as missing and trained again.
  {
    std::ofstream out(dir.file("points/dense-d16-N3000-seed0.json"), std::ios::trunc);
    out << "{\"best_exact_match\": 0.1";
  }
  CHECK_THROWS_WITH_AS(e.run(ctx), doctest::Contains("dense-d16-N3000-seed0.json"), std::runtime_error);
}

TEST_CASE("phonebook stop rule: the walk over finished points") {
  using S = BookState;
  const double t = 0.9;
  // Fail at the second size: the rest is skipped (stop after 1 failure).
  CHECK(walk_books({1.0, 0.5, 0.95, std::nullopt}, t, 1) == std::vector<S>{S::Counted, S::Counted, S::Skipped, S::Skipped});
  // Two failures in a row needed: a pass in between resets the count.
  CHECK(walk_books({0.5, 0.95, 0.5, 0.5, 1.0}, t, 2) ==
        std::vector<S>{S::Counted, S::Counted, S::Counted, S::Counted, S::Skipped});
  // A missing point stops the walk: what follows is unknown until it is done.
  CHECK(walk_books({1.0, std::nullopt, 0.1, 0.1}, t, 1) == std::vector<S>{S::Counted, S::Missing, S::Unknown, S::Unknown});
  CHECK(walk_books({}, t, 1).empty());
}
