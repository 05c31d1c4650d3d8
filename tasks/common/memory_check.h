// tasks/common/memory_check.h — refusing, before a run folder is written, sizes that cannot fit.
//
// A setting in range can still ask for more memory than the machine has (batch = 2^20 graphs,
// d = 65536). Each experiment computes a LOWER bound on what one training step holds (the
// parameters with their gradients and Adam's two moments, 16 bytes each in float32, and the
// activations the backward needs) from its settings alone, before any data exists, and
// check_memory_bound refuses the run (UsageError, exit 2) when even that bound exceeds the
// machine's physical memory. A bound, not an estimate: a run that passes may still not fit (real
// sequences are longer than the shortest possible one), but a refused run could never have.
//
//   check_memory_bound("batch = 1048576 graphs", decoder_step_bytes_lower_bound(m, tokens, vocab));
#pragma once

#include <cstdint>
#include <string>

#include "tasks/common/models.h"

namespace moelab {

// The machine's physical memory in bytes (sysconf), or 0 when it cannot be read.
double physical_memory_bytes();

// Throws UsageError "<what>: needs at least X GB (<how>), more than this machine's Y GB" when
// bytes exceeds the physical memory; nothing when it fits or the memory is unknown.
void check_memory_bound(const std::string& what, double bytes, const std::string& how);

// A lower bound on a decoder training step over `tokens` input positions with a vocabulary of
// `vocab`, in bytes: 16 per parameter (the spec's count, as check_model_grid's), plus 4 bytes per
// stored activation: per position and layer the block's input, its two norms' outputs, the
// attention output and the FFN's hidden units (k experts' worth for a MoE), and per position the
// logits and their gradient.
double decoder_step_bytes_lower_bound(const ModelSpec& m, double tokens, std::int64_t vocab);

}  // namespace moelab
