// tasks/teacher_student/teacher_student_report.h — the grid of `moelab teacher-student` and its
// report (see teacher_student_experiment.h for the experiment).
//
// The grid is teachers x students x seeds, all read from the settings (teacher_k x teacher_ratios,
// student_k x student_ratios, seeds). The report reads the finished points (points/<name>.json in
// the run folder, runner/job_grid.h) in grid order and writes:
//   results.csv       one row per finished point (rewritten whole; it is derived)
//   fig2_heat_map.png normalised test loss (mean over seeds), one row per teacher, one column per
//                     student (the paper's Figure 2; drawn when there are at least 2 teachers and
//                     2 students)
//   fig3_size.png     normalised test loss against the student's total parameters relative to the
//                     teacher's, one line per (teacher, student granularity) (the paper's Figure 3;
//                     drawn when some student granularity comes in at least 2 sizes)
//   summary.md        the tables (mean +- std over seeds) and the verdict in numbers: for every
//                     teacher, the students with k' >= k against those with k' < k, and whether
//                     the gap between them exceeds the seeds' spread
#pragma once

#include <string>
#include <vector>

#include "runner/experiment.h"
#include "tasks/teacher_student/teacher_student.h"

namespace moelab::teacher_student {

struct GridPoint {
  MoESpec teacher, student;
  std::int64_t seed = 0;  // the replicate (runner/job_grid.h: replicate_seed)
  std::string cell() const { return "t" + teacher.name() + "-s" + student.name(); }  // "t16e8a-s32e8a"
  std::string name() const { return cell() + "-seed" + std::to_string(seed); }      // "t16e8a-s32e8a-seed0"
};

// Teachers (outer loop) x students x seeds, from the settings; every spec has its width and d filled in.
std::vector<GridPoint> grid(const Settings& s);

// Gathers the finished points of `points` and writes the report into ctx.dir; prints the tables
// and returns the number of points still missing.
std::size_t write_report(const RunContext& ctx, const std::vector<GridPoint>& points);

}  // namespace moelab::teacher_student
