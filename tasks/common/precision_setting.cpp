// tasks/common/precision_setting.cpp — declaring and reading the `precision` setting.
#include "tasks/common/precision_setting.h"

namespace moelab {

void add_precision_setting(Settings& s) {
  s.add_text("precision", "fp32",
             "arithmetic of the matrix products: fp32, or bf16 (bfloat16 operands, float32 sums; norms, "
             "softmax, losses, router scores and weights stay float32)",
             {"fp32", "bf16"});
}

Precision settings_precision(const Settings& s) {
  return s.has("precision") ? parse_precision(s.text("precision"), "precision") : Precision::Float32;
}

}  // namespace moelab
