// tests/test_claims.cpp — the verdict scale of runner/claims.h (each word reached, and only
// by the counts that should reach it), the summary's Claims section (inserted, replaced, stable),
// and the experiments' claims functions on small hand-made folders: the same CSV shape gives
// "holds" when the numbers go the paper's way and "contradicts" when they go the other way, so
// a claims function that ignored its numbers would fail here.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "runner/claims.h"
#include "runner/statistics.h"
#include "tasks/phonebook/phonebook_claims.h"
#include "tasks/softmoe_l2norm/l2norm_claims.h"
#include "tasks/softmoe_mnist/softmoe_mnist_claims.h"
#include "tasks/teacher_student/teacher_student_claims.h"
#include "temp_dir.h"

using namespace moelab;

namespace {

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

ClaimCounts counts_of(std::initializer_list<std::pair<double, double>> cells) {
  ClaimCounts c;
  for (const auto& [effect, spread] : cells) c.add(effect, spread, /*seeds=*/3);
  return c;
}

}  // namespace

TEST_CASE("grade: each word of the scale from the counts") {
  CHECK(grade(ClaimCounts{}) == Verdict::NotJudged);
  CHECK(grade(counts_of({{3, 1}, {2, 1}})) == Verdict::Holds);
  CHECK(grade(counts_of({{3, 1}, {2, 1}}), /*full_strength=*/false) == Verdict::HoldsWeaker);
  CHECK(grade(counts_of({{3, 1}, {0.5, 1}})) == Verdict::HoldsWeaker);        // one cell within the spread
  CHECK(grade(counts_of({{3, 1}, {2, 1}, {-0.5, 1}})) == Verdict::HoldsWeaker);  // a majority, not all
  CHECK(grade(counts_of({{3, 1}, {-0.5, 1}})) == Verdict::Differs);           // no majority
  CHECK(grade(counts_of({{-0.5, 1}, {-0.2, 1}})) == Verdict::Differs);        // against, but within the spread
  CHECK(grade(counts_of({{-3, 1}, {-0.2, 1}})) == Verdict::Contradicts);      // against, one beyond
  CHECK(grade(counts_of({{0, 1}})) == Verdict::Differs);                      // no effect at all
  ClaimCounts own;
  own.add_cell(2, true, 3), own.add_cell(1, false, 3);
  CHECK(own.beyond == 1);
  CHECK(grade(own) == Verdict::HoldsWeaker);
  CHECK(std::string(verdict_name(Verdict::HoldsWeaker)) == "holds weaker");
  CHECK(counts_text(counts_of({{3, 1}, {-3, 1}})) ==
        "1 of 2 cells in the paper's direction, 1 beyond the seeds' spread (1 against it beyond the spread)");
}

TEST_CASE("verdicts never outrun their seeds: a cell of one seed is left out, a claim of such cells not judged") {
  // One seed: its std is 0, so a difference of 0.001 would be "beyond the spread" and hold.
  ClaimCounts one;
  one.add(0.001, 0.0, /*seeds=*/1), one.add(5.0, 0.0, 1);
  CHECK(one.cells == 0);
  CHECK(one.too_few_seeds == 2);
  CHECK(grade(one) == Verdict::NotJudged);
  CHECK(counts_text(one) ==
        "no cell with 2 seeds or more (2 cells with fewer): one seed has no spread to judge against");
  // Mixed: the one-seed cell is named and left out; the others are judged.
  ClaimCounts mixed;
  mixed.add(3, 1, 3), mixed.add(2, 1, 2), mixed.add(-9, 1, 1);
  CHECK(grade(mixed) == Verdict::Holds);
  CHECK(counts_text(mixed) ==
        "2 of 2 cells in the paper's direction, 2 beyond the seeds' spread; 1 cell with fewer than 2 seeds not judged");
  ClaimCounts paired, own;
  paired.add_paired(1, 0, {2}, {1}, 1);
  own.add_cell(1, true, 1);
  CHECK(grade(paired) == Verdict::NotJudged);
  CHECK(grade(own) == Verdict::NotJudged);
  // A rank claim over one seed is not judged either, however large the difference of rhos.
  Claim c;
  judge_rank_claim(c, {RankSample{{1, 2, 3}, {1, 2, 3}, {3, 1, 2}}}, "total", "active", 3);
  CHECK(c.verdict == Verdict::NotJudged);
  judge_rank_claim(c, {RankSample{{1, 2, 3}, {1, 2, 3}, {3, 1, 2}}, RankSample{{1, 2, 3.5}, {1, 2, 3}, {2, 1, 3}}},
                   "total", "active", 3);
  CHECK(c.verdict == Verdict::Holds);
}

