// tasks/teacher_student/teacher_student_claims.cpp — see teacher_student_claims.h.
#include "tasks/teacher_student/teacher_student_claims.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "runner/report.h"
#include "runner/run_dir.h"

namespace moelab::teacher_student {

namespace {

constexpr double kFitted = 0.01;  // normalised loss below which a student fits its teacher

struct Cell {
  std::string teacher, student;
  std::int64_t teacher_k = 0, student_k = 0;
  std::vector<double> loss;
  std::map<std::int64_t, double> by_seed;
  MeanStd stats() const { return mean_std(loss); }
};

std::string loss_text(const MeanStd& m) {
  return format_number(m.mean, "%.3f") + " ± " + format_number(m.std, "%.3f");
}

}  // namespace

std::vector<Claim> teacher_student_claims(const ClaimsInput& in) {
  std::vector<Cell> cells;  // (teacher, student) in results.csv's (grid) order
  std::vector<std::string> teachers;
  std::size_t seeds = 0;
  for (const CsvRow& r : read_csv(in.dir / "results.csv")) {
    Cell* c = nullptr;
    for (Cell& x : cells)
      if (x.teacher == r.text("teacher") && x.student == r.text("student")) c = &x;
    if (c == nullptr) {
      cells.push_back({r.text("teacher"), r.text("student"), r.integer("teacher_k"), r.integer("student_k"), {}, {}});
      c = &cells.back();
      if (std::find(teachers.begin(), teachers.end(), c->teacher) == teachers.end()) teachers.push_back(c->teacher);
    }
    c->loss.push_back(r.real("normalised_loss"));
    c->by_seed[r.integer("seed")] = r.real("normalised_loss");
    seeds = std::max(seeds, c->loss.size());
  }
  std::vector<Claim> claims;
  const std::string seeds_text = std::to_string(seeds) + (seeds == 1 ? " seed" : " seeds");

  {
    Claim c{"Fig. 2/3", "a student learns the teacher only if its granularity k' is at least the teacher's k",
            "students fit the teacher only with k' >= k, even with up to 16x the teacher's total parameters", "", "",
            Verdict::NotJudged, ""};
    ClaimCounts counts;
    std::ostringstream ours, tests;
    for (const std::string& t : teachers) {
      const Cell *worst_fine = nullptr, *best_coarse = nullptr;
      for (const Cell& x : cells) {
        if (x.teacher != t) continue;
        if (x.student_k >= x.teacher_k) {
          if (!worst_fine || x.stats().mean > worst_fine->stats().mean) worst_fine = &x;
        } else if (!best_coarse || x.stats().mean < best_coarse->stats().mean) {
          best_coarse = &x;
        }
      }
      if (!worst_fine || !best_coarse) continue;
      const MeanStd f = worst_fine->stats(), k = best_coarse->stats();
      std::vector<double> coarse, fine;  // paired by replicate seed
      for (const auto& [seed, loss] : best_coarse->by_seed)
        if (worst_fine->by_seed.count(seed)) coarse.push_back(loss), fine.push_back(worst_fine->by_seed.at(seed));
      const bool apart = k.mean > f.mean ? f.mean + f.std < k.mean - k.std : k.mean + k.std < f.mean - f.std;
      counts.add_cell(k.mean - f.mean, apart || paired_beyond(coarse, fine), std::min(k.count, f.count));
      tests << "; teacher " << t << ": " << sign_flip_text(coarse, fine);
      ours << (ours.tellp() > 0 ? "; " : "") << "teacher " << t << ": worst k' >= k " << worst_fine->student << " "
           << loss_text(f) << ", best k' < k " << best_coarse->student << " " << loss_text(k);
    }
    c.ours = counts.cells == 0 ? "no teacher with students on both sides"
                               : ours.str() + " (normalised loss, " + seeds_text + ")";
    c.verdict = grade(counts);
    c.rule = "per teacher, the best coarser student's mean minus the worst fine-enough student's; beyond the spread "
             "when the one's mean + std is below the other's mean - std, or the paired test gives p < 0.05: " +
             counts_text(counts) + tests.str() + ".";
    claims.push_back(c);
  }
  {
    Claim c{"Fig. 2/3", "fine-enough students (k' >= k) fit the teacher, at every size",
            "fine-enough students' losses are about 0; coarser ones stay near 0.16-0.23 (Fig. 3)", "", "",
            Verdict::NotJudged, ""};
    ClaimCounts counts;
    double lo = 1e300, hi = -1e300;
    for (const Cell& x : cells) {
      if (x.student_k < x.teacher_k) continue;
      const MeanStd m = x.stats();
      counts.add(kFitted - m.mean, m.std, m.count);
      lo = std::min(lo, m.mean), hi = std::max(hi, m.mean);
    }
    c.ours = counts.cells == 0 ? "no fine-enough student"
                               : "fine-enough students' mean normalised loss " + format_number(lo, "%.3f") + " to " +
                                     format_number(hi, "%.3f") + "; " + std::to_string(counts.paper_direction) + " of " +
                                     std::to_string(counts.cells) + " below " + format_number(kFitted, "%.2f") + " (" +
                                     seeds_text + ")";
    c.verdict = grade(counts);
    c.rule = "per (teacher, fine-enough student), 0.01 minus its mean normalised loss against its std over seeds: " +
             counts_text(counts) + ". A student that does not fit at this budget may fit with more epochs (the "
             "paper's Appendix D trains longer), so this row separates capacity from optimisation only as far as "
             "the budget allows.";
    claims.push_back(c);
  }
  return claims;
}

}  // namespace moelab::teacher_student
