// tests/fuzz/fuzz_seeds.cpp — writes the harness's valid seed files (tests/fuzz/loader_harness.h,
// seed_files) as a starting corpus for the libFuzzer targets: <dir>/safetensors/<name>,
// <dir>/checkpoint/<name>, <dir>/idx/<name>. Built with them (-DMOELAB_FUZZ=ON); see
// tests/fuzz/fuzz_loader.cpp and docs/FUZZING.md.
//   fuzz_seeds build-fuzz/corpus
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tests/fuzz/loader_harness.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus directory>\n", argv[0]);
    return 2;
  }
  try {
    for (const moelab::fuzz::Loader loader : moelab::fuzz::kLoaders) {
      const std::filesystem::path dir = std::filesystem::path(argv[1]) / moelab::fuzz::loader_name(loader);
      std::filesystem::create_directories(dir);
      auto files = moelab::fuzz::seed_files(loader);
      for (auto& named : moelab::fuzz::hostile_files(loader)) files.push_back(std::move(named));
      for (const auto& [name, bytes] : files) {
        std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!out) throw std::runtime_error("cannot write " + (dir / name).string());
      }
      std::printf("%s\n", dir.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