TEST_CASE("judge_rank_claim: a grid whose models are in the same order by both quantities is not judged, with why") {
  // Three models, total and active in the same order: rho(q, total) = rho(q, active) whatever q.
  const std::vector<RankSample> same = {RankSample{{0.2, 0.5, 0.9}, {10, 20, 40}, {10, 15, 17}},
                                        RankSample{{0.3, 0.4, 0.8}, {10, 20, 40}, {10, 15, 17}}};
  Claim c;
  judge_rank_claim(c, same, "total parameters", "active parameters", 3);
  CHECK(c.verdict == Verdict::NotJudged);
  CHECK(c.ours.find("not separable on this grid") != std::string::npos);
  CHECK(c.rule.find("2 seeds left out: the models in the same order by both") != std::string::npos);
  // Once the orders differ the same values are judged.
  const std::vector<RankSample> apart = {RankSample{{0.2, 0.5, 0.9}, {10, 20, 40}, {10, 17, 15}},
                                         RankSample{{0.3, 0.4, 0.8}, {10, 20, 40}, {10, 17, 15}}};
  judge_rank_claim(c, apart, "total parameters", "active parameters", 3);
  CHECK(c.verdict != Verdict::NotJudged);
}

TEST_CASE("judge_rank_cells: one cell per load, each named, each judged within itself") {
  // Cell A: total ranks the quantity, active does not (rho 1 against -0.5), on two seeds.
  const RankCell a{"400 people", {RankSample{{1, 2, 3}, {1, 2, 3}, {3, 1, 2}}, RankSample{{1, 2, 3.5}, {1, 2, 3}, {3, 1, 2}}}};
  // Cell B: the same on one seed only: left out as too few seeds, and said.
  const RankCell b{"800 people", {RankSample{{1, 2, 3}, {1, 2, 3}, {3, 1, 2}}}};
  Claim c;
  judge_rank_cells(c, {a, b}, "total", "active", 3, "corpus size");
  CHECK(c.verdict == Verdict::Holds);
  CHECK(c.ours.find("400 people: Spearman's rho with total 1.00") != std::string::npos);
  CHECK(c.rule.find("one cell per corpus size (2)") != std::string::npos);
  CHECK(c.rule.find("1 cell with fewer than 2 seeds not judged") != std::string::npos);
  CHECK(c.ours.find("(2 seeds); 800 people: ") != std::string::npos);
  CHECK(c.ours.find("(1 seed) (per seed over 3 models)") != std::string::npos);  // not "1 seeds"
  // Two cells that disagree: no verdict either way.
  const RankCell against{"1600 people",
                         {RankSample{{3, 2, 1}, {1, 2, 3}, {3, 1, 2}}, RankSample{{3.5, 2, 1}, {1, 2, 3}, {3, 1, 2}}}};
  judge_rank_cells(c, {a, against}, "total", "active", 3, "corpus size");
  CHECK(c.verdict != Verdict::Holds);
  // One unnamed cell is judge_rank_claim, word for word.
  Claim one, same;
  judge_rank_claim(one, a.seeds, "total", "active", 3);
  judge_rank_cells(same, {RankCell{"", a.seeds}}, "total", "active", 3, "corpus size");
  CHECK(one.ours == same.ours);
  CHECK(one.rule == same.rule);
}

TEST_CASE("with_claims_section: inserted before the first section, replaced in place, the same when applied twice") {
  const std::string section = claims_section({Claim{"Fig. 1", "a claim", "1.0", "0.9 ± 0.1", "", Verdict::Holds, "why"}});
  CHECK(section.find("| Fig. 1: a claim | 1.0 | 0.9 ± 0.1 | none recorded | **holds** |") != std::string::npos);
  const std::string summary = "# Title\n\n> note\n\nintro\n\n## Tables\n\nrows\n";
  const std::string once = with_claims_section(summary, section);
  CHECK(once == "# Title\n\n> note\n\nintro\n\n" + section + "## Tables\n\nrows\n");
  CHECK(with_claims_section(once, section) == once);
  const std::string other = claims_section({Claim{"Fig. 1", "a claim", "1.0", "0.1", "", Verdict::Differs, "why"}});
  CHECK(with_claims_section(once, other) == "# Title\n\n> note\n\nintro\n\n" + other + "## Tables\n\nrows\n");
  CHECK(with_claims_section("# Title\n", section) == "# Title\n\n" + section);  // no section: at the end
  // "## Claims" inside a line is not a heading.
  CHECK(with_claims_section("see ## Claims\n## A\n", section) == "see ## Claims\n" + section + "## A\n");
  // A table cell never breaks the table.
  CHECK(claims_section({Claim{"a", "x | y", "p", "o", "", Verdict::Holds, ""}}).find("x \\| y") != std::string::npos);
}

