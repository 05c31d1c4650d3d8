// core/cpu/gemm.cpp — the two precisions of cpu::gemm (see gemm.h).
#include "core/cpu/gemm.h"

#include <Eigen/Core>

#include "core/cpu/gemm_f32.h"

namespace moelab::cpu {

void gemm(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a,
          bool trans_b) {
  gemm_f32(a, b, c, m, k, n, trans_a, trans_b);
}

void gemm(const double* a, const double* b, double* c, std::int64_t m, std::int64_t k, std::int64_t n, bool trans_a,
          bool trans_b) {
  using RowMatrix64 = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<RowMatrix64> cm(c, m, n);
  Eigen::Map<const RowMatrix64> am(a, trans_a ? k : m, trans_a ? m : k);
  Eigen::Map<const RowMatrix64> bm(b, trans_b ? n : k, trans_b ? k : n);
  if (trans_a && trans_b) cm.noalias() = am.transpose() * bm.transpose();
  else if (trans_a) cm.noalias() = am.transpose() * bm;
  else if (trans_b) cm.noalias() = am * bm.transpose();
  else cm.noalias() = am * bm;
}

}  // namespace moelab::cpu
