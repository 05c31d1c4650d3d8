// core/kernels/matmul.cpp — checks and dispatch for matrix products (plain, transposed, batched).
//
// bfloat16 operands (both, core/dtype.h) give a float32 product: bfloat16 inputs, float32 sum,
// the product of any bf16 GEMM (autograd/precision.h). A product of two bfloat16s (8-bit
// mantissas) is exact in float32's 24 bits, so the only rounding is the float32 sum's. matmul
// hands bf16 operands to the backend as they are: the CPU runs VDPBF16PS where it has AVX512_BF16
// and otherwise widens them to float32 and runs its float32 GEMM (core/cpu/matmul.cpp), the GPU
// runs cuBLAS's bf16 GEMM on the tensor cores (cuda/matmul.cu). The grouped products pass bf16 on
// the same way (core/kernels/grouped_matmul.cpp).
#include "core/backend.h"
#include "core/kernels.h"

namespace moelab::kernels {

bool check_product_operands(const Tensor& a, const Tensor& b, const char* op, const char* a_name, const char* b_name) {
  check_defined(a, op, a_name);
  check_defined(b, op, b_name);
  if (a.dtype() != DType::BFloat16 && b.dtype() != DType::BFloat16) {
    check_floating(a, op, a_name);
    check_floating(b, op, b_name);
    MOELAB_CHECK(a.dtype() == b.dtype(), op, a_name, " is ", a.dtype(), " but ", b_name, " is ", b.dtype());
    return false;
  }
  MOELAB_CHECK(a.dtype() == b.dtype(), op, a_name, " is ", a.dtype(), " but ", b_name, " is ", b.dtype(),
               " (bfloat16 products take two bfloat16 operands)");
  return true;
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const bool bf16 = check_product_operands(a, b, "matmul", "a", "b");
  check_same_device(a, b, "matmul");
  MOELAB_CHECK(a.rank() == b.rank() && (a.rank() == 2 || a.rank() == 3), "matmul",
               "needs two 2-d or two 3-d (batched) operands, got a ", a.shape(), " and b ", b.shape());
  const bool batched = a.rank() == 3;
  const std::int64_t batch = batched ? a.size(0) : 1;
  MOELAB_CHECK(!batched || b.size(0) == batch, "matmul", "batch sizes differ: a ", a.shape(), ", b ", b.shape());
  const std::int64_t m = trans_a ? a.size(-1) : a.size(-2);
  const std::int64_t ka = trans_a ? a.size(-2) : a.size(-1);
  const std::int64_t kb = trans_b ? b.size(-1) : b.size(-2);
  const std::int64_t n = trans_b ? b.size(-2) : b.size(-1);
  MOELAB_CHECK(ka == kb, "matmul", "inner dimensions differ: a ", a.shape(), (trans_a ? "^T" : ""), " @ b ", b.shape(),
               (trans_b ? "^T" : ""));
  Tensor out = Tensor::empty(batched ? Shape{batch, m, n} : Shape{m, n}, bf16 ? DType::Float32 : a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if (ka == 0) {
    fill(out, 0.0);
    return out;
  }
  Tensor a3 = batched ? a : a.reshape({1, a.size(0), a.size(1)});
  Tensor b3 = batched ? b : b.reshape({1, b.size(0), b.size(1)});
  Tensor out3 = batched ? out : out.reshape({1, m, n});
  backend(a.device()).matmul(a3, b3, trans_a, trans_b, out3);
  return out;
}

}  // namespace moelab::kernels
