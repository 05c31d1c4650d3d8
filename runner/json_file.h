// runner/json_file.h — reading a JSON file of a run folder (config.json, points/<name>.json)
// that may be damaged, hostile, or not a file at all.
//
//   const nlohmann::ordered_json config = read_json_file(dir.file("config.json"), "the run's record");
//
// Before anything is parsed, the path must be a regular file (a folder gave
// "basic_filebuf::underflow"; a FIFO would block forever) of at most kMaxJsonFileBytes, and its
// text at most kMaxJsonDepth levels deep (core/json_guard.h: a file nested 100,000 deep overflowed
// the stack). Every failure throws moelab::Error naming the file, what it is, what was wrong, and
// what to do about it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace moelab {

// Far above any file moelab writes into a run folder (a few KB), far below memory.
constexpr std::uintmax_t kMaxJsonFileBytes = 64ull << 20;

// The file's JSON. `what` names it in messages ("the run's record", "the point result"), `advice`
// ends them ("use another --out folder, or delete the folder").
nlohmann::ordered_json read_json_file(const std::filesystem::path& path, const std::string& what,
                                      const std::string& advice);

}  // namespace moelab
