// tasks/pretrain/pretrain_report.cpp — models.csv, the Figure 1/5/6 plots and summary.md of
// `moelab pretrain` (see the header).
#include "tasks/pretrain/pretrain_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "runner/plot.h"
#include "runner/report.h"
#include "runner/run_dir.h"
#include "tasks/pretrain/knowledge.h"

namespace moelab {

namespace {

// The measurements of one model, one value per seed, by results.csv column.
const char* const kMetrics[] = {"knowledge_train", "knowledge_test",  "math_unseen",    "math_test",
                                "math_train",      "math_unseen_gap", "math_gap",       "perplexity",
                                "best_perplexity", "stored_bits",     "stored_bits_per_param"};

struct ModelRow {
  ModelSpec spec;
  std::int64_t people = 0;  // the load
  double total = 0, active = 0;
  std::map<std::string, std::vector<double>> values;  // column -> one value per seed
  const std::vector<double>& operator[](const std::string& column) const {
    static const std::vector<double> none;
    const auto it = values.find(column);
    return it == values.end() ? none : it->second;
  }
  std::size_t seeds() const { return (*this)["knowledge_train"].size(); }
  bool done() const { return seeds() > 0; }
};

double mean_of(const std::vector<double>& v) { return mean_std(v).mean; }
double std_of(const std::vector<double>& v) { return mean_std(v).std; }
std::string pct(double share) { return format_number(100 * share, "%.1f"); }
std::string pct_pm(const std::vector<double>& v) { return pct(mean_of(v)) + " ± " + pct(std_of(v)); }

// "+4.2 points (beyond the seeds' spread, 3.1)": a difference of means and how it compares with
// the two spreads added. A side of one seed has no spread (its std is 0, not small), so then the
// difference is given alone: "+4.2 points (one seed on a side: no spread to compare with)".
std::string difference(const std::vector<double>& a, const std::vector<double>& b) {
  const double diff = mean_of(a) - mean_of(b), spread = std_of(a) + std_of(b);
  const std::string points = format_number(100 * diff, "%+.1f") + " points (";
  if (a.size() < 2 || b.size() < 2) return points + "one seed on a side: no spread to compare with)";
  return points + (std::fabs(diff) > spread ? "beyond" : "within") + " the seeds' spread, " +
         format_number(100 * spread, "%.1f") + ")";
}

// The dense model of `of`'s load nearest to it by `distance` (smallest), or null when there is none.
template <class Distance>
const ModelRow* nearest_dense(const std::vector<ModelRow>& rows, const ModelRow& of, Distance distance) {
  const ModelRow* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const ModelRow& r : rows)
    if (!r.spec.moe() && r.done() && r.people == of.people && distance(r) < best_distance)
      best = &r, best_distance = distance(r);
  return best;
}

}  // namespace

