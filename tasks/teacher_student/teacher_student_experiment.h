// tasks/teacher_student/teacher_student_experiment.h — `moelab teacher-student`: the granularity
// paper's Figures 2 and 3 (Section 4, Appendix D; "The power of fine-grained experts",
// docs/REFERENCES.md).
//
// Question: can a student MoE fit a random teacher MoE whose granularity (active experts per token)
// is higher than its own? The paper's answer: no — a student fits only if k' >= k, even with many
// times more total parameters (Theorem 3.1's separation, seen in practice).
//
// The grid. Teachers: k in `teacher_k`, m = k * r for r in `teacher_ratios`, width = teacher_active
// / k. Students: k' in `student_k`, m' = k' * r' for r' in `student_ratios`, width = student_active
// / k' (25% more active neurons than the teacher, as in the paper), with a trainable router bias
// when `student_router_bias` is set (Figure 3). Every (teacher, student) pair is one grid point,
// named "t<m>e<k>a-s<m'>e<k'>a" (e.g. t16e8a-s32e8a). A point trains the student once per learning
// rate of `lrs` (tasks/teacher_student/teacher_student.h) and keeps the best normalised test loss.
// Every pair is trained once per seed of `seeds` (each seed draws its own teacher, student and
// data; replicate 0 is the run's --seed), so a grid point is a (pair, seed), named
// "t<m>e<k>a-s<m'>e<k'>a-seed<t>", and the report gives mean +- std over the seeds.
//
// Each point is an independent job, so a sweep can be spread over processes or machines
// (`--set mode=...`, runner/job_grid.h; docs/jobs.md):
//   all     (default) run every point without a result file, then write the report
//   list    print one command line per missing point (stdout; a count on stderr), e.g.
//             moelab teacher-student --preset cpu-fig2 --set mode=list | parallel -j2
//   point   run the one point named by `--set point=NAME` (nothing if its file exists)
//   report  only gather the finished points into the report (missing cells are shown as "-")
//   train   run the missing points without the report
// A point writes its own files, points/<name>.json (the result) and points/<name>.csv (the curves:
// lr, epoch, lr used, normalised train and test loss), written whole and renamed, so concurrent
// processes never share a file and a reader never sees half of one.
//
// The report (teacher_student_report.h): results.csv (one row per finished point), summary.md (the
// table(s) and the verdict in numbers), fig2_heat_map.png (normalised loss, teacher rows against
// student columns) when there are several teachers and students, fig3_size.png (normalised loss against the
// student's total size relative to its teacher, one line per student granularity) when some
// granularity comes in several sizes.
//
// Presets: fig2 / fig3 (the paper's sizes, d = 256; GPU-scale), cpu-fig2 / cpu-fig3 (the CPU
// setting of docs/EXPERIMENTS.md, d = 32), toy (a minute, for trying the command).
#pragma once

#include "runner/experiment.h"

namespace moelab {

Experiment teacher_student_experiment();

}  // namespace moelab
