// tasks/pretrain/pretrain_claims.cpp — see pretrain_claims.h.
#include "tasks/pretrain/pretrain_claims.h"

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "tasks/common/report.h"
#include "tasks/common/run_dir.h"

namespace moelab {

namespace {

struct Model {
  std::string name;
  bool moe = false;
  double total = 0, active = 0;
  std::map<std::string, std::map<std::int64_t, double>> metric;  // metric -> seed -> value
  // The values of metric m of the seeds both models ran, in seed order.
  std::pair<std::vector<double>, std::vector<double>> paired(const Model& o, const std::string& m) const {
    std::pair<std::vector<double>, std::vector<double>> out;
    if (!metric.count(m) || !o.metric.count(m)) return out;
    for (const auto& [seed, x] : metric.at(m))
      if (o.metric.at(m).count(seed)) out.first.push_back(x), out.second.push_back(o.metric.at(m).at(seed));
    return out;
  }
  MeanStd stats(const std::string& m) const {
    std::vector<double> v;
    if (metric.count(m))
      for (const auto& [seed, x] : metric.at(m)) v.push_back(x);
    return mean_std(v);
  }
};

std::string points(const MeanStd& m) {
  return format_number(100 * m.mean, "%.1f") + " ± " + format_number(100 * m.std, "%.1f");
}

// Per seed that models ran, `metric` of each model with its total and its active parameters;
// total_first: which of the two is the claim's "follows".
Claim rank_claim(const std::vector<Model>& models, const std::string& metric, bool total_first, Claim c) {
  std::map<std::int64_t, RankSample> samples;
  for (const Model& m : models)
    if (m.metric.count(metric))
      for (const auto& [seed, y] : m.metric.at(metric)) {
        RankSample& s = samples[seed];
        s.quantity.push_back(y);
        s.first.push_back(total_first ? m.total : m.active), s.second.push_back(total_first ? m.active : m.total);
      }
  std::vector<RankSample> per_seed;
  for (const auto& [seed, s] : samples) per_seed.push_back(s);
  judge_rank_claim(c, per_seed, total_first ? "total parameters" : "active parameters",
                   total_first ? "active parameters" : "total parameters", models.size());
  return c;
}

}  // namespace

std::vector<Claim> pretrain_claims(const ClaimsInput& in) {
  std::vector<Model> models;
  for (const CsvRow& r : read_csv(in.dir / "results.csv")) {
    Model* m = nullptr;
    for (Model& x : models)
      if (x.name == r.text("model")) m = &x;
    if (m == nullptr) {
      models.push_back({r.text("model"), r.integer("experts") > 0, r.real("total_params"), r.real("active_params"), {}});
      m = &models.back();
    }
    for (const char* k : {"knowledge_test", "math_test", "math_gap", "perplexity"})
      m->metric[k][r.integer("seed")] = r.real(k);
  }
  std::vector<Claim> claims;
  claims.push_back(rank_claim(models, "knowledge_test", true,
                              {"Fig. 1", "knowledge (world-knowledge questions) follows total parameters more than active ones",
                               "MoEs gain on world knowledge with experts, like dense models of the same total size",
                               "", "", Verdict::NotJudged, ""}));
  claims.push_back(rank_claim(models, "math_test", false,
                              {"Fig. 1", "math reasoning follows active parameters more than total ones",
                               "on math, MoEs gain little from experts; dense models of the same width do as well",
                               "", "", Verdict::NotJudged, ""}));

  // Each MoE against the dense model nearest by some distance.
  auto nearest_dense = [&](auto distance) {
    const Model* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const Model& d : models)
      if (!d.moe && distance(d) < best_d) best = &d, best_d = distance(d);
    return best;
  };
  {
    Claim c{"Fig. 5", "at similar total parameters, MoEs have a larger math train-test gap",
            "MoEs generalise worse on math: a larger train-test gap than dense models", "", "", Verdict::NotJudged, ""};
    ClaimCounts counts;
    std::ostringstream ours, tests;
    for (const Model& moe : models) {
      if (!moe.moe) continue;
      const Model* d = nearest_dense([&](const Model& x) { return std::fabs(std::log(x.total / moe.total)); });
      if (!d) continue;
      const MeanStd a = moe.stats("math_gap"), b = d->stats("math_gap");
      const auto [x, y] = moe.paired(*d, "math_gap");
      counts.add_paired(a.mean - b.mean, a.std + b.std, x, y);
      ours << (ours.tellp() > 0 ? "; " : "") << moe.name << " " << points(a) << " against " << d->name << " " << points(b);
      tests << "; " << moe.name << " vs " << d->name << ": " << sign_flip_text(x, y);
    }
    c.ours = counts.cells == 0 ? "no MoE model with a dense one" : ours.str() + " (gap in points)";
    c.verdict = grade(counts);
    c.rule = "each MoE's mean gap minus the nearest dense model's (in total parameters) against their stds added (or the "
             "paired test at p < 0.05): " +
             counts_text(counts) + tests.str() + ".";
    claims.push_back(c);
  }
  {
    Claim know{"Fig. 6", "at a matched validation perplexity, MoEs do better on knowledge",
               "MoEs above dense models of the same perplexity on world knowledge", "", "", Verdict::NotJudged, ""};
    Claim math{"Fig. 6", "at a matched validation perplexity, MoEs tie with dense models on math",
               "MoEs level with dense models of the same perplexity on math", "", "", Verdict::NotJudged, ""};
    ClaimCounts k_counts, m_counts;
    std::ostringstream k_ours, m_ours, k_tests;
    for (const Model& moe : models) {
      if (!moe.moe) continue;
      const double p = moe.stats("perplexity").mean;
      const Model* d = nearest_dense([&](const Model& x) { return std::fabs(x.stats("perplexity").mean - p); });
      if (!d) continue;
      const MeanStd ka = moe.stats("knowledge_test"), kb = d->stats("knowledge_test");
      const auto [x, y] = moe.paired(*d, "knowledge_test");
      k_counts.add_paired(ka.mean - kb.mean, ka.std + kb.std, x, y);
      k_tests << "; " << moe.name << " vs " << d->name << ": " << sign_flip_text(x, y);
      const MeanStd ma = moe.stats("math_test"), mb = d->stats("math_test");
      const double spread = ma.std + mb.std, gap = std::fabs(ma.mean - mb.mean);
      m_counts.add_cell(gap <= spread ? 1 : -1, true);  // a tie is the paper's direction; no tie goes against it
      k_ours << (k_ours.tellp() > 0 ? "; " : "") << moe.name << " " << points(ka) << " against " << d->name << " "
             << points(kb);
      m_ours << (m_ours.tellp() > 0 ? "; " : "") << moe.name << " " << points(ma) << " against " << d->name << " "
             << points(mb);
    }
    know.ours = k_counts.cells == 0 ? "no MoE model with a dense one" : k_ours.str() + " (exact match, %)";
    know.verdict = grade(k_counts);
    know.rule = "each MoE's mean minus the dense model nearest in perplexity, against their stds added (or the paired "
                "test at p < 0.05): " +
                counts_text(k_counts) + k_tests.str() + ".";
    math.ours = m_counts.cells == 0 ? "no MoE model with a dense one" : m_ours.str() + " (exact match, %)";
    math.verdict = grade(m_counts);
    math.rule = "a cell ties (the paper's direction) when the two means differ by no more than their stds added: " +
                counts_text(m_counts) + ".";
    claims.push_back(know);
    claims.push_back(math);
  }
  return claims;
}

}  // namespace moelab
