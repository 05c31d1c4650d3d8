// tasks/teacher_student/teacher_student_claims.h — the granularity paper's claims (Figures 2 and
// 3), judged from a finished teacher-student folder's results.csv on runner/claims.h's scale:
//   Fig. 2/3  a student learns the teacher only when its granularity k' is at least the teacher's
//             k: per teacher with students on both sides, the best coarser student's mean
//             normalised loss minus the worst fine-enough student's, beyond the spread when the
//             worst fine student's mean + std is below the best coarse student's mean - std (the
//             report's rule), with the paired sign-flip test of the two over the replicate seeds;
//   Fig. 2/3  fine-enough students fit the teacher, at every size: per (teacher, student with
//             k' >= k), a normalised loss below 0.01 (this engine's threshold: 1% of the zero
//             predictor's error; the paper prints those students' losses as about 0), the cell
//             being 0.01 minus the mean over seeds against its std.
#pragma once

#include <vector>

#include "runner/claims.h"

namespace moelab::teacher_student {

std::vector<Claim> teacher_student_claims(const ClaimsInput& input);

}  // namespace moelab::teacher_student
