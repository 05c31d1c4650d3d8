// tasks/softmoe_l2norm/l2norm_claims.cpp — see l2norm_claims.h.
#include "tasks/softmoe_l2norm/l2norm_claims.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "runner/report.h"
#include "runner/run_dir.h"

namespace moelab::l2norm {

std::vector<Claim> l2norm_claims(const ClaimsInput& in) {
  // tokenisation -> experts -> (final loss, final / constant) per finished seed (diverged ones left out).
  std::map<std::string, std::map<std::int64_t, std::vector<std::pair<double, double>>>> runs;
  std::size_t seeds = 0;
  for (const CsvRow& r : read_csv(in.dir / "results.csv")) {
    const double f = r.real("final_loss"), ratio = r.real("final_over_constant");
    if (!std::isfinite(f) || !std::isfinite(ratio)) continue;
    auto& v = runs[r.text("tokenisation")][r.integer("experts")];
    v.push_back({f, ratio});
    seeds = std::max(seeds, v.size());
  }
  auto stats = [](const std::vector<std::pair<double, double>>& v, bool ratio) {
    std::vector<double> x;
    for (const auto& [f, q] : v) x.push_back(ratio ? q : f);
    return mean_std(x);
  };
  const std::string seeds_text = std::to_string(seeds) + (seeds == 1 ? " seed" : " seeds");
  std::vector<Claim> claims;
  {
    Claim c{"Thm. 1", "Soft MoE with one expert cannot learn ||x||_2: its loss stays at the constant predictor's",
            "n = 1 is unable to lower the loss (Fig. 4, both tokenisations)", "", "", Verdict::NotJudged, ""};
    ClaimCounts counts;
    std::ostringstream ours;
    for (const auto& [tok, by_n] : runs) {
      if (!by_n.count(1)) continue;
      const MeanStd q = stats(by_n.at(1), true);
      counts.add(q.mean - kClearlyBelow, q.std, q.count);
      ours << (ours.tellp() > 0 ? "; " : "") << tok << ": " << format_number(q.mean, "%.2f") << " ± "
           << format_number(q.std, "%.2f") << " x the constant's loss";
    }
    c.ours = counts.cells == 0 ? "no n = 1 runs" : ours.str() + " (" + seeds_text + ")";
    c.verdict = grade(counts);
    c.rule = "per tokenisation, n = 1's final loss / the constant's, mean minus " + format_number(kClearlyBelow, "%.1f") +
             " against its std over seeds: " + counts_text(counts) + ".";
    claims.push_back(c);
  }
  {
    Claim c{"App. C", "more experts (the same expert parameters) learn it better",
            "the loss falls as n grows from 1 to 2, 5, 10 (Fig. 4)", "", "", Verdict::NotJudged, ""};
    ClaimCounts counts;
    std::int64_t steps = 0, steps_down = 0;
    std::ostringstream ours;
    for (const auto& [tok, by_n] : runs) {
      if (by_n.size() < 2) continue;
      const MeanStd lo = stats(by_n.begin()->second, false), hi = stats(by_n.rbegin()->second, false);
      counts.add(lo.mean - hi.mean, lo.std + hi.std, std::min(lo.count, hi.count));
      double previous = NAN;
      ours << (ours.tellp() > 0 ? "; " : "") << tok << ":";
      for (const auto& [n, v] : by_n) {
        const double m = stats(v, false).mean;
        if (std::isfinite(previous)) ++steps, steps_down += m < previous;
        ours << (std::isfinite(previous) ? ", " : " ") << "n = " << n << ": " << format_number(m, "%.3g");
        previous = m;
      }
    }
    c.ours = counts.cells == 0 ? "fewer than two n" : ours.str() + " (final MSE, means over " + seeds_text + ")";
    c.verdict = grade(counts, steps_down == steps);
    c.rule = "per tokenisation, the smallest n's mean final loss minus the largest n's against their stds added: " +
             counts_text(counts) + "; the mean falls at " + std::to_string(steps_down) + " of " +
             std::to_string(steps) + " steps from one n to the next.";
    claims.push_back(c);
  }
  return claims;
}

}  // namespace moelab::l2norm
