// runner/claims.h — one line per paper claim in every summary, with a verdict word from a
// fixed scale, computed from the run's CSV files (never written by hand).
//
// Each experiment that reproduces a paper names the paper's claims it tests and, for each, the
// cells where the claim can be checked (an (n, k) cell of Table 10, an MoE model against the dense
// model of its width, a teacher's students, ...). In every cell the effect has a sign relative to
// the paper (positive: the paper's direction) and a size relative to the seeds' spread, by the rule
// the experiment states (usually: the difference of two means over seeds against their two sample
// standard deviations added). Where two models ran the same seeds, a difference also counts as
// beyond the spread when the paired sign-flip test over those seeds gives a two-sided p below
// 0.05 (paired_beyond; impossible below 6 seeds, where the smallest p is 0.0625): the sum of two
// stds is a conservative rule that ignores the pairing, and 10 seeds can show what it cannot.
// The verdict then follows from counts only:
//
//   holds         every cell shows the effect beyond the seeds' spread, and (where the paper gives
//                 a size to compare with) at least half the paper's size, (where it says
//                 "uniformly") at every step
//   holds weaker  most cells show the effect on the means, but not all beyond the spread, or the
//                 size is below half the paper's, or not at every step
//   differs       no majority either way: the effect does not show at this scale
//   contradicts   most cells go against the paper, at least one of them beyond the spread
//   not judged    no cell could be checked (missing points), or none had the seeds to be judged,
//                 or the grid cannot tell the claim's alternatives apart: outside the scale
//
// Verdicts never outrun their seeds: one seed has no spread (its "std" is 0, so any difference
// would be "beyond" it), so a cell whose means are over fewer than kMinSeedsToJudge seeds on
// either side is left out of the counts (too_few_seeds, named by counts_text), and a claim with
// no cell left is not judged. Every add takes the cell's seed count for that reason.
//
//   ClaimCounts c;
//   for (cell : cells) c.add(effect_mean, spread, seeds);   // effect > 0: the paper's direction
//   Verdict v = grade(c);                             // or grade(c, /*full_strength=*/ratio >= 0.5)
//
// The summary's "## Claims" section (claims_section) is a table, one row per claim: the paper's
// number, ours with the number of seeds and their spread, an independent reference where one was
// recorded, the verdict; then each claim's rule and counts, on a line that begins with the row's
// first cell ("Fig. 1: <statement> — <rule>"). `moelab claims DIR` recomputes it from
// a finished folder's CSVs (a recorded result included) and `moelab claims --check DIR` fails when
// summary.md holds anything else (tests/docs_claims.sh runs it on every record).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moelab {

enum class Verdict { Holds, HoldsWeaker, Differs, Contradicts, NotJudged };
// "holds", "holds weaker", "differs", "contradicts", "not judged".
const char* verdict_name(Verdict v);

// The fewest seeds (or repeated measurements) a cell's means must be over to be judged.
constexpr std::int64_t kMinSeedsToJudge = 2;

struct ClaimCounts {
  std::int64_t cells = 0;            // cells judged (seeds >= kMinSeedsToJudge)
  std::int64_t paper_direction = 0;  // cells whose mean effect has the paper's sign (> 0)
  std::int64_t beyond = 0;           // ... and exceeds the spread
  std::int64_t against_beyond = 0;   // cells against the paper by more than the spread
  std::int64_t too_few_seeds = 0;    // cells left out: fewer than kMinSeedsToJudge seeds
  // One cell: effect in the paper's direction when > 0; spread >= 0 (e.g. two stds added);
  // seeds: the fewest values either side's mean is over (MeanStd::count).
  void add(double effect, double spread, std::int64_t seeds);
  // One cell whose rule for "beyond the spread" is the experiment's own (e.g. every seed of one
  // model above every seed of the other); beyond_spread counts only with an effect != 0.
  void add_cell(double effect, bool beyond_spread, std::int64_t seeds);
  // One cell of two models that ran the same seeds (a[i] and b[i] from seed i): beyond the spread
  // when |effect| > spread, as add(), or when the paired test gives p < 0.05 (paired_beyond).
  void add_paired(double effect, double spread, const std::vector<double>& a, const std::vector<double>& b,
                  std::int64_t seeds);
};
// The scale above. full_strength: false when the paper's claim has a stronger form that ours does
// not reach (a size, and ours is below half of it; "uniformly", and ours is not).
Verdict grade(const ClaimCounts& counts, bool full_strength = true);
// "7 of 9 cells in the paper's direction, 5 beyond the seeds' spread (1 against it beyond the
// spread)", then "; 2 cells with fewer than 2 seeds not judged" where there were such, or "no cell
// with 2 seeds or more: one seed has no spread to judge against" when every cell had too few;
// `spread` names what the spread is over.
std::string counts_text(const ClaimCounts& counts, const std::string& spread = "the seeds' spread");

