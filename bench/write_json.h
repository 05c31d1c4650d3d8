// bench/write_json.h — how the benchmark programs save their JSON: the folders made, then the
// whole file or no change (runner/checked_file.h's write_file_atomic: a temporary file created new,
// never through a link, renamed over the path), and a failed write said, not hidden.
#pragma once

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>

#include "core/error.h"
#include "runner/checked_file.h"

namespace moelab::bench {

// Writes `report` to `path`; returns false after printing "<program>: <why>" to stderr.
inline bool write_json(const std::string& path, const nlohmann::json& report, const char* program) {
  try {
    const std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    write_file_atomic(p, report.dump(2) + "\n");
    return true;
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "%s: cannot write '%s': %s\n", program, path.c_str(), e.code().message().c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
  }
  return false;
}

}  // namespace moelab::bench
