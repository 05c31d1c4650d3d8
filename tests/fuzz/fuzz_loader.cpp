// tests/fuzz/fuzz_loader.cpp — the libFuzzer entry point for one file loader. CMake compiles this
// file three times, as fuzz_safetensors, fuzz_checkpoint and fuzz_idx, with MOELAB_FUZZ_LOADER
// naming the loader; every input goes through LoaderHarness::run (tests/fuzz/loader_harness.h),
// the same contract the seeded ctest fuzzer (tests/test_loader_fuzz.cpp) checks. A breach of it
// prints what broke and aborts, which libFuzzer reports as a crash and saves as crash-<sha1>.
//
// Build (clang only; the whole engine is compiled with coverage, ASan and UBSan):
//   cmake -S . -B build-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOELAB_CUDA=OFF -DMOELAB_NATIVE=OFF -DMOELAB_FUZZ=ON
//   cmake --build build-fuzz -j2 --target fuzz_safetensors fuzz_checkpoint fuzz_idx fuzz_seeds
// Run (the seeds are the valid files the harness builds; each target for 60 s):
//   build-fuzz/fuzz_seeds build-fuzz/corpus        # writes corpus/{safetensors,checkpoint,idx}/
//   for t in safetensors checkpoint idx; do
//     TMPDIR=/dev/shm build-fuzz/fuzz_$t build-fuzz/corpus/$t -max_total_time=60 -max_len=4096 -timeout=10
//   done
// Replay a crash: build-fuzz/fuzz_idx crash-<sha1>. More in docs/FUZZING.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/loader_harness.h"

#ifndef MOELAB_FUZZ_LOADER
#error "define MOELAB_FUZZ_LOADER as \"safetensors\", \"checkpoint\" or \"idx\" (CMake's MOELAB_FUZZ option does)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const moelab::fuzz::Loader loader = moelab::fuzz::loader_from_name(MOELAB_FUZZ_LOADER);
  static moelab::fuzz::LoaderHarness harness;  // one temporary directory for the whole run
  try {
    harness.run(loader, data, size);
  } catch (const moelab::fuzz::ContractViolation& e) {
    std::fprintf(stderr, "moelab fuzz: contract broken: %s\n", e.what());
    std::abort();
  }
  return 0;
}
