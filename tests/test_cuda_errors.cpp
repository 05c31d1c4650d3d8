// tests/test_cuda_errors.cpp — the GPU's own error reports: an index a kernel finds out of range
// (cuda/device_errors.cuh: written to mapped host memory by the kernel, raised at the next
// synchronisation) and MOELAB_CUDA_SYNC's check after every launch (cuda/context.h).
//
// The CPU refuses the same inputs before it computes anything; on the GPU the kernel records the
// first bad index and the host raises it at the next read. Each case here feeds a bad index, reads
// the result, and requires the error with the op's name and the bad value, then requires that
// the report was cleared (the next good op runs). Without a GPU every case is skipped
// (tests/cuda_test_main.cpp).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/backend.h"
#include "core/error.h"
#include "core/factories.h"
#include "core/kernels.h"
#include "core/random.h"
#include "core/tensor.h"
#ifdef MOELAB_HAVE_CUDA
#include "cuda/context.h"
#endif

using namespace moelab;
namespace k = moelab::kernels;

namespace {

Tensor gpu_ints(const std::vector<std::int32_t>& values) {
  return from_vector(values, {static_cast<std::int64_t>(values.size())}, Device::cuda());
}

// Runs `read` and returns the message of the moelab::Error it throws ("" when it throws none).
template <class F>
std::string error_of(F&& read) {
  try {
    read();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cuda errors: index_select with an index out of range is reported at the next read, then cleared") {
  Generator gen(3);
  const Tensor src = normal({8, 3}, 0.0, 1.0, gen).to(Device::cuda());
  // The op is enqueued and returns; the error comes at the read (or at the op itself under
  // MOELAB_CUDA_SYNC=1, which scripts/gpu-check.sh also runs this test with).
  const std::string message = error_of([&] { (void)k::index_select(src, gpu_ints({3, 0, 9})).to(Device::cpu()); });
  INFO(message);
  CHECK(has(message, "index_select"));
  CHECK(has(message, "= 9"));
  CHECK(has(message, "[0, 8)"));
  CHECK(has(message, "found on the GPU"));
  // Reported once: the next read of good work succeeds and is right.
  const Tensor good = k::index_select(src, gpu_ints({7, 1}));
  const std::vector<float> rows = good.to(Device::cpu()).to_vector<float>();
  const std::vector<float> expected = k::index_select(src.to(Device::cpu()), from_vector(std::vector<std::int32_t>{7, 1}, {2}))
                                          .to_vector<float>();
  CHECK(rows == expected);
}

TEST_CASE("cuda errors: a cross-entropy target outside the classes names the row and the target") {
  Generator gen(4);
  const Tensor logits = normal({3, 5}, 0.0, 1.0, gen).to(Device::cuda());
  const std::string message = error_of([&] { (void)k::cross_entropy(logits, gpu_ints({1, 99, 2})).kept_count(); });
  INFO(message);
  CHECK(has(message, "cross_entropy"));
  CHECK(has(message, "targets[1] = 99"));
  CHECK(has(message, "found on the GPU"));
  CHECK(k::cross_entropy(logits, gpu_ints({1, 4, 2})).kept_count() == 3);
}

TEST_CASE("cuda errors: an expert id outside [-1, E) in group_by_expert is reported, that assignment dropped") {
  const std::string message =
      error_of([&] {  // ids [T = 2, k = 2]
        const Tensor ids = from_vector(std::vector<std::int32_t>{0, 3, 7, 1}, {2, 2}, Device::cuda());
        (void)k::group_by_expert(ids, 4).offsets.to(Device::cpu());
      });
  INFO(message);
  CHECK(has(message, "group_by_expert"));
  CHECK(has(message, "= 7"));
  CHECK(has(message, "for 4 experts"));
}

TEST_CASE("cuda errors: grouped_matmul refuses offsets that are not increasing") {
  Generator gen(5);
  const Tensor x = normal({6, 4}, 0.0, 1.0, gen).to(Device::cuda());
  const Tensor w = normal({2, 4, 3}, 0.0, 1.0, gen).to(Device::cuda());
  const std::string message = error_of([&] { (void)k::grouped_matmul(x, w, gpu_ints({0, 5, 3})).to(Device::cpu()); });
  INFO(message);
  CHECK(has(message, "grouped_matmul"));
  CHECK(has(message, "offsets[2] = 3"));
}

#ifdef MOELAB_HAVE_CUDA
TEST_CASE("cuda errors: with MOELAB_CUDA_SYNC the error surfaces at the op itself, not at the later read") {
  Generator gen(6);
  const Tensor src = normal({8, 3}, 0.0, 1.0, gen).to(Device::cuda());
  const bool before = cuda::sync_each_launch();
  cuda::set_sync_each_launch(true);
  // Thrown by index_select itself: no copy to the host is needed to see it.
  const std::string message = error_of([&] { (void)k::index_select(src, gpu_ints({2, -1})); });
  cuda::set_sync_each_launch(before);
  INFO(message);
  CHECK(has(message, "index_select"));
  CHECK(has(message, "= -1"));
  // And in the default mode nothing is pending afterwards.
  CHECK(error_of([&] { (void)k::index_select(src, gpu_ints({0})).to(Device::cpu()); }).empty());
}
#endif
