// tests/fuzz/loader_harness.h — what the file loaders must do with any bytes at all, written once
// and shared by the two fuzzers:
//   - tests/test_loader_fuzz.cpp: a seeded, deterministic mutation test that runs in ctest on
//     every build (a few thousand mutated files per loader, a few seconds);
//   - tests/fuzz/fuzz_loader.cpp: the libFuzzer targets fuzz_safetensors, fuzz_checkpoint and
//     fuzz_idx, built with clang and -DMOELAB_FUZZ=ON (docs/FUZZING.md says how to run them).
//
// The loaders: read_safetensors (nn/io/safetensors.h), load_checkpoint (nn/io/checkpoint.h) and
// read_idx (tasks/softmoe_mnist/idx.h; plain and gzipped). LoaderHarness::run writes the bytes to
// a file in its own temporary directory, loads it, and holds the result to the contract:
//
//   1. The loader returns or throws moelab::Error, the documented type; any other exception is
//      a breach. (Crashes, and the memory errors and undefined behaviour the sanitizers of the
//      libFuzzer build see, end the process.)
//   2. An error message names the file, as every loader promises.
//   3. load_checkpoint, which runs twice per input (into a model + AdamW optimizer + generator,
//      and into the model alone): a failed load leaves the parameters, the optimizer's buffers
//      and steps_taken and the generator's (seed, counter) bitwise as they were; a successful one
//      returns a step >= 0 and leaves steps_taken >= 0 — nothing save_checkpoint would refuse.
//   4. read_idx of a successful load returns 1 to 4 sizes >= 1 whose product is the data size;
//      and for an input that is not gzip, the same bytes gzipped give the same result (the same
//      array, or an error for both).
//   5. A safetensors or IDX file that loads fails with one byte appended: each format says
//      exactly where it ends (for gzip, after its last member).
//
// A breach throws ContractViolation (a std::logic_error, never a moelab::Error) saying which rule
// and what happened. The checkpoint target is rebuilt for every input, so a run depends on the
// input alone (libFuzzer's reproducers replay exactly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace moelab::fuzz {

using Bytes = std::vector<std::uint8_t>;

enum class Loader { Safetensors, Checkpoint, Idx };

constexpr Loader kLoaders[] = {Loader::Safetensors, Loader::Checkpoint, Loader::Idx};

// "safetensors", "checkpoint", "idx"; and back (std::invalid_argument for another name).
const char* loader_name(Loader loader);
Loader loader_from_name(const std::string& name);

// Valid files for the loader, named: the starting points of the mutations and libFuzzer's seed
// corpus. Every one of them loads.
std::vector<std::pair<std::string, Bytes>> seed_files(Loader loader);
// Files that must be refused with a moelab::Error, never crash (a header nested 100,000 deep
// overflowed the stack once): part of libFuzzer's seed corpus and of test_loader_fuzz.
std::vector<std::pair<std::string, Bytes>> hostile_files(Loader loader);

class ContractViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// What one input did (after the contract held).
struct Outcome {
  bool loaded = false;  // for a checkpoint: in at least one of the two ways
  std::string error;    // the moelab::Error's message when not loaded (the first load's, for a checkpoint)
};

class LoaderHarness {
 public:
  LoaderHarness();  // makes the temporary directory
  ~LoaderHarness();  // removes it
  LoaderHarness(const LoaderHarness&) = delete;
  LoaderHarness& operator=(const LoaderHarness&) = delete;

  // Loads `size` bytes as a file of the loader's kind; throws ContractViolation on a breach.
  Outcome run(Loader loader, const std::uint8_t* data, std::size_t size);
  Outcome run(Loader loader, const Bytes& bytes) { return run(loader, bytes.data(), bytes.size()); }

 private:
  friend std::vector<std::pair<std::string, Bytes>> seed_files(Loader loader);  // writes in dir_
  struct Dir;
  std::unique_ptr<Dir> dir_;
};

}  // namespace moelab::fuzz
