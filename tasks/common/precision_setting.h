// tasks/common/precision_setting.h — the `precision` setting every experiment declares.
//
//   moelab phonebook --preset demo --precision bf16     (the same as --set precision=bf16)
//
// fp32 (the default, and every recorded result's setting) computes everything in float32; bf16
// runs the matrix products on bfloat16 copies with float32 sums, everything else in float32
// (autograd/precision.h). It changes results, so a folder run in one precision refuses to resume
// in the other (runner/run_start.h); a folder recorded before the setting existed counts as fp32.
// The command line (tasks/cli/moelab_main.cpp) runs the whole experiment inside a PrecisionScope
// of this policy: training, evaluation and generation alike, as PyTorch's autocast around a
// script does.
#pragma once

#include "autograd/precision.h"
#include "runner/settings.h"

namespace moelab {

void add_precision_setting(Settings& s);

// The policy the settings ask for: Float32 when they declare no `precision`.
Precision settings_precision(const Settings& s);

}  // namespace moelab
