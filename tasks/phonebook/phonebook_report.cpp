// tasks/phonebook/phonebook_report.cpp — see phonebook_report.h.
#include "tasks/phonebook/phonebook_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <sstream>

#include "runner/job_grid.h"
#include "tasks/common/routing_log.h"
#include "runner/plot.h"
#include "runner/report.h"

namespace moelab {

std::vector<PhonebookPoint> phonebook_grid(const std::vector<ModelSpec>& models, const std::vector<std::int64_t>& seeds,
                                           const std::vector<std::int64_t>& sizes) {
  std::vector<PhonebookPoint> out;
  for (std::size_t m = 0; m < models.size(); ++m)
    for (std::int64_t seed : seeds)
      for (std::int64_t n : sizes)
        out.push_back({m, seed, n, models[m].name() + "-N" + std::to_string(n) + "-seed" + std::to_string(seed)});
  return out;
}

std::vector<BookState> walk_books(const std::vector<std::optional<double>>& best, double threshold,
                                  std::int64_t stop_after_failures) {
  std::vector<BookState> out;
  std::int64_t failures = 0;
  bool waiting = false;  // a missing point was reached: what follows is unknown
  for (const std::optional<double>& b : best) {
    if (waiting) {
      out.push_back(BookState::Unknown);
    } else if (failures >= stop_after_failures) {
      out.push_back(BookState::Skipped);
    } else if (!b) {
      out.push_back(BookState::Missing);
      waiting = true;
    } else {
      out.push_back(BookState::Counted);
      failures = *b >= threshold ? 0 : failures + 1;
    }
  }
  return out;
}

namespace {

struct ModelRow {
  ModelSpec spec;
  double total = 0, active = 0;
  std::map<std::int64_t, std::vector<double>> best;  // book size -> best exact match of each seed that counts it
  std::vector<std::int64_t> seeds;                    // the seeds with a counted point
  std::vector<double> capacity;                       // per seed in `seeds`: the largest book memorized (0: none)
  double median_capacity = 0;
  bool complete = true;  // every seed's walk ended (no point it needs is missing)
};

std::string list_text(const std::vector<double>& v) {
  std::string out;
  for (double x : v) out += (out.empty() ? "" : ", ") + cell(x);
  return out;
}

}  // namespace

int write_phonebook_report(const RunContext& ctx, const std::vector<ModelSpec>& models,
                           const std::vector<PhonebookPoint>& points) {
  const Settings& s = ctx.settings;
  const double threshold = s.real("threshold");
  const std::vector<std::int64_t> sizes = s.ints("book_sizes");
  std::vector<ModelRow> rows;
  for (const ModelSpec& m : models) rows.push_back({m, 0, 0, {}, {}, {}, 0, true});

  // Every (model, seed) block of the grid walked as mode=all walks it; only Counted points count.
  std::ostringstream results, beyond;
  results << "model,family,d,experts,k,total_params,active_params,book_size,seed,lr,epochs,steps,exact_match,"
             "digit_accuracy,final_loss,seconds\n";
  std::vector<std::string> counted_names;
  std::size_t missing = 0, beyond_count = 0;
  for (std::size_t first = 0; first < points.size(); first += sizes.size()) {
    std::vector<std::optional<nlohmann::json>> done;
    std::vector<std::optional<double>> best;
    for (std::size_t i = first; i < first + sizes.size(); ++i) {
      done.push_back(read_point(ctx.dir, points[i].name));
      best.push_back(done.back() ? std::optional<double>(done.back()->at("best_exact_match").get<double>()) : std::nullopt);
    }
    const std::vector<BookState> walk = walk_books(best, threshold, s.integer("stop_after_failures"));
    ModelRow& row = rows[points[first].model];
    double capacity = 0;
    bool any = false;
    for (std::size_t b = 0; b < sizes.size(); ++b) {
      const PhonebookPoint& p = points[first + b];
      if (walk[b] == BookState::Missing || walk[b] == BookState::Unknown) row.complete = false, ++missing;
      if (walk[b] == BookState::Skipped && done[b]) {  // run as a job past the stop: not counted
        beyond << p.name << "," << cell(*best[b]) << "\n";
        ++beyond_count;
      }
      if (walk[b] != BookState::Counted) continue;
      const nlohmann::json& j = *done[b];
      any = true;
      counted_names.push_back(p.name);
      row.total = j.at("total_params").get<double>(), row.active = j.at("active_params").get<double>();
      row.best[p.book_size].push_back(*best[b]);
      if (*best[b] >= threshold) capacity = std::max(capacity, static_cast<double>(p.book_size));
      for (const auto& r : j.at("runs"))
        results << j.at("model").get<std::string>() << "," << j.at("family").get<std::string>() << "," << cell(j.at("d"))
                << "," << cell(j.at("experts")) << "," << cell(j.at("k")) << "," << cell(row.total) << ","
                << cell(row.active) << "," << p.book_size << "," << p.seed << "," << cell(r.at("lr")) << ","
                << cell(r.at("epochs")) << "," << cell(r.at("steps")) << "," << cell(r.at("exact_match")) << ","
                << cell(r.at("digit_accuracy")) << "," << cell(r.at("final_loss")) << "," << cell(r.at("seconds"))
                << "\n";
    }
    if (any) row.seeds.push_back(points[first].seed), row.capacity.push_back(capacity);
  }
  for (ModelRow& r : rows) r.median_capacity = r.capacity.empty() ? 0 : median(r.capacity);
  ctx.dir.write_text("results.csv", results.str());
  ctx.dir.write_text("metrics.csv", gather_curves(ctx.dir, counted_names));
  write_routing_report(ctx.dir, counted_names);  // routing.csv and its plots (MoE points)
  if (beyond_count > 0) {
    ctx.dir.write_text("beyond_stop.csv", "point,best_exact_match\n" + beyond.str());
    std::printf("%zu finished points lie beyond the stop rule (larger books after a failure) and are not counted: "
                "beyond_stop.csv\n", beyond_count);
  } else {
    std::filesystem::remove(ctx.dir.file("beyond_stop.csv"));  // derived: none now
  }

  // capacity.csv (rewritten whole: it is derived).
  std::ostringstream cap;
  cap << "model,family,d,experts,total_params,active_params,seeds,largest_book_memorized,per_seed\n";
  for (const ModelRow& r : rows) {
    std::string per_seed;
    for (double c : r.capacity) per_seed += (per_seed.empty() ? "" : " ") + cell(c);
    cap << r.spec.name() << "," << r.spec.family() << "," << r.spec.d << "," << r.spec.experts << "," << cell(r.total)
        << "," << cell(r.active) << "," << r.capacity.size() << "," << cell(r.median_capacity) << "," << per_seed << "\n";
  }
  ctx.dir.write_text("capacity.csv", cap.str());

  // The accuracy table (markdown; also printed): the median over the seeds that reach a size.
  std::size_t seeds_max = 0;
  for (const ModelRow& r : rows) seeds_max = std::max(seeds_max, r.capacity.size());
  std::vector<std::int64_t> shown;
  for (std::int64_t n : sizes)
    for (const ModelRow& r : rows)
      if (r.best.count(n) && std::find(shown.begin(), shown.end(), n) == shown.end()) shown.push_back(n);
  std::ostringstream table;
  table << "| model | total params | active params |";
  for (std::int64_t n : shown) table << " N=" << n << " |";
  table << " largest memorized |" << (seeds_max > 1 ? " per seed |" : "") << "\n|---|---:|---:|";
  for (std::size_t i = 0; i < shown.size(); ++i) table << "---:|";
  table << "---:|" << (seeds_max > 1 ? "---|" : "") << "\n";
  for (const ModelRow& r : rows) {
    table << "| " << r.spec.name() << " | " << cell(r.total) << " | " << cell(r.active) << " |";
    for (std::int64_t n : shown) {
      table << " ";
      if (!r.best.count(n)) {
        table << "-";
      } else {
        table << format_number(100 * median(r.best.at(n)), "%.1f%%");
        if (r.best.at(n).size() < r.capacity.size())
          table << " (" << r.best.at(n).size() << " of " << r.capacity.size() << ")";
      }
      table << " |";
    }
    table << " " << cell(r.median_capacity) << (r.complete ? "" : " (incomplete)") << " |";
    if (seeds_max > 1) table << " " << list_text(r.capacity) << " |";
    table << "\n";
  }

  // Figure 4a: one line per family, against total and against active parameters.
  std::vector<FamilyPoint> by_total, by_active;
  for (const ModelRow& r : rows) {
    if (r.best.empty()) continue;
    // Bars: the seeds' range (a 1 - 2/2^seeds interval for the median, runner/statistics.h).
    const bool bars = r.capacity.size() > 1;
    const double low = bars ? *std::min_element(r.capacity.begin(), r.capacity.end()) : NAN;
    const double high = bars ? *std::max_element(r.capacity.begin(), r.capacity.end()) : NAN;
    by_total.push_back({r.spec.family(), r.total, r.median_capacity, low, high});
    by_active.push_back({r.spec.family(), r.active, r.median_capacity, low, high});
  }
  const std::vector<std::string> plot_notes = plot_against_parameters(
      ctx.dir.path(), "fig4a", "Largest phone-book memorized (>= " + format_number(100 * threshold, "%.0f") + "% exact)",
      seeds_max > 1 ? "largest book memorized (entries), median over seeds, bars: their range"
                    : "largest book memorized (entries)",
      by_total, by_active);

  // The verdict in numbers. Equal active parameters: within 10% (MoE models of one width differ
  // only by their routers). Without such a dense model, the dense model of the same width
  // (fewer active parameters) is the comparison.
  // Beyond the spread: every seed of the MoE model memorizes a larger book than every seed of the
  // dense model (the smallest per-seed capacity of one above the largest of the other).
  std::ostringstream verdict;
  int wins = 0, clear_wins = 0, comparisons = 0;
  bool equal_active = false;
  for (const ModelRow& moe : rows)
    for (const ModelRow& dense : rows)
      if (moe.spec.moe() && !dense.spec.moe() && !moe.best.empty() && !dense.best.empty() &&
          std::fabs(moe.active - dense.active) <= 0.1 * dense.active)
        equal_active = true;
  for (const ModelRow& moe : rows) {
    if (!moe.spec.moe() || moe.best.empty()) continue;
    for (const ModelRow& dense : rows) {
      if (dense.spec.moe() || dense.best.empty()) continue;
      const bool paired = equal_active ? std::fabs(moe.active - dense.active) <= 0.1 * dense.active
                                       : dense.spec.d == moe.spec.d && dense.spec.ffn == 0;
      if (!paired) continue;
      ++comparisons;
      const bool win = moe.median_capacity > dense.median_capacity;
      const bool clear = *std::min_element(moe.capacity.begin(), moe.capacity.end()) >
                         *std::max_element(dense.capacity.begin(), dense.capacity.end());
      wins += win;
      clear_wins += win && clear;
      verdict << "- " << moe.spec.name() << " (" << cell(moe.active) << " active, " << cell(moe.total)
              << " total) memorizes " << cell(moe.median_capacity) << " entries"
              << (moe.capacity.size() > 1 ? " (median; seeds: " + list_text(moe.capacity) + ")" : "") << "; "
              << dense.spec.name() << " (" << cell(dense.active) << " active = total) memorizes "
              << cell(dense.median_capacity)
              << (dense.capacity.size() > 1 ? " (seeds: " + list_text(dense.capacity) + ")" : "")
              << (seeds_max < 2 || !win ? "." : clear ? ": larger for every seed." : ": larger by the median, within the seeds' spread.")
              << "\n";
    }
  }
  std::vector<double> cap_v, tot_v, act_v;
  for (const ModelRow& r : rows)
    if (r.median_capacity > 0) cap_v.push_back(r.median_capacity), tot_v.push_back(r.total), act_v.push_back(r.active);
  const double rho_total = rank_correlation(cap_v, tot_v), rho_active = rank_correlation(cap_v, act_v);
  verdict << "- Rank correlation of the largest book memorized with total parameters: " << format_number(rho_total, "%.2f")
          << "; with active parameters: " << format_number(rho_active, "%.2f") << " (over " << cap_v.size()
          << " models with a nonzero capacity).\n";
  std::string ranking;
  if (!std::isfinite(rho_total) || !std::isfinite(rho_active))
    ranking = " (too few models with a nonzero capacity to rank).";
  else if (rho_total > rho_active + 1e-9)
    ranking = ", and capacity ranks with total parameters (rho " + format_number(rho_total, "%.2f") +
              ") more closely than with active ones (" + format_number(rho_active, "%.2f") + ").";
  else if (rho_total < rho_active - 1e-9)
    ranking = "; capacity ranks with active parameters (rho " + format_number(rho_active, "%.2f") +
              ") more closely than with total ones (" + format_number(rho_total, "%.2f") + ").";
  else
    ranking = "; in this grid the models rank the same by total and by active parameters (rho " +
              format_number(rho_total, "%.2f") + " with both), so the ranking alone cannot tell them apart.";
  std::string conclusion;
  if (comparisons == 0)
    conclusion = "No MoE model has a dense model to compare with in this sweep.";
  else
    conclusion = std::to_string(wins) + " of " + std::to_string(comparisons) + " MoE models memorize a larger book than " +
                 (equal_active ? "a dense model with the same active parameters (within 10%)"
                               : "the dense model of the same width (which has fewer active parameters)") +
                 (seeds_max > 1 ? " by the median over seeds, " + std::to_string(clear_wins) + " of them for every seed" : "") +
                 ranking;
  if (std::any_of(rows.begin(), rows.end(), [](const ModelRow& r) { return !r.complete; }))
    conclusion += " Some points are missing (capacities marked incomplete): run them, then --set mode=report.";

  std::ostringstream summary;
  summary << "# Phone-book memorization (Mixture of Parrots, Figure 4a)\n\n"
          << "Preset `" << ctx.preset << "`, run seed " << ctx.seed << ", seeds " << s.to_json()["seeds"].dump() << ", "
          << ctx.threads << (ctx.threads == 1 ? " thread" : " threads")
          << ". Settings: config.json. One file per point: points/<name>.json; every run: results.csv; training "
             "curves: metrics.csv.\n\n"
          << "Exact-match accuracy on the test names (best over learning rates and budgets; the median over the seeds "
             "that reach the size, with their count when some seeds stopped earlier); a book counts as memorized at >= "
          << format_number(100 * threshold, "%.0f") << "%. A model stops at the first " << s.integer("stop_after_failures")
          << " failed size(s) in a row; its capacity for a seed is the largest book memorized before that, and the "
             "\"largest memorized\" column is the median over seeds.\n\n"
          << table.str() << "\n## Comparisons\n\n"
          << "The numbers behind the Claims section, pair by pair; the paper's claims are judged there only (`moelab claims --check` recomputes that section from the CSV files).\n\n"
          << (seeds_max > 1 ? "The rule: an MoE model memorizes more than a dense one when its median capacity over seeds "
                              "is larger; beyond the seeds' spread when its smallest per-seed capacity is larger than the "
                              "dense model's largest.\n\n"
                            : "")
          << conclusion << "\n\n" << verdict.str() << "\n## Plots\n\n";
  for (const std::string& n : plot_notes) summary << "- " << n << "\n";
  ctx.dir.write_text("summary.md", summary.str());

  std::printf("\n%s\n%s\n", table.str().c_str(), conclusion.c_str());
  for (const std::string& n : plot_notes) std::printf("plot: %s\n", n.c_str());
  std::printf("summary: %s\n", ctx.dir.file("summary.md").c_str());
  return 0;
}

}  // namespace moelab