TEST_CASE("claims_section: each rule line names its row, so two rows of one figure are told apart") {
  const std::string section =
      claims_section({Claim{"Fig. 1", "stored knowledge follows total", "p", "o", "", Verdict::Holds, "rule A"},
                      Claim{"Fig. 1", "second row: extraction follows total", "p", "o", "", Verdict::Differs, "rule B"}});
  CHECK(section.find("\n- Fig. 1: stored knowledge follows total — rule A\n") != std::string::npos);
  CHECK(section.find("\n- Fig. 1: second row: extraction follows total — rule B\n") != std::string::npos);
}

TEST_CASE("paired_beyond: ten seeds that all agree are beyond the spread that the stds alone would not give") {
  // b = a - 1 on every seed while a's own spread is about 3: the stds overlap, the pairing does not.
  const std::vector<double> a = {1, 4, 7, 2, 9, 5, 3, 8, 6, 10};
  std::vector<double> b;
  for (double v : a) b.push_back(v - 1);
  CHECK(paired_beyond(a, b));                                 // p = 2 / 1024
  CHECK(!paired_beyond({3, 2, 1}, {2, 1, 0}));                // three seeds: p >= 0.25
  CHECK(!paired_beyond({}, {}));
  CHECK(sign_flip_text({3, 2, 1}, {2, 1, 0}) == "sign-flip p = 0.25 over 3 paired seeds (the smallest possible: 0.25)");
  CHECK(sign_flip_text({}, {}) == "no paired seeds");
}

TEST_CASE("median_range_confidence: 1 - 2 / 2^n") {
  CHECK(median_range_confidence(3) == 0.75);
  CHECK(median_range_confidence(1) == 0.0);
  CHECK(median_range_confidence(10) == doctest::Approx(0.998046875));
  CHECK_THROWS_AS(median_range_confidence(0), Error);
}

TEST_CASE("phonebook_claims: the MoE above the dense model holds, below it contradicts") {
  testing::TempDir tmp;
  const std::string header = "model,family,d,experts,total_params,active_params,seeds,largest_book_memorized,per_seed\n";
  write(tmp.path() / "capacity.csv", header +
                                         "dense-d64,dense,64,0,1000,1000,3,500,500 500 500\n"
                                         "dense-d96,dense,96,0,2000,2000,3,1000,1000 1000 1000\n"
                                         "moe-d64-4e,moe-d64,64,4,1800,1300,3,1000,1000 1000 1000\n"
                                         "moe-d64-8e,moe-d64,64,8,3000,1350,3,1500,1500 1500 2000\n");
  std::vector<Claim> c = phonebook_claims({tmp.path(), {}, 0});
  REQUIRE(c.size() == 2);
  CHECK(c[0].verdict == Verdict::Holds);
  CHECK(c[0].ours.find("moe-d64-8e 1500 [1500, 2000] against dense-d64 500 [500, 500]") != std::string::npos);
  CHECK(c[0].ours.find("75% interval") != std::string::npos);
  write(tmp.path() / "capacity.csv", header +
                                         "dense-d64,dense,64,0,1000,1000,3,1500,1500 1500 1500\n"
                                         "moe-d64-4e,moe-d64,64,4,1800,1300,3,500,500 500 1000\n");
  c = phonebook_claims({tmp.path(), {}, 0});
  CHECK(c[0].verdict == Verdict::Contradicts);
}

TEST_CASE("teacher_student_claims: fine students below coarse ones hold; fitted only below 0.01") {
  testing::TempDir tmp;
  std::string csv = "teacher,teacher_k,student,student_k,seed,normalised_loss\n";
  for (int seed = 0; seed < 3; ++seed) {
    csv += "8e4a,4,8e4a," + std::string("4,") + std::to_string(seed) + "," + std::to_string(0.001 + 0.001 * seed) + "\n";
    csv += "8e4a,4,4e2a,2," + std::to_string(seed) + "," + std::to_string(0.15 + 0.01 * seed) + "\n";
  }
  write(tmp.path() / "results.csv", csv);
  std::vector<Claim> c = teacher_student::teacher_student_claims({tmp.path(), {}, 0});
  REQUIRE(c.size() == 2);
  CHECK(c[0].verdict == Verdict::Holds);
  CHECK(c[1].verdict == Verdict::Holds);
  // The fine student no better than the coarse one: the first claim is contradicted.
  csv = "teacher,teacher_k,student,student_k,seed,normalised_loss\n";
  for (int seed = 0; seed < 3; ++seed) {
    csv += "8e4a,4,8e4a,4," + std::to_string(seed) + "," + std::to_string(0.30 + 0.001 * seed) + "\n";
    csv += "8e4a,4,4e2a,2," + std::to_string(seed) + "," + std::to_string(0.15 + 0.001 * seed) + "\n";
  }
  write(tmp.path() / "results.csv", csv);
  c = teacher_student::teacher_student_claims({tmp.path(), {}, 0});
  CHECK(c[0].verdict == Verdict::Contradicts);
  CHECK(c[1].verdict == Verdict::Contradicts);
}

