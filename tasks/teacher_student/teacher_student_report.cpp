// tasks/teacher_student/teacher_student_report.cpp — see teacher_student_report.h.
#include "tasks/teacher_student/teacher_student_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "runner/job_grid.h"
#include "runner/plot.h"
#include "runner/report.h"
#include "tasks/common/router_settings.h"
#include "runner/run_dir.h"

namespace moelab::teacher_student {

std::vector<GridPoint> grid(const Settings& s) {
  const std::int64_t d = s.integer("d");
  std::vector<GridPoint> out;
  for (std::int64_t tk : s.ints("teacher_k"))
    for (std::int64_t tr : s.ints("teacher_ratios")) {
      MoESpec t = spec_for(tk, tr, s.integer("teacher_active"), d);
      t.gates = s.text("teacher_gates");
      t.router_bias = false;  // the teacher's router has no bias (the paper's code)
      for (std::int64_t sk : s.ints("student_k"))
        for (std::int64_t sr : s.ints("student_ratios")) {
          MoESpec st = spec_for(sk, sr, s.integer("student_active"), d);
          st.gates = s.text("student_gates");
          st.router_bias = s.flag("student_router_bias");
          st.router = s.text("router");
          st.router_options = parse_router_options(s.text("router_options"));
          for (std::int64_t seed : s.ints("seeds")) out.push_back({t, st, seed});
        }
    }
  return out;
}

namespace {

struct Done {
  GridPoint p;
  double loss = NAN, relative_size = 0, best_lr = 0, seconds = 0;
  std::int64_t best_epoch = 0;
};

// One (teacher, student) pair over its finished seeds.
struct Cell {
  MoESpec teacher, student;
  double relative_size = 0;
  std::vector<double> losses;  // one per finished seed; +inf: every run of that seed diverged
  MeanStd loss;                // over the seeds (+inf when a seed diverged); sample std
};

// Three decimals (two significant digits below 0.01, where fitted students sit); "diverged" for a
// point whose every run diverged (its loss is stored as null), "-" for a missing one.
std::string f3(double v) {
  if (std::isfinite(v)) return format_number(v, std::fabs(v) < 0.01 && v != 0 ? "%.1e" : "%.3f");
  return std::isinf(v) ? "diverged" : "-";
}

// "0.012 ± 0.003" over several seeds, "0.012" for one.
std::string f3s(const Cell& c) {
  return f3(c.loss.mean) + (c.losses.size() > 1 && std::isfinite(c.loss.mean) ? " ± " + f3(c.loss.std) : "");
}

}  // namespace

std::size_t write_report(const RunContext& ctx, const std::vector<GridPoint>& points) {
  std::vector<Done> done;
  std::size_t missing = 0;
  for (const GridPoint& p : points) {
    const std::optional<nlohmann::json> read = read_point(ctx.dir, p.name());
    if (!read) {
      ++missing;
      continue;
    }
    const nlohmann::json& j = *read;
    Done d{p};
    d.loss = j.at("normalised_loss").is_number() ? j.at("normalised_loss").get<double>() : INFINITY;
    d.relative_size = j.at("relative_size").get<double>();
    d.best_lr = j.at("best_lr").get<double>();
    d.seconds = j.at("seconds").get<double>();
    for (const auto& r : j.at("runs"))
      if (r.at("lr").get<double>() == d.best_lr) d.best_epoch = r.at("best_epoch").get<std::int64_t>();
    done.push_back(d);
  }

  // results.csv (derived, rewritten whole; grid order, whatever order the points ran in).
  std::ostringstream csv;
  csv << "point,seed,teacher,teacher_k,teacher_experts,teacher_width,teacher_parameters,student,student_k,"
         "student_experts,student_width,student_router_bias,student_parameters,relative_size,normalised_loss,"
         "best_lr,best_epoch,seconds\n";
  for (const Done& d : done)
    csv << d.p.name() << "," << d.p.seed << "," << d.p.teacher.name() << "," << d.p.teacher.k << ","
        << d.p.teacher.experts << "," << d.p.teacher.width << "," << d.p.teacher.total_parameters() << ","
        << d.p.student.name() << "," << d.p.student.k << "," << d.p.student.experts << "," << d.p.student.width << ","
        << (d.p.student.router_bias ? "true" : "false") << "," << d.p.student.total_parameters() << ","
        << cell(d.relative_size) << "," << cell(d.loss) << "," << cell(d.best_lr) << "," << d.best_epoch << ","
        << cell(d.seconds) << "\n";
  ctx.dir.write_text("results.csv", csv.str());

  // Rows: teachers; columns: students (in grid order); a cell: the mean over its finished seeds.
  std::vector<std::string> teachers, students;
  std::map<std::string, MoESpec> teacher_spec, student_spec;
  for (const GridPoint& p : points) {
    if (!teacher_spec.count(p.teacher.name())) teachers.push_back(p.teacher.name()), teacher_spec[p.teacher.name()] = p.teacher;
    if (!student_spec.count(p.student.name())) students.push_back(p.student.name()), student_spec[p.student.name()] = p.student;
  }
  std::map<std::pair<std::string, std::string>, Cell> at;
  std::vector<const Cell*> cells;  // in grid order
  for (const Done& d : done) {
    Cell& c = at[{d.p.teacher.name(), d.p.student.name()}];
    if (c.losses.empty()) c.teacher = d.p.teacher, c.student = d.p.student, c.relative_size = d.relative_size;
    c.losses.push_back(d.loss);
  }
  for (const GridPoint& p : points) {
    const auto it = at.find({p.teacher.name(), p.student.name()});
    if (it != at.end() && std::find(cells.begin(), cells.end(), &it->second) == cells.end()) cells.push_back(&it->second);
  }
  std::size_t seeds_max = 0;
  for (auto& [key, c] : at) {
    bool diverged = false;
    for (double l : c.losses) diverged |= !std::isfinite(l);
    c.loss = diverged ? MeanStd{INFINITY, 0} : mean_std(c.losses);
    seeds_max = std::max(seeds_max, c.losses.size());
  }

  std::ostringstream table;
  table << "| teacher \\ student |";
  for (const std::string& s : students) table << " " << s << " |";
  table << "\n|---|";
  for (std::size_t i = 0; i < students.size(); ++i) table << "---:|";
  table << "\n";
  for (const std::string& t : teachers) {
    table << "| " << t << " |";
    for (const std::string& s : students) {
      const auto it = at.find({t, s});
      table << " " << (it == at.end() ? "-" : f3s(it->second)) << " |";
    }
    table << "\n";
  }

  std::vector<std::string> plot_notes;
  if (students.size() >= 2 && teachers.size() >= 2) {  // gnuplot draws no colours for a single row
    HeatMap h{.title = "Normalised test loss (test MSE / zero predictor's MSE)" +
                       std::string(seeds_max > 1 ? ", mean ± std over seeds" : ""),
              .xlabel = "student architecture",
              .ylabel = "teacher architecture",
              .column_labels = students,
              .row_labels = teachers,
              .values = {}};
    for (const std::string& t : teachers) {
      std::vector<double> row, spread;  // mean and std over seeds
      for (const std::string& s : students) {
        const auto it = at.find({t, s});
        row.push_back(it == at.end() || !std::isfinite(it->second.loss.mean) ? NAN : it->second.loss.mean);
        spread.push_back(it == at.end() || seeds_max < 2 ? NAN : it->second.loss.std);
      }
      h.values.push_back(row);
      if (seeds_max > 1) h.spread.push_back(spread);
    }
    const PlotResult r = plot_heat_map(h, ctx.dir.path(), "fig2_heat_map");
    plot_notes.push_back(r.drawn ? r.png.filename().string() : "(no PNG: " + r.message + ")");
  }
  std::map<std::int64_t, int> sizes_per_k;
  for (const std::string& s : students) ++sizes_per_k[student_spec[s].k];
  bool size_plot = false;
  for (const auto& [k, n] : sizes_per_k) size_plot |= n >= 2;
  if (size_plot && !cells.empty()) {
    std::vector<FamilyPoint> fp;
    for (const Cell* c : cells)
      if (std::isfinite(c->loss.mean))
        fp.push_back({(teachers.size() > 1 ? "teacher " + c->teacher.name() + ", " : std::string()) + "granularity " +
                          std::to_string(c->student.k),
                      c->relative_size, c->loss.mean, c->loss.mean - c->loss.std, c->loss.mean + c->loss.std});
    const LinePlot lp{.title = "Loss vs student size (teacher " + (teachers.size() == 1 ? teachers[0] : std::string("s")) + ")",
                      .xlabel = "student total parameters / teacher total parameters",
                      .ylabel = seeds_max > 1 ? "normalised test loss, mean over seeds, bars: +- std" : "normalised test loss",
                      .log_x = true,
                      .log_y = false,
                      .series = series_by_family(fp)};
    const PlotResult r = plot_lines(lp, ctx.dir.path(), "fig3_size");
    plot_notes.push_back(r.drawn ? r.png.filename().string() : "(no PNG: " + r.message + ")");
  }

  // The verdict: per teacher, students with k' >= k against students with k' < k (means over
  // seeds); the gap exceeds the spread when the worst fine-enough student's mean + std is below
  // the best coarser student's mean - std.
  std::ostringstream verdict;
  int separated = 0, beyond_spread = 0, compared = 0;
  std::vector<double> fine_all, coarse_all;
  for (const std::string& t : teachers) {
    const std::int64_t k = teacher_spec[t].k;
    std::vector<double> fine, coarse;
    const Cell *worst_fine = nullptr, *best_coarse = nullptr;
    for (const std::string& s : students) {
      const auto it = at.find({t, s});
      if (it == at.end()) continue;
      const Cell& c = it->second;
      if (student_spec[s].k >= k) {
        fine.push_back(c.loss.mean);
        if (!worst_fine || c.loss.mean > worst_fine->loss.mean) worst_fine = &c;
      } else {
        coarse.push_back(c.loss.mean);
        if (!best_coarse || c.loss.mean < best_coarse->loss.mean) best_coarse = &c;
      }
    }
    if (fine.empty() || coarse.empty()) {
      verdict << "- teacher " << t << ": " << fine.size() << " students with k' >= " << k << ", " << coarse.size()
              << " with k' < " << k << " (nothing to compare).\n";
      continue;
    }
    ++compared;  // the means below pool only teachers with students on both sides
    fine_all.insert(fine_all.end(), fine.begin(), fine.end());
    coarse_all.insert(coarse_all.end(), coarse.begin(), coarse.end());
    const bool sep = worst_fine->loss.mean < best_coarse->loss.mean;
    const bool beyond = worst_fine->loss.mean + worst_fine->loss.std < best_coarse->loss.mean - best_coarse->loss.std;
    separated += sep;
    beyond_spread += sep && beyond;
    verdict << "- teacher " << t << ": students with k' >= " << k << " reach " << f3(mean_std(fine).mean)
            << " on average (worst " << worst_fine->student.name() << " " << f3s(*worst_fine) << "); students with k' < "
            << k << " reach " << f3(mean_std(coarse).mean) << " (best " << best_coarse->student.name() << " "
            << f3s(*best_coarse) << ")"
            << (!sep ? " — the groups overlap.\n"
                     : beyond ? " — every fine-enough student beats every coarser one, beyond the seeds' spread.\n"
                              : " — every fine-enough student beats every coarser one, but within the seeds' spread.\n");
  }
  std::string conclusion;
  if (compared == 0) {
    conclusion = "No teacher has finished students on both sides of its granularity yet (" + std::to_string(done.size()) +
                 " of " + std::to_string(points.size()) + " points done).";
  } else {
    const double mf = mean_std(fine_all).mean, mc = mean_std(coarse_all).mean;
    conclusion = "For " + std::to_string(separated) + " of " + std::to_string(compared) +
                 " teachers every student with granularity k' >= k has a lower normalised loss (mean over seeds) than "
                 "every student with k' < k (mean over those teachers' students " + f3(mf) + " against " + f3(mc) + "); " +
                 (seeds_max > 1 ? "for " + std::to_string(beyond_spread) + " of " + std::to_string(compared) +
                                      " the gap exceeds the seeds' spread"
                                : std::string("one seed per pair, so no spread to compare the gap with")) +
                 " (" + std::to_string(done.size()) + " of " + std::to_string(points.size()) + " points done).";
  }

  // Figure 3's reading: the largest too-coarse student against the smallest fine-enough one.
  std::ostringstream sizes;
  if (size_plot) {
    sizes << "\n## Loss against student size\n\n| teacher | student | k' | relative size | seeds | normalised loss |\n"
             "|---|---|---:|---:|---:|---:|\n";
    std::vector<const Cell*> sorted = cells;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Cell* a, const Cell* b) {
      return a->student.k != b->student.k ? a->student.k < b->student.k : a->relative_size < b->relative_size;
    });
    for (const Cell* c : sorted)
      sizes << "| " << c->teacher.name() << " | " << c->student.name() << " | " << c->student.k << " | "
            << format_number(c->relative_size, "%.2f") << " | " << c->losses.size() << " | " << f3s(*c) << " |\n";
    for (const std::string& t : teachers) {
      const Cell *largest_coarse = nullptr, *smallest_fine = nullptr;
      for (const Cell* c : cells) {
        if (c->teacher.name() != t) continue;
        if (c->student.k < c->teacher.k &&
            (!largest_coarse || c->relative_size > largest_coarse->relative_size ||
             (c->relative_size == largest_coarse->relative_size && c->loss.mean < largest_coarse->loss.mean)))
          largest_coarse = c;
        if (c->student.k >= c->teacher.k && (!smallest_fine || c->relative_size < smallest_fine->relative_size))
          smallest_fine = c;
      }
      if (largest_coarse && smallest_fine)
        sizes << "\nTeacher " << t << ": the largest coarser student, " << largest_coarse->student.name() << " ("
              << format_number(largest_coarse->relative_size, "%.1f") << "x the teacher's parameters), reaches "
              << f3s(*largest_coarse) << "; the smallest student with k' >= " << largest_coarse->teacher.k << ", "
              << smallest_fine->student.name() << " (" << format_number(smallest_fine->relative_size, "%.1f")
              << "x), reaches " << f3s(*smallest_fine) << ".\n";
    }
  }

  // Widths are whole numbers: where k does not divide the active count asked for, the width is
  // rounded to the nearest (spec_for) and the spec has other active neurons than asked. Say which.
  std::ostringstream widths;
  std::set<std::string> rounded_seen;
  for (const GridPoint& p : points)
    for (const auto& [spec, asked] : {std::pair<const MoESpec&, std::int64_t>{p.teacher, ctx.settings.integer("teacher_active")},
                                      std::pair<const MoESpec&, std::int64_t>{p.student, ctx.settings.integer("student_active")}})
      if (spec.active_neurons() != asked && rounded_seen.insert(spec.name()).second)
        widths << (rounded_seen.size() == 1 ? "" : ", ") << spec.name() << " " << spec.k << " x " << spec.width << " = "
               << spec.active_neurons() << " (asked " << asked << ")";
  const std::string width_note =
      rounded_seen.empty() ? "Every width is exact: k divides the active neurons asked for.\n\n"
                           : "Widths rounded to the nearest whole number, so these have other active neurons than "
                             "asked: " + widths.str() + ".\n\n";

  std::ostringstream summary;
  summary << "# Teacher-student granularity (the granularity paper, Figures 2 and 3)\n\n"
          << "Preset `" << ctx.preset << "`, run seed " << ctx.seed << ", seeds "
          << ctx.settings.to_json()["seeds"].dump()
          << ". Settings: config.json. One file per point: points/<name>.json (result) and points/<name>.csv "
             "(curves); all points: results.csv.\n\n"
          << "Normalised test loss = test MSE / MSE of the zero predictor, the minimum over epochs, the best "
             "learning rate; mean ± sample std over the seeds (each seed draws its own teacher, student and data). "
             "0 = the teacher is fitted; 1 = no better than predicting 0. Rows: teachers; columns: students.\n\n"
          << width_note << table.str() << "\n" << done.size() << " of " << points.size() << " points done"
          << (missing ? " (missing cells: -; run the missing points, then --set mode=report)" : "") << ".\n"
          << sizes.str() << "\n## Comparisons\n\n"
          << "The numbers behind the Claims section, pair by pair; the paper's claims are judged there only (`moelab claims --check` recomputes that section from the CSV files).\n\n"
          << "The rule: a teacher's students separate when the worst student with k' >= k (by mean loss over seeds) "
             "is below the best student with k' < k; the gap exceeds the seeds' spread when the worst fine-enough "
             "student's mean + std is below the best coarser student's mean - std.\n\n"
          << conclusion << "\n\n" << verdict.str() << "\n## Plots\n\n";
  for (const std::string& n : plot_notes) summary << "- " << n << "\n";
  ctx.dir.write_text("summary.md", summary.str());

  std::printf("\n%s\n%s%s\n", table.str().c_str(), sizes.str().c_str(), conclusion.c_str());
  for (const std::string& n : plot_notes) std::printf("plot: %s\n", n.c_str());
  std::printf("summary: %s\n", ctx.dir.file("summary.md").c_str());
  return missing;
}

}  // namespace moelab::teacher_student