// True when the paired sign-flip test of a against b (one value per seed, the same seeds, 1 to 24
// of them) gives p < 0.05; false for no pairs.
bool paired_beyond(const std::vector<double>& a, const std::vector<double>& b);

// The paired comparison of two models over the seeds both ran (runner/statistics.h):
// "sign-flip p = 0.25 over 3 paired seeds (the smallest possible: 0.25)"; "no paired seeds" when
// there are none.
std::string sign_flip_text(const std::vector<double>& a, const std::vector<double>& b);

struct Claim;

// "Follows X rather than Y" claims, judged per seed: for each seed's models, Spearman's rho of the
// quantity with X (first) minus its rho with Y (second); the one cell is that difference's mean
// over seeds against its std. Seeds with fewer than 3 models or a constant column are left out,
// and so are seeds whose models X and Y put in the same order (rho(X, Y) = 1: both rhos are then
// equal whatever the quantity, so the grid cannot tell "follows X" from "follows Y"); with none
// left, or fewer than kMinSeedsToJudge, the claim is not judged and c.ours says why.
struct RankSample {
  std::vector<double> quantity, first, second;  // one value per model of this seed
};
// Sets c.ours ("Spearman's rho with <first_name> 0.90 ± 0.05, with <second_name> 0.61 ± 0.10 (per
// seed over M models, S seeds)"), c.verdict and c.rule. `models`: the number of models, for the text.
void judge_rank_claim(Claim& c, const std::vector<RankSample>& seeds, const std::string& first_name,
                      const std::string& second_name, std::size_t models);
// The same with several cells (e.g. one per corpus size, "400 people"), each its own seeds: one
// cell of the counts per RankCell, the same rules within each; with one cell, judge_rank_claim.
// cell_kind names what a cell is in the rule ("corpus size").
struct RankCell {
  std::string label;  // "400 people": c.ours names each cell by it
  std::vector<RankSample> seeds;
};
void judge_rank_cells(Claim& c, const std::vector<RankCell>& cells, const std::string& first_name,
                      const std::string& second_name, std::size_t models, const std::string& cell_kind);

struct Claim {
  std::string name;       // where in the paper: "Table 1", "Fig. 4a"
  std::string statement;  // the claim in a few words
  std::string paper;      // the paper's number(s)
  std::string ours;       // ours, with seeds and spread
  std::string reference;  // an independent reimplementation's number, or "" (none recorded)
  Verdict verdict = Verdict::NotJudged;
  std::string rule;       // how the verdict was reached: the rule and the counts
};

// What a claims function reads: the run folder (its CSVs), config.json's "settings", the run's
// seed (for what the report recomputes from them, e.g. shortest-path's trivial baseline) and the
// device it ran on as config.json records it ("cpu" or "cuda": for claims about timings).
struct ClaimsInput {
  std::filesystem::path dir;
  nlohmann::ordered_json settings;
  std::uint64_t seed = 0;
  std::string device = "cpu";
};
using ClaimsFunction = std::function<std::vector<Claim>(const ClaimsInput&)>;

// "## Claims\n\n" + the table + the rules, one line per row (markdown, ending in a blank line).
std::string claims_section(const std::vector<Claim>& claims);

// summary.md's text with its "## Claims" section replaced by `section` (up to the next "## "
// heading), or inserted before the first "## " heading when there is none (at the end when the
// text has no heading).
std::string with_claims_section(const std::string& summary, const std::string& section);

// Rewrites dir/summary.md with the claims section (whole or not at all: checked_file). moelab::Error
// when there is no summary.md.
void write_claims_section(const std::filesystem::path& dir, const std::vector<Claim>& claims);

}  // namespace moelab
