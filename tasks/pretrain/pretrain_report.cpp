// tasks/pretrain/pretrain_report.cpp — models.csv, the Figure 1/5/6 plots and summary.md of
// `moelab pretrain` (see the header for the verdict's rules).
#include "tasks/pretrain/pretrain_report.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <tuple>

#include "tasks/common/plot.h"
#include "tasks/common/report.h"
#include "tasks/common/run_dir.h"

namespace moelab {

namespace {

// The measurements of one model, one value per seed.
struct ModelRow {
  ModelSpec spec;
  double total = 0, active = 0;
  std::vector<double> knowledge_test, knowledge_train, math_test, math_train, gap, perplexity;
  bool done() const { return !knowledge_test.empty(); }
};

const char* const kMetrics[] = {"knowledge_test", "knowledge_train", "math_test", "math_train", "math_gap",
                                "perplexity"};

std::vector<double>& metric(ModelRow& r, int i) {
  std::vector<double>* all[] = {&r.knowledge_test, &r.knowledge_train, &r.math_test, &r.math_train, &r.gap,
                                &r.perplexity};
  return *all[i];
}

double mean_of(const std::vector<double>& v) { return mean_std(v).mean; }
double std_of(const std::vector<double>& v) { return mean_std(v).std; }
std::string pct(double share) { return format_number(100 * share, "%.1f"); }
std::string pct_pm(const std::vector<double>& v) { return pct(mean_of(v)) + " ± " + pct(std_of(v)); }

// "+4.2 points (beyond the seeds' spread, 3.1)": a difference of means and how it compares with
// the two spreads added.
std::string difference(const std::vector<double>& a, const std::vector<double>& b, bool* beyond = nullptr) {
  const double diff = mean_of(a) - mean_of(b), spread = std_of(a) + std_of(b);
  const bool clear = std::fabs(diff) > spread;
  if (beyond) *beyond = clear;
  return format_number(100 * diff, "%+.1f") + " points (" + (clear ? "beyond" : "within") + " the seeds' spread, " +
         format_number(100 * spread, "%.1f") + ")";
}

// The dense model nearest to `moe` by `distance` (smallest), or null when there is none.
template <class Distance>
const ModelRow* nearest_dense(const std::vector<ModelRow>& rows, Distance distance) {
  const ModelRow* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const ModelRow& r : rows)
    if (!r.spec.moe() && r.done() && distance(r) < best_distance) best = &r, best_distance = distance(r);
  return best;
}

}  // namespace

