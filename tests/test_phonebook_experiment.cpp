// tests/test_phonebook_experiment.cpp — `moelab phonebook` end to end at toy size: the sweep
// writes one results row per job, the derived capacity table and summary, skips books after a
// failure, and a second run resumes instead of training again; a damaged results.csv is an error.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/parallel.h"
#include "tasks/common/run_dir.h"
#include "tasks/phonebook/phonebook_experiment.h"
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
  CHECK(!read_csv(dir.file("metrics.csv")).empty());

  // Started again: every job is found in results.csv, nothing is trained or appended.
  REQUIRE(e.run(ctx) == 0);
  CHECK(read_csv(dir.file("results.csv")).size() == 4);

  // Settings that cannot work together are usage errors.
  Settings bad = e.settings();
  bad.set_assignment("book_sizes=500,250");
  const RunContext bad_ctx{bad, dir, "test", 0, 1, Device::cpu()};
  CHECK_THROWS_AS(e.run(bad_ctx), UsageError);

  // A damaged cell ("12O" for 12) is an error naming the file, line and column, never a book of 12
  // (nor a phantom column in summary.md).
  std::string text;
  {
    std::ifstream in(dir.file("results.csv"));
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::size_t at = text.find(",12,");
  REQUIRE(at != std::string::npos);
  text.replace(at, 4, ",12O,");
  {
    std::ofstream out(dir.file("results.csv"), std::ios::trunc);
    out << text;
  }
  CHECK_THROWS_WITH_AS(e.run(ctx), doctest::Contains("column 'book_size': '12O' is not an integer"), std::runtime_error);
}
