// core/kernels/random_fill.cpp — checks and dispatch for fill_uniform and fill_normal.
//
// The factories uniform() / normal() (core/factories.cpp) draw on the host and copy, so that a
// model initialised on a GPU has the CPU's exact weights. These two fill an existing tensor where
// it lives instead: on a GPU no host buffer and no upload, for bulk data (noise, synthetic
// inputs). Both consume the Generator's words in the same order as the factories.
#include "core/backend.h"
#include "core/kernels.h"
#include "core/random.h"

namespace moelab::kernels {

void fill_uniform(Tensor& x, double low, double high, Generator& gen) {
  check_floating(x, "fill_uniform", "x");
  MOELAB_CHECK(low <= high, "fill_uniform", "low (", low, ") must not exceed high (", high, ")");
  if (x.numel() > 0) backend(x.device()).fill_uniform(x, low, high, gen);
}

void fill_normal(Tensor& x, double mean, double std, Generator& gen) {
  check_floating(x, "fill_normal", "x");
  MOELAB_CHECK(std >= 0, "fill_normal", "std must be >= 0, got ", std);
  if (x.numel() > 0) backend(x.device()).fill_normal(x, mean, std, gen);
}

}  // namespace moelab::kernels