void write_pretrain_report(const RunContext& ctx, const std::vector<ModelSpec>& models) {
  const Settings& s = ctx.settings;
  std::vector<ModelRow> rows;
  for (const ModelSpec& m : models) {
    ModelRow row;
    row.spec = m;
    rows.push_back(row);
  }
  double tokens = 0;
  for (const CsvRow& r : read_csv(ctx.dir.file("results.csv")))
    for (ModelRow& row : rows)
      if (row.spec.name() == r.text("model")) {
        row.total = r.real("total_params"), row.active = r.real("active_params");
        for (int i = 0; i < 6; ++i) metric(row, i).push_back(r.real(kMetrics[i]));
        tokens = r.real("tokens");
      }

  // models.csv and the table: means and spreads over seeds.
  std::ostringstream csv, table;
  csv << "model,family,d,experts,total_params,active_params,seeds";
  for (const char* m : kMetrics) csv << "," << m << "_mean," << m << "_std";
  csv << "\n";
  table << "| model | total params | active params | seeds | knowledge test | knowledge train | math test | "
           "math train | math gap | perplexity |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  std::vector<FamilyPoint> k_total, k_active, m_total, m_active, gap_total, gap_active, k_ppl, m_ppl;
  std::vector<double> k_v, m_v, total_v, active_v;
  for (ModelRow& r : rows) {
    if (!r.done()) continue;
    csv << r.spec.name() << "," << r.spec.family() << "," << r.spec.d << "," << r.spec.experts << "," << cell(r.total)
        << "," << cell(r.active) << "," << r.knowledge_test.size();
    for (int i = 0; i < 6; ++i) csv << "," << cell(mean_of(metric(r, i))) << "," << cell(std_of(metric(r, i)));
    csv << "\n";
    table << "| " << r.spec.name() << " | " << cell(r.total) << " | " << cell(r.active) << " | "
          << r.knowledge_test.size() << " | " << pct_pm(r.knowledge_test) << "% | " << pct_pm(r.knowledge_train)
          << "% | " << pct_pm(r.math_test) << "% | " << pct_pm(r.math_train) << "% | "
          << format_number(100 * mean_of(r.gap), "%+.1f") << " | " << format_number(mean_of(r.perplexity), "%.3f")
          << " ± " << format_number(std_of(r.perplexity), "%.3f") << " |\n";
    const std::string f = r.spec.family();
    // Bars: mean +- sample std over seeds (none with one seed), in points.
    auto point = [&](double x, const std::vector<double>& v) {
      const MeanStd m = mean_std(v);
      const bool bars = v.size() > 1;
      return FamilyPoint{f, x, 100 * m.mean, bars ? 100 * (m.mean - m.std) : NAN, bars ? 100 * (m.mean + m.std) : NAN};
    };
    k_total.push_back(point(r.total, r.knowledge_test));
    k_active.push_back(point(r.active, r.knowledge_test));
    m_total.push_back(point(r.total, r.math_test));
    m_active.push_back(point(r.active, r.math_test));
    gap_total.push_back(point(r.total, r.gap));
    gap_active.push_back(point(r.active, r.gap));
    k_ppl.push_back(point(mean_of(r.perplexity), r.knowledge_test));
    m_ppl.push_back(point(mean_of(r.perplexity), r.math_test));
    k_v.push_back(mean_of(r.knowledge_test)), m_v.push_back(mean_of(r.math_test));
    total_v.push_back(r.total), active_v.push_back(r.active);
  }
  ctx.dir.write_text("models.csv", csv.str());

  // The plots, each beside the paper's figure.
  std::vector<std::string> notes;
  for (const std::string& n :
       plot_against_parameters(ctx.dir.path(), "fig1_knowledge", "Knowledge (held-out people's questions)",
                               "exact match (%), mean over seeds, bars: +- std", k_total, k_active))
    notes.push_back(n);
  for (const std::string& n : plot_against_parameters(ctx.dir.path(), "fig1_math", "Math (fresh problems)",
                                                      "exact match (%), mean over seeds, bars: +- std", m_total, m_active))
    notes.push_back(n);
  for (const std::string& n :
       plot_against_parameters(ctx.dir.path(), "fig5_gap", "Math train - test accuracy",
                               "train minus test (points), mean over seeds, bars: +- std", gap_total, gap_active))
    notes.push_back(n);
  for (const auto& [stem, title, points] :
       {std::tuple{"fig6_knowledge", "Knowledge against validation perplexity", &k_ppl},
        std::tuple{"fig6_math", "Math against validation perplexity", &m_ppl}}) {
    const LinePlot p{.title = title, .xlabel = "validation perplexity (mean over seeds)",
                     .ylabel = "exact match (%), mean over seeds, bars: +- std", .series = series_by_family(*points)};
    const PlotResult r = plot_lines(p, ctx.dir.path(), stem);
    notes.push_back(r.drawn ? r.png.filename().string() : "(no PNG: " + r.message + ")");
  }

  // The verdict, claim by claim.
  std::ostringstream verdict, details;
  const double k_rho_total = rank_correlation(k_v, total_v), k_rho_active = rank_correlation(k_v, active_v);
  const double m_rho_total = rank_correlation(m_v, total_v), m_rho_active = rank_correlation(m_v, active_v);
  auto rho = [](double v) { return std::isnan(v) ? std::string("undefined") : format_number(v, "%.2f"); };
  auto claim = [&](int number, const std::string& what, bool holds, const std::string& numbers) {
    verdict << number << ". " << what << ": " << (holds ? "the means point the paper's way" : "the means do not point the paper's way")
            << " (" << numbers << ").\n";
  };
  claim(1, "Knowledge follows total parameters more than active ones", k_rho_total > k_rho_active,
        "rank correlation of knowledge accuracy with total parameters " + rho(k_rho_total) + ", with active " +
            rho(k_rho_active) + ", over " + std::to_string(k_v.size()) + " models");
  claim(2, "Math follows active parameters more than total ones", m_rho_active > m_rho_total,
        "rank correlation of math accuracy with active parameters " + rho(m_rho_active) + ", with total " +
            rho(m_rho_total));

  // What experts add at a fixed width (same active parameters, up to the router).
  details << "\n### Experts at a fixed width (the dense model of the same d)\n\n";
  for (const ModelRow& moe : rows) {
    if (!moe.spec.moe() || !moe.done()) continue;
    const ModelRow* dense = nearest_dense(rows, [&](const ModelRow& r) {
      return r.spec.d == moe.spec.d ? std::fabs(std::log(r.active / moe.active)) : std::numeric_limits<double>::infinity();
    });
    if (!dense) continue;
    details << "- " << moe.spec.name() << " (" << cell(moe.total) << " total, " << cell(moe.active) << " active) vs "
            << dense->spec.name() << " (" << cell(dense->total) << "): knowledge "
            << difference(moe.knowledge_test, dense->knowledge_test) << ", math "
            << difference(moe.math_test, dense->math_test) << ".\n";
  }
  // Figure 5: the train-test gap against the dense model nearest in total parameters.
  details << "\n### Figure 5: the math train-test gap, against the dense model nearest in total parameters\n\n";
  int gap_larger = 0, gap_larger_beyond = 0, gap_pairs = 0;
  for (const ModelRow& moe : rows) {
    if (!moe.spec.moe() || !moe.done()) continue;
    const ModelRow* dense = nearest_dense(rows, [&](const ModelRow& r) { return std::fabs(std::log(r.total / moe.total)); });
    if (!dense) continue;
    bool beyond = false;
    const std::string d = difference(moe.gap, dense->gap, &beyond);
    ++gap_pairs;
    if (mean_of(moe.gap) > mean_of(dense->gap)) ++gap_larger, gap_larger_beyond += beyond ? 1 : 0;
    details << "- " << moe.spec.name() << " (" << cell(moe.total) << " total): gap "
            << format_number(100 * mean_of(moe.gap), "%+.1f") << " against " << dense->spec.name() << " ("
            << cell(dense->total) << " total) " << format_number(100 * mean_of(dense->gap), "%+.1f") << ": " << d
            << ".\n";
  }
  claim(3, "At similar total parameters MoEs have a larger math train-test gap (Figure 5)",
        gap_pairs > 0 && 2 * gap_larger > gap_pairs,
        std::to_string(gap_larger) + " of " + std::to_string(gap_pairs) + " MoE models have a larger gap than the " +
            "dense model nearest in total parameters, " + std::to_string(gap_larger_beyond) + " beyond the spread");
  // Figure 6: at a matched validation perplexity.
  details << "\n### Figure 6: against the dense model nearest in validation perplexity\n\n";
  int k_better = 0, k_better_beyond = 0, m_tie = 0, ppl_pairs = 0;
  for (const ModelRow& moe : rows) {
    if (!moe.spec.moe() || !moe.done()) continue;
    const double p = mean_of(moe.perplexity);
    const ModelRow* dense = nearest_dense(rows, [&](const ModelRow& r) { return std::fabs(mean_of(r.perplexity) - p); });
    if (!dense) continue;
    bool k_beyond = false, m_beyond = false;
    const std::string k = difference(moe.knowledge_test, dense->knowledge_test, &k_beyond);
    const std::string m = difference(moe.math_test, dense->math_test, &m_beyond);
    ++ppl_pairs;
    if (mean_of(moe.knowledge_test) > mean_of(dense->knowledge_test)) ++k_better, k_better_beyond += k_beyond ? 1 : 0;
    if (!m_beyond) ++m_tie;
    details << "- " << moe.spec.name() << " (perplexity " << format_number(p, "%.3f") << ") vs " << dense->spec.name()
            << " (" << format_number(mean_of(dense->perplexity), "%.3f") << "): knowledge " << k << ", math " << m
            << ".\n";
  }
  claim(4, "At a matched validation perplexity MoEs do better on knowledge and tie on math (Figure 6)",
        ppl_pairs > 0 && 2 * k_better > ppl_pairs && 2 * m_tie > ppl_pairs,
        std::to_string(k_better) + " of " + std::to_string(ppl_pairs) + " MoE models beat the dense model nearest " +
            "in perplexity on knowledge (" + std::to_string(k_better_beyond) + " beyond the spread); " +
            std::to_string(m_tie) + " of " + std::to_string(ppl_pairs) + " tie with it on math (within the spread)");

  std::ostringstream summary;
  summary << "# Pre-training on synthetic knowledge and math (Mixture of Parrots, Section 5)\n\n"
          << "Preset `" << ctx.preset << "`, " << ctx.threads << (ctx.threads == 1 ? " thread" : " threads")
          << ". Settings: config.json; every run: results.csv; per model: models.csv; training curves: metrics.csv.\n\n"
          << "Corpus (one per seed, shared by every model of that seed): " << s.integer("people") << " people ("
          << s.integer("people") / 2 << " with their questions in the training text, "
          << s.integer("people") - s.integer("people") / 2 << " held out), " << s.integer("bios_per_person")
          << " biographies each; " << s.integer("math_train_problems") << " math problems of " << s.integer("min_ops")
          << " to " << s.integer("max_ops") << " operations (numbers added or subtracted up to "
          << s.integer("math_max_operand") << ", every count at most " << s.integer("math_max_value") << "); "
          << format_number(100 * s.real("math_fraction"), "%.0f")
          << "% of the training tokens are math. Tokens: "
          << (s.text("tokens") == "word" ? "words (a word piece per word of the training text; digits, spaces and "
                                           "punctuation one character each)"
                                         : "characters")
          << ". Each model trains " << s.integer("steps") << " steps of " << s.integer("batch") << " windows of "
          << s.integer("seq") << " tokens ("
          << format_number(tokens, "%.3g") << " target tokens).\n\n"
          << "Knowledge test: exact match on " << s.integer("qa_test_questions")
          << " questions about held-out people (their biographies were trained on, their questions never); knowledge "
             "train: on questions that were in the training text. Math test: exact match of the answer on "
          << s.integer("math_test_problems") << " fresh problems; math train: on " << s.integer("math_train_eval_problems")
          << " training problems; gap = train - test. Perplexity: on held-out text of the same mixture. Mean ± "
             "sample std over seeds.\n\n"
          << table.str() << "\n## In numbers\n\n"
          << "The paper's claims, each judged on the means over seeds; a difference is beyond the seeds' spread when "
             "it is larger than the two standard deviations added together"
          << (s.ints("seeds").size() < 2 ? " (with one seed there is no spread: every difference counts as beyond it, "
                                           "so decide nothing on this run alone)"
                                         : "")
          << ".\n\n"
          << verdict.str() << details.str() << "\n## Plots\n\n";
  for (const std::string& note : notes) summary << "- " << note << "\n";
  ctx.dir.write_text("summary.md", summary.str());

  std::printf("\n%s\n%s", table.str().c_str(), verdict.str().c_str());
  std::printf("summary: %s\n", ctx.dir.file("summary.md").c_str());
}

}  // namespace moelab
