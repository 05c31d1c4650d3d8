// tasks/pretrain/pretrain_claims.cpp — see pretrain_claims.h.
#include "tasks/pretrain/pretrain_claims.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "runner/report.h"
#include "runner/run_dir.h"

namespace moelab {

namespace {

struct Model {
  std::string name;  // the model, with its load when the grid has several ("moe-d32-8e, 800 people")
  bool moe = false;
  double total = 0, active = 0;
  std::int64_t people = 0;  // the load (0: a record from before loads)
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

// Per load and seed that models ran, `metric` of each model with its total and its active
// parameters; total_first: which of the two is the claim's "follows". One cell per load.
Claim rank_claim(const std::vector<Model>& models, const std::string& metric, bool total_first, Claim c) {
  std::map<std::int64_t, std::map<std::int64_t, RankSample>> samples;  // people -> seed -> sample
  std::map<std::int64_t, std::size_t> models_per_load;
  for (const Model& m : models) {
    ++models_per_load[m.people];
    if (m.metric.count(metric))
      for (const auto& [seed, y] : m.metric.at(metric)) {
        RankSample& s = samples[m.people][seed];
        s.quantity.push_back(y);
        s.first.push_back(total_first ? m.total : m.active), s.second.push_back(total_first ? m.active : m.total);
      }
  }
  std::vector<RankCell> cells;
  for (const auto& [people, by_seed] : samples) {
    RankCell cell{samples.size() == 1 ? "" : std::to_string(people) + " people", {}};
    for (const auto& [seed, s] : by_seed) cell.seeds.push_back(s);
    cells.push_back(cell);
  }
  judge_rank_cells(c, cells, total_first ? "total parameters" : "active parameters",
                   total_first ? "active parameters" : "total parameters",
                   models_per_load.empty() ? 0 : models_per_load.begin()->second, "corpus size");
  return c;
}

// A claim that needs a column this record does not have.
Claim missing_column(Claim c, const std::string& column) {
  c.ours = "no " + column + " column in results.csv (recorded before this measurement existed)";
  c.verdict = Verdict::NotJudged;
  c.rule = "needs " + column + ".";
  return c;
}

bool has_metric(const std::vector<Model>& models, const std::string& metric) {
  for (const Model& m : models)
    if (m.metric.count(metric)) return true;
  return false;
}

// Each MoE against the dense model of its load nearest by `distance`.
template <class Distance>
const Model* nearest_dense(const std::vector<Model>& models, const Model& of, Distance distance) {
  const Model* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  for (const Model& d : models)
    if (!d.moe && d.people == of.people && distance(d) < best_d) best = &d, best_d = distance(d);
  return best;
}

// Fig. 5 on one gap column.
Claim gap_claim(const std::vector<Model>& models, const std::string& gap, Claim c) {
  if (!has_metric(models, gap)) return missing_column(c, gap);
  ClaimCounts counts;
  std::ostringstream ours, tests;
  for (const Model& moe : models) {
    if (!moe.moe) continue;
    const Model* d =
        nearest_dense(models, moe, [&](const Model& x) { return std::fabs(std::log(x.total / moe.total)); });
    if (!d) continue;
    const MeanStd a = moe.stats(gap), b = d->stats(gap);
    const auto [x, y] = moe.paired(*d, gap);
    counts.add_paired(a.mean - b.mean, a.std + b.std, x, y, std::min(a.count, b.count));
    ours << (ours.tellp() > 0 ? "; " : "") << moe.name << " " << points(a) << " against " << d->name << " " << points(b);
    tests << "; " << moe.name << " vs " << d->name << ": " << sign_flip_text(x, y);
  }
  c.ours = ours.tellp() == 0 ? "no MoE model with a dense one" : ours.str() + " (" + gap + " in points)";
  c.verdict = grade(counts);
  c.rule = "each MoE's mean " + gap + " minus the nearest dense model's (in total parameters) against their stds "
           "added (or the paired test at p < 0.05): " + counts_text(counts) + tests.str() + ".";
  return c;
}

// Fig. 6: each MoE against the dense model nearest in `match` (a perplexity), on `metric`; `tie`:
// the paper's direction is a tie (math), else the MoE above (knowledge).
Claim matched_claim(const std::vector<Model>& models, const std::string& match, const std::string& metric, bool tie,
                    Claim c) {
  if (!has_metric(models, metric)) return missing_column(c, metric);
  ClaimCounts counts;
  std::ostringstream ours, tests;
  for (const Model& moe : models) {
    if (!moe.moe) continue;
    const double p = moe.stats(match).mean;
    const Model* d = nearest_dense(models, moe, [&](const Model& x) { return std::fabs(x.stats(match).mean - p); });
    if (!d) continue;
    const MeanStd a = moe.stats(metric), b = d->stats(metric);
    const std::int64_t seeds = std::min(a.count, b.count);
    if (tie) {
      counts.add_cell(std::fabs(a.mean - b.mean) <= a.std + b.std ? 1 : -1, true, seeds);
    } else {
      const auto [x, y] = moe.paired(*d, metric);
      counts.add_paired(a.mean - b.mean, a.std + b.std, x, y, seeds);
      tests << "; " << moe.name << " vs " << d->name << ": " << sign_flip_text(x, y);
    }
    ours << (ours.tellp() > 0 ? "; " : "") << moe.name << " (" << format_number(p, "%.3f") << ") " << points(a)
         << " against " << d->name << " (" << format_number(d->stats(match).mean, "%.3f") << ") " << points(b);
  }
  c.ours = ours.tellp() == 0 ? "no MoE model with a dense one"
                             : ours.str() + " (" + metric + ", exact match %; " + match + " in brackets)";
  c.verdict = grade(counts);
  c.rule = tie ? "each MoE against the dense model nearest in " + match + "; a cell ties (the paper's direction) when "
                     "the two means of " + metric + " differ by no more than their stds added: " + counts_text(counts) + "."
               : "each MoE's mean " + metric + " minus the dense model's nearest in " + match +
                     ", against their stds added (or the paired test at p < 0.05): " + counts_text(counts) +
                     tests.str() + ".";
  return c;
}

}  // namespace

std::vector<Claim> pretrain_claims(const ClaimsInput& in) {
  std::vector<Model> models;
  const std::vector<CsvRow> rows = read_csv(in.dir / "results.csv");
  std::set<std::int64_t> loads;
  for (const CsvRow& r : rows) loads.insert(r.count("people") ? r.integer("people") : 0);
  for (const CsvRow& r : rows) {
    const std::int64_t people = r.count("people") ? r.integer("people") : 0;
    const std::string name =
        r.text("model") + (loads.size() > 1 ? ", " + std::to_string(people) + " people" : std::string());
    Model* m = nullptr;
    for (Model& x : models)
      if (x.name == name) m = &x;
    if (m == nullptr) {
      models.push_back({name, r.integer("experts") > 0, r.real("total_params"), r.real("active_params"), people, {}});
      m = &models.back();
    }
    // Older records lack the later columns; an empty test (no held-out equation) gives nan.
    for (const char* k : {"knowledge_test", "knowledge_train", "math_test", "math_unseen", "math_gap", "math_unseen_gap",
                          "perplexity", "best_perplexity", "stored_bits_per_param"})
      if (r.count(k) && std::isfinite(r.real(k))) m->metric[k][r.integer("seed")] = r.real(k);
  }
  const std::string second = "second row: ";
  std::vector<Claim> claims;
  claims.push_back(rank_claim(
      models, "knowledge_train", true,
      {"Fig. 1", "stored knowledge (trained people's questions) follows total parameters more than active ones",
       "MoEs gain on world knowledge with experts, like dense models of the same total size", "", "",
       Verdict::NotJudged, ""}));
  claims.push_back(rank_claim(
      models, "knowledge_test", true,
      {"Fig. 1", second + "knowledge extraction (held-out people's questions) follows total parameters more than "
                          "active ones",
       "MoEs gain on world knowledge with experts, like dense models of the same total size", "", "",
       Verdict::NotJudged, ""}));
  const Claim math_unseen{"Fig. 1", "math on unseen equations follows active parameters more than total ones",
                          "on math, MoEs gain little from experts; dense models of the same width do as well", "", "",
                          Verdict::NotJudged, ""};
  claims.push_back(has_metric(models, "math_unseen") ? rank_claim(models, "math_unseen", false, math_unseen)
                                                     : missing_column(math_unseen, "math_unseen"));
  claims.push_back(rank_claim(
      models, "math_test", false,
      {"Fig. 1", second + "in-distribution math (fresh problems, seen equations) follows active parameters more than "
                          "total ones",
       "on math, MoEs gain little from experts; dense models of the same width do as well", "", "",
       Verdict::NotJudged, ""}));
  const std::string fig5_paper = "MoEs generalise worse on math: a larger train-test gap than dense models";
  claims.push_back(gap_claim(models, "math_unseen_gap",
                             {"Fig. 5", "at similar total parameters, MoEs have a larger math train-unseen gap",
                              fig5_paper, "", "", Verdict::NotJudged, ""}));
  claims.push_back(gap_claim(models, "math_gap",
                             {"Fig. 5", second + "the same with the in-distribution test (train - test)", fig5_paper,
                              "", "", Verdict::NotJudged, ""}));
  // The perplexity models are matched on: the best of the run where the record has it.
  const std::string match = has_metric(models, "best_perplexity") ? "best_perplexity" : "perplexity";
  const std::string know_paper = "MoEs above dense models of the same perplexity on world knowledge";
  const std::string math_paper = "MoEs level with dense models of the same perplexity on math";
  claims.push_back(matched_claim(models, match, "knowledge_train", false,
                                 {"Fig. 6", "at a matched validation perplexity, MoEs store more knowledge", know_paper,
                                  "", "", Verdict::NotJudged, ""}));
  claims.push_back(matched_claim(models, match, "knowledge_test", false,
                                 {"Fig. 6", second + "the same on knowledge extraction", know_paper, "", "",
                                  Verdict::NotJudged, ""}));
  claims.push_back(matched_claim(models, match, "math_unseen", true,
                                 {"Fig. 6", "at a matched validation perplexity, MoEs tie with dense models on unseen "
                                            "math",
                                  math_paper, "", "", Verdict::NotJudged, ""}));
  claims.push_back(matched_claim(models, match, "math_test", true,
                                 {"Fig. 6", second + "the same on in-distribution math", math_paper, "", "",
                                  Verdict::NotJudged, ""}));
  return claims;
}

}  // namespace moelab
