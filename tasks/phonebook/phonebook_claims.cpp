// tasks/phonebook/phonebook_claims.cpp — see phonebook_claims.h.
#include "tasks/phonebook/phonebook_claims.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "runner/report.h"
#include "runner/run_dir.h"
#include "runner/statistics.h"

namespace moelab {

namespace {

struct Capacity {
  std::string model;
  bool moe = false;
  std::int64_t d = 0;
  double total = 0, active = 0, median = 0;
  std::vector<double> per_seed;
  double low() const { return *std::min_element(per_seed.begin(), per_seed.end()); }
  double high() const { return *std::max_element(per_seed.begin(), per_seed.end()); }
  std::string text() const {
    std::ostringstream s;
    s << model << " " << cell(median);
    if (per_seed.size() > 1) s << " [" << cell(low()) << ", " << cell(high()) << "]";
    return s.str();
  }
};

}  // namespace

std::vector<Claim> phonebook_claims(const ClaimsInput& in) {
  std::vector<Capacity> models;
  std::size_t seeds = 0;
  for (const CsvRow& r : read_csv(in.dir / "capacity.csv")) {
    Capacity c;
    c.model = r.text("model"), c.moe = r.integer("experts") > 0, c.d = r.integer("d");
    c.total = r.real("total_params"), c.active = r.real("active_params"), c.median = r.real("largest_book_memorized");
    std::istringstream seeds_text(r.text("per_seed"));
    for (double v; seeds_text >> v;) c.per_seed.push_back(v);
    if (c.per_seed.empty()) continue;
    seeds = std::max(seeds, c.per_seed.size());
    models.push_back(c);
  }
  const std::string interval =
      seeds > 1 ? "median [range] over " + std::to_string(seeds) + " seeds (the range: a " +
                      format_number(100 * median_range_confidence(static_cast<std::int64_t>(seeds)), "%.0f") +
                      "% interval for the median)"
                : "one seed";
  std::vector<Claim> claims;

  // ---- MoE against the dense model of the same active parameters (within 10%), else of its width.
  {
    Claim c{"Fig. 4a", "an MoE memorizes a larger phone book than a dense model with as many active parameters or fewer",
            "MoEs match dense models with the same total parameters whatever their active ones; a 42M-active MoE "
            "beats a dense model with 10x as many parameters (largest book at >= 90% exact match)",
            "", "", Verdict::NotJudged, ""};
    bool equal_active = false;
    for (const Capacity& m : models)
      for (const Capacity& d : models)
        equal_active = equal_active || (m.moe && !d.moe && std::fabs(m.active - d.active) <= 0.1 * d.active);
    ClaimCounts counts;
    std::ostringstream ours, tests;
    for (const Capacity& m : models) {
      if (!m.moe) continue;
      for (const Capacity& d : models) {
        if (d.moe || !(equal_active ? std::fabs(m.active - d.active) <= 0.1 * d.active : d.d == m.d)) continue;
        // per_seed lists the seeds in order: pair them by position.
        const std::size_t n = std::min(m.per_seed.size(), d.per_seed.size());
        const std::vector<double> x(m.per_seed.begin(), m.per_seed.begin() + static_cast<std::ptrdiff_t>(n)),
            y(d.per_seed.begin(), d.per_seed.begin() + static_cast<std::ptrdiff_t>(n));
        const bool beyond = m.median > d.median ? m.low() > d.high() : d.low() > m.high();
        counts.add_cell(m.median - d.median, beyond || paired_beyond(x, y),
                        static_cast<std::int64_t>(std::min(m.per_seed.size(), d.per_seed.size())));
        ours << (ours.tellp() > 0 ? "; " : "") << m.text() << " against " << d.text();
        tests << "; " << m.model << " vs " << d.model << ": " << sign_flip_text(x, y);
      }
    }
    c.ours = counts.cells == 0 ? "no MoE model with a dense model to compare" : ours.str() + " entries (" + interval + ")";
    // The outside review's independent PyTorch implementation reached 2,000 entries with 16 experts
    // at width 64 (the cpu preset's model), as this engine's record does.
    for (const Capacity& m : models)
      if (m.model == "moe-d64-16e")
        c.reference = "moe-d64-16e: 2000 entries (an outside review's independent PyTorch implementation)";
    c.verdict = grade(counts);
    c.rule = std::string("pairs ") +
             (equal_active ? "of equal active parameters (within 10%)" : "of equal width (the dense one has fewer active parameters)") +
             "; beyond the spread when one model's smallest per-seed capacity exceeds the other's largest, or the "
             "paired test gives p < 0.05: " +
             counts_text(counts) + tests.str() + ".";
    claims.push_back(c);
  }

  // ---- Capacity ranks with total parameters rather than active ones, per seed.
  {
    Claim c{"Fig. 4a", "capacity follows total parameters, not active ones",
            "the largest book memorized correlates with total (and not active) parameters", "", "", Verdict::NotJudged,
            ""};
    std::vector<RankSample> samples(seeds);
    for (std::size_t s = 0; s < seeds; ++s)
      for (const Capacity& m : models)
        if (s < m.per_seed.size() && m.per_seed[s] > 0)
          samples[s].quantity.push_back(m.per_seed[s]), samples[s].first.push_back(m.total),
              samples[s].second.push_back(m.active);
    judge_rank_claim(c, samples, "total parameters", "active parameters", models.size());
    claims.push_back(c);
  }
  return claims;
}

}  // namespace moelab