TEST_CASE("l2norm_claims: one expert at the constant's loss and falling losses hold") {
  testing::TempDir tmp;
  std::string csv = "tokenisation,experts,seed,final_loss,final_over_constant\n";
  const double loss[] = {2.5, 1.2, 0.6, 0.5};
  const int experts[] = {1, 2, 5, 10};
  for (int i = 0; i < 4; ++i)
    for (int seed = 0; seed < 2; ++seed)
      csv += "2x5," + std::to_string(experts[i]) + "," + std::to_string(seed) + "," +
             std::to_string(loss[i] + 0.01 * seed) + "," + std::to_string((loss[i] + 0.01 * seed) / 2.43) + "\n";
  write(tmp.path() / "results.csv", csv);
  std::vector<Claim> c = l2norm::l2norm_claims({tmp.path(), {}, 0});
  REQUIRE(c.size() == 2);
  CHECK(c[0].verdict == Verdict::Holds);
  CHECK(c[1].verdict == Verdict::Holds);
  // n = 1 well below the constant: Theorem 1's claim is contradicted.
  csv = "tokenisation,experts,seed,final_loss,final_over_constant\n2x5,1,0,0.5,0.2\n2x5,1,1,0.6,0.25\n";
  write(tmp.path() / "results.csv", csv);
  c = l2norm::l2norm_claims({tmp.path(), {}, 0});
  CHECK(c[0].verdict == Verdict::Contradicts);
  CHECK(c[1].verdict == Verdict::NotJudged);
}

TEST_CASE("softmoe_mnist_claims: Table 10's size is judged against half the paper's") {
  testing::TempDir tmp;
  write(tmp.path() / "table1.csv", "experts,seed,best_subset_accuracy,random_mean\n4,0,0.95,0.5\n4,1,0.96,0.51\n"
                                   "16,0,0.999,0.6\n16,1,0.998,0.61\n");
  write(tmp.path() / "timing.csv", "layer,experts,k,batch,mean_ms,std_ms,trials\n"
                                   "trained,8,8,1,2.0,0.1,100\ntrained,8,2,1,1.0,0.1,100\n");
  auto subsets = [&](double z) {
    std::string csv = "experts,seed,divisor,algorithm1_accuracy,random_mean,stds_above_random\n";
    for (int seed = 0; seed < 2; ++seed)
      for (int n : {8, 16})
        csv += std::to_string(n) + "," + std::to_string(seed) + ",2," + std::to_string(0.8 + 0.01 * seed) + ",0.7," +
               std::to_string(z + seed) + "\n";
    write(tmp.path() / "subsets.csv", csv);
  };
  subsets(20);  // the paper's k = n/2 entries at n = 8, 16: 22.95, 25.39
  std::vector<Claim> c = softmoe_mnist::softmoe_mnist_claims({tmp.path(), {{"dataset", "mnist"}}, 0});
  REQUIRE(c.size() == 6);
  CHECK(c[0].verdict == Verdict::Holds);   // Table 1
  CHECK(c[2].verdict == Verdict::Holds);   // Fig. 2
  CHECK(c[3].name == "Table 10");
  CHECK(c[3].verdict == Verdict::Holds);
  CHECK(c[5].verdict == Verdict::Holds);   // Table 3
  subsets(5);  // a fifth of the paper's: the direction holds, the size does not
  c = softmoe_mnist::softmoe_mnist_claims({tmp.path(), {{"dataset", "mnist"}}, 0});
  CHECK(c[3].verdict == Verdict::HoldsWeaker);
  // On another dataset the paper's size is not compared.
  c = softmoe_mnist::softmoe_mnist_claims({tmp.path(), {{"dataset", "fashion-mnist"}}, 0});
  CHECK(c[3].verdict == Verdict::Holds);
  CHECK(c[3].paper.find("no Fashion-MNIST run") != std::string::npos);
}
