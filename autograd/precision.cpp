// autograd/precision.cpp — the thread-local policy behind PrecisionScope.
#include "autograd/precision.h"

#include "core/error.h"

namespace moelab {
namespace {
thread_local Precision policy = Precision::Float32;
}  // namespace

Precision current_precision() { return policy; }

const char* precision_name(Precision precision) { return precision == Precision::BFloat16 ? "bf16" : "fp32"; }

Precision parse_precision(const std::string& text, const char* what) {
  if (text == "fp32" || text == "float32") return Precision::Float32;
  if (text == "bf16" || text == "bfloat16") return Precision::BFloat16;
  fail(what, "unknown precision '", text, "' (choose fp32 or bf16)");
}

PrecisionScope::PrecisionScope(Precision precision) : previous_(policy) { policy = precision; }
PrecisionScope::~PrecisionScope() { policy = previous_; }

}  // namespace moelab