void write_pretrain_report(const RunContext& ctx, const std::vector<ModelSpec>& models) {
  const Settings& s = ctx.settings;
  std::vector<ModelRow> rows;  // load by load, model by model
  const std::vector<std::int64_t> loads = s.ints("people");
  for (std::int64_t people : loads)
    for (const ModelSpec& m : models) {
      ModelRow row;
      row.spec = m, row.people = people;
      rows.push_back(row);
    }
  const bool several_loads = loads.size() > 1;
  // "moe-d32-8e", with its load when there are several ("moe-d32-8e, 800 people").
  auto name_of = [&](const ModelRow& r) {
    return r.spec.name() + (several_loads ? ", " + std::to_string(r.people) + " people" : std::string());
  };
  double tokens = 0;
  for (const CsvRow& r : read_csv(ctx.dir.file("results.csv")))
    for (ModelRow& row : rows)
      // A record from before loads has no people column: its one load is the setting's.
      if (row.spec.name() == r.text("model") && row.people == (r.count("people") ? r.integer("people") : loads.front())) {
        row.total = r.real("total_params"), row.active = r.real("active_params");
        for (const char* m : kMetrics)
          row.values[m].push_back(r.count(m) ? r.real(m) : std::numeric_limits<double>::quiet_NaN());
        tokens = std::max(tokens, r.real("tokens"));
      }

  // models.csv and the table: means and spreads over seeds.
  std::ostringstream csv, table;
  csv << "model,family,d,experts,people,total_params,active_params,seeds";
  for (const char* m : kMetrics) csv << "," << m << "_mean," << m << "_std";
  csv << "\n";
  table << "| model | people | total params | active params | seeds | knowledge train (stored) | stored bits / "
           "param | corpus bits / param | knowledge test (extraction) | math unseen | math test | math train | train - "
           "unseen | perplexity (last) | perplexity (best) |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  std::vector<FamilyPoint> k_total, k_active, m_total, m_active, gap_total, gap_active, k_ppl, m_ppl, bits_total,
      bits_active;
  auto ppl = [](const std::vector<double>& v) {
    return format_number(mean_of(v), "%.3f") + " ± " + format_number(std_of(v), "%.3f");
  };
  for (ModelRow& r : rows) {
    if (!r.done()) continue;
    csv << r.spec.name() << "," << r.spec.family() << "," << r.spec.d << "," << r.spec.experts << "," << r.people
        << "," << cell(r.total)
        << "," << cell(r.active) << "," << r.seeds();
    for (const char* m : kMetrics) csv << "," << cell(mean_of(r[m])) << "," << cell(std_of(r[m]));
    csv << "\n";
    const double corpus_bits = static_cast<double>(r.people) * pretrain::person_bits();
    table << "| " << r.spec.name() << " | " << r.people << " | " << cell(r.total) << " | " << cell(r.active) << " | "
          << r.seeds() << " | " << pct_pm(r["knowledge_train"]) << "% | "
          << format_number(mean_of(r["stored_bits_per_param"]), "%.2f") << " ± "
          << format_number(std_of(r["stored_bits_per_param"]), "%.2f") << " | "
          << format_number(corpus_bits / r.total, "%.2f") << " | " << pct_pm(r["knowledge_test"]) << "% | "
          << pct_pm(r["math_unseen"])
          << "% | " << pct_pm(r["math_test"]) << "% | " << pct_pm(r["math_train"]) << "% | "
          << format_number(100 * mean_of(r["math_unseen_gap"]), "%+.1f") << " | " << ppl(r["perplexity"]) << " | "
          << ppl(r["best_perplexity"]) << " |\n";
    const std::string f = r.spec.family() + (several_loads ? ", " + std::to_string(r.people) + " people" : "");
    // Bars: mean +- sample std over seeds (none with one seed), in points.
    auto point = [&](double x, const std::vector<double>& v) {
      const MeanStd m = mean_std(v);
      const bool bars = v.size() > 1;
      return FamilyPoint{f, x, 100 * m.mean, bars ? 100 * (m.mean - m.std) : NAN, bars ? 100 * (m.mean + m.std) : NAN};
    };
    k_total.push_back(point(r.total, r["knowledge_train"]));
    k_active.push_back(point(r.active, r["knowledge_train"]));
    // Stored bits in thousands (point() scales by 100 for percent: undo it).
    auto kbits = [&](double x) {
      FamilyPoint q = point(x, r["stored_bits"]);
      q.y /= 1e5, q.low /= 1e5, q.high /= 1e5;
      return q;
    };
    bits_total.push_back(kbits(r.total));
    bits_active.push_back(kbits(r.active));
    m_total.push_back(point(r.total, r["math_unseen"]));
    m_active.push_back(point(r.active, r["math_unseen"]));
    gap_total.push_back(point(r.total, r["math_unseen_gap"]));
    gap_active.push_back(point(r.active, r["math_unseen_gap"]));
    k_ppl.push_back(point(mean_of(r["best_perplexity"]), r["knowledge_train"]));
    m_ppl.push_back(point(mean_of(r["best_perplexity"]), r["math_unseen"]));
  }
  ctx.dir.write_text("models.csv", csv.str());

  // The plots, each beside the paper's figure.
  std::vector<std::string> notes;
  for (const std::string& n :
       plot_against_parameters(ctx.dir.path(), "fig1_knowledge", "Stored knowledge (trained people's questions)",
                               "exact match (%), mean over seeds, bars: +- std", k_total, k_active))
    notes.push_back(n);
  for (const std::string& n :
       plot_against_parameters(ctx.dir.path(), "stored_bits", "Stored facts (trained people), per corpus size",
                               "thousands of bits stored, mean over seeds, bars: +- std", bits_total, bits_active))
    notes.push_back(n);
  for (const std::string& n :
       plot_against_parameters(ctx.dir.path(), "fig1_math", "Math on unseen equations",
                               "exact match (%), mean over seeds, bars: +- std", m_total, m_active))
    notes.push_back(n);
  for (const std::string& n :
       plot_against_parameters(ctx.dir.path(), "fig5_gap", "Math train - unseen accuracy",
                               "train minus unseen (points), mean over seeds, bars: +- std", gap_total, gap_active))
    notes.push_back(n);
  for (const auto& [stem, title, points] :
       {std::tuple{"fig6_knowledge", "Stored knowledge against the best validation perplexity", &k_ppl},
        std::tuple{"fig6_math", "Unseen math against the best validation perplexity", &m_ppl}}) {
    const LinePlot p{.title = title, .xlabel = "best validation perplexity of the run (mean over seeds)",
                     .ylabel = "exact match (%), mean over seeds, bars: +- std", .series = series_by_family(*points)};
    const PlotResult r = plot_lines(p, ctx.dir.path(), stem);
    notes.push_back(r.drawn ? r.png.filename().string() : "(no PNG: " + r.message + ")");
  }

  // Pairs of models, in numbers only: the verdicts are the Claims section's (moelab claims).
  std::ostringstream details;
  // What experts add at a fixed width (same active parameters, up to the router).
  details << "### Experts at a fixed width (the dense model of the same d)\n\n";
  for (const ModelRow& moe : rows) {
    if (!moe.spec.moe() || !moe.done()) continue;
    const ModelRow* dense = nearest_dense(rows, moe, [&](const ModelRow& r) {
      return r.spec.d == moe.spec.d ? std::fabs(std::log(r.active / moe.active)) : std::numeric_limits<double>::infinity();
    });
    if (!dense) continue;
    details << "- " << name_of(moe) << " (" << cell(moe.total) << " total, " << cell(moe.active) << " active) vs "
            << name_of(*dense) << " (" << cell(dense->total) << "): stored knowledge "
            << difference(moe["knowledge_train"], (*dense)["knowledge_train"]) << ", unseen math "
            << difference(moe["math_unseen"], (*dense)["math_unseen"]) << ".\n";
  }
  // Figure 5: the train-unseen gap against the dense model nearest in total parameters.
  details << "\n### Figure 5: the math train - unseen gap, against the dense model nearest in total parameters\n\n";
  for (const ModelRow& moe : rows) {
    if (!moe.spec.moe() || !moe.done()) continue;
    const ModelRow* dense = nearest_dense(rows, moe, [&](const ModelRow& r) { return std::fabs(std::log(r.total / moe.total)); });
    if (!dense) continue;
    details << "- " << name_of(moe) << " (" << cell(moe.total) << " total): gap "
            << format_number(100 * mean_of(moe["math_unseen_gap"]), "%+.1f") << " against " << name_of(*dense)
            << " (" << cell(dense->total) << " total) "
            << format_number(100 * mean_of((*dense)["math_unseen_gap"]), "%+.1f") << ": "
            << difference(moe["math_unseen_gap"], (*dense)["math_unseen_gap"]) << ".\n";
  }
  // Figure 6: at a matched best validation perplexity.
  details << "\n### Figure 6: against the dense model nearest in best validation perplexity\n\n";
  for (const ModelRow& moe : rows) {
    if (!moe.spec.moe() || !moe.done()) continue;
    const double p = mean_of(moe["best_perplexity"]);
    const ModelRow* dense =
        nearest_dense(rows, moe, [&](const ModelRow& r) { return std::fabs(mean_of(r["best_perplexity"]) - p); });
    if (!dense) continue;
    details << "- " << name_of(moe) << " (best perplexity " << format_number(p, "%.3f") << ") vs "
            << name_of(*dense) << " (" << format_number(mean_of((*dense)["best_perplexity"]), "%.3f")
            << "): stored knowledge " << difference(moe["knowledge_train"], (*dense)["knowledge_train"])
            << ", unseen math " << difference(moe["math_unseen"], (*dense)["math_unseen"]) << ".\n";
  }

  std::string loads_text;  // "400, 800 and 1600"
  for (std::size_t i = 0; i < loads.size(); ++i)
    loads_text += (i == 0 ? "" : i + 1 == loads.size() ? " and " : ", ") + std::to_string(loads[i]);
  std::ostringstream summary;
  summary << "# Pre-training on synthetic knowledge and math (Mixture of Parrots, Section 5)\n\n"
          << "Preset `" << ctx.preset << "`, " << ctx.threads << (ctx.threads == 1 ? " thread" : " threads")
          << ". Settings: config.json; every run: results.csv; per model: models.csv; training curves: metrics.csv.\n\n"
          << "Corpus (one per load and seed, shared by every model of that load and seed): " << loads_text
          << " people (half with their questions in the training text, half held out; a person's facts hold "
          << format_number(pretrain::person_bits(), "%.1f") << " bits), " << s.integer("bios_per_person")
          << " biographies each; " << s.integer("math_train_problems") << " math problems of " << s.integer("min_ops")
          << " to " << s.integer("max_ops") << " operations (numbers added or subtracted up to "
          << s.integer("math_max_operand") << ", every count at most " << s.integer("math_max_value") << "); "
          << format_number(100 * s.real("math_fraction"), "%.0f")
          << "% of the training tokens are math. Tokens: "
          << (s.text("tokens") == "word" ? "words (a word piece per word of the training text; digits, spaces and "
                                           "punctuation one character each)"
                                         : "characters")
          << ". Each model trains "
          << (s.real("passes") > 0 ? "the steps that read the knowledge text " + format_number(s.real("passes"), "%g") +
                                         " times at its load"
                                   : std::to_string(s.integer("steps")) + " steps")
          << " of " << s.integer("batch") << " windows of "
          << s.integer("seq") << " tokens ("
          << format_number(tokens, "%.3g") << " target tokens at most).\n\n"
          << "Knowledge train (stored facts, what the claims are judged on): exact match on "
          << s.integer("qa_train_eval_questions")
          << " questions that were in the training text; knowledge test (extraction): on "
          << s.integer("qa_test_questions")
          << " questions about held-out people (their biographies were trained on, their questions never). Math "
             "unseen (what the claims are judged on): exact match of the answer on "
          << s.integer("math_unseen_test_problems") << " fresh problems every equation of which was held out of "
          << "training (" << format_number(100 * s.real("math_unseen_share"), "%.0f")
          << "% of all equations are); math test: on " << s.integer("math_test_problems")
          << " fresh problems drawn as the training ones (seen equations); math train: on "
          << s.integer("math_train_eval_problems")
          << " training problems. Perplexity: on held-out text of the same mixture, after the last step and the "
             "lowest of the run (Fig. 6 matches on it). Mean ± sample std over seeds.\n\n"
          << table.str() << "\n## Comparisons\n\n"
          << "Pairs of models in numbers (mean differences against the two seeds' stds added); the paper's claims "
             "are judged in the Claims section.\n\n"
          << details.str() << "\n## Plots\n\n";
  for (const std::string& note : notes) summary << "- " << note << "\n";
  ctx.dir.write_text("summary.md", summary.str());

  std::printf("\n%s\n", table.str().c_str());
  std::printf("summary: %s\n", ctx.dir.file("summary.md").c_str());
}

}  // namespace moelab
