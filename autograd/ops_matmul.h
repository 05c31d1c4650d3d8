// autograd/ops_matmul.h — the differentiable matrix product (plain, transposed, batched).
#pragma once

#include "autograd/variable.h"

namespace moelab {

// a: [M, K] (stored [K, M] when trans_a), b: [K, N] (stored [N, K] when trans_b) -> [M, N].
// Batched: a: [B, M, K], b: [B, K, N] -> [B, M, N], the same transposes in every batch.
Variable matmul(const Variable& a, const Variable& b, bool trans_a = false, bool trans_b = false);

}  // namespace moelab
