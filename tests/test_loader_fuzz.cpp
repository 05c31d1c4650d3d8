// tests/test_loader_fuzz.cpp — a seeded mutation fuzzer for the three file loaders, run by ctest on
// every build: read_safetensors, load_checkpoint and read_idx (plain and gzipped) get a few
// thousand mutated copies of valid files each (tests/fuzz/mutator.h: bit flips, byte changes,
// truncations, insertions, length-field and number edits), and every input must keep the
// contract of tests/fuzz/loader_harness.h: load, or throw moelab::Error naming the file; a
// failed checkpoint load changes nothing; nothing save would refuse is loaded.
//
// Deterministic: case c of loader L is mutated from a generator seeded with (seed, L, c), so a
// failure report ("seed 1 case 1234 (from 'full'): flip bit 3 of byte 41; ...") names one input
// that the same command reproduces on any machine. Environment variables for longer hunts or a
// replay (the defaults keep it to a few seconds on one core):
//   MOELAB_FUZZ_SEED=<n>    another sequence of cases (default 1)
//   MOELAB_FUZZ_CASES=<n>   cases per loader (default 5000)
//   MOELAB_FUZZ_CASE=<c>    run only case c (with the seed of the report)
// The coverage-guided libFuzzer targets share the harness: see docs/FUZZING.md.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "tests/fuzz/loader_harness.h"
#include "tests/fuzz/mutator.h"

using namespace moelab::fuzz;

namespace {

std::int64_t env_int(const char* name, std::int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoll(v, nullptr, 10) : fallback;
}

// The generator seed of one case: a fixed function of (seed, loader, case).
std::uint64_t case_seed(std::uint64_t seed, Loader loader, std::int64_t c) {
  Mutator mix(seed * 0x100000001B3ull + static_cast<std::uint64_t>(loader) * 0x9E3779B9ull + static_cast<std::uint64_t>(c));
  return mix.next();
}

}  // namespace

TEST_CASE("loader fuzz: mutated safetensors, checkpoint and IDX files load or throw moelab::Error, and failed loads change nothing") {
  const auto seed = static_cast<std::uint64_t>(env_int("MOELAB_FUZZ_SEED", 1));
  const std::int64_t cases = env_int("MOELAB_FUZZ_CASES", 5000);
  const std::int64_t only = env_int("MOELAB_FUZZ_CASE", -1);
  LoaderHarness harness;

  for (const Loader loader : kLoaders) {
    const std::string name = loader_name(loader);
    CAPTURE(name);
    const auto seeds = seed_files(loader);
    REQUIRE(!seeds.empty());
    for (const auto& [file, bytes] : seeds) {  // the starting points are valid
      CAPTURE(file);
      CHECK(harness.run(loader, bytes).error == "");
    }
    for (const auto& [file, bytes] : hostile_files(loader)) {  // refused with moelab::Error, no crash
      CAPTURE(file);
      const Outcome outcome = harness.run(loader, bytes);
      CHECK(!outcome.loaded);
      CHECK(outcome.error.find("nested deeper than") != std::string::npos);
    }

    std::int64_t loaded = 0, rejected = 0, breaches = 0;
    for (std::int64_t c = only >= 0 ? only : 0; c < (only >= 0 ? only + 1 : cases); ++c) {
      Mutator mutator(case_seed(seed, loader, c));
      const auto& [file, start] = seeds[mutator.below(seeds.size())];
      Bytes input = start;
      const std::string how = mutator.mutate(input);
      try {
        (harness.run(loader, input).loaded ? loaded : rejected) += 1;
      } catch (const ContractViolation& e) {
        // Report at most a few, each with what reproduces it.
        if (++breaches <= 5)
          FAIL_CHECK(std::string(e.what()), "\n  reproduce: MOELAB_FUZZ_SEED=", seed, " MOELAB_FUZZ_CASE=", c, " test_loader_fuzz\n  input: seed file '", file,
                     "', mutated: ", how);
      }
    }
    MESSAGE(name, ": ", loaded + rejected + breaches, " mutated files, ", loaded, " loaded, ", rejected,
            " rejected with moelab::Error, ", breaches, " broke the contract");
    CHECK(breaches == 0);
    // The mutations reach both outcomes: some keep the file valid, most break it.
    if (only < 0 && cases >= 1000) {
      CHECK(loaded > 0);
      CHECK(rejected > loaded);
    }
  }
}
