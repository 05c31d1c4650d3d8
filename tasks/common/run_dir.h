// tasks/common/run_dir.h — the folder one run writes: configuration, metrics, results, summary.
//
//   runs/<experiment>/<name>/
//     config.json    the resolved settings (preset + --set), the seed, threads, device, command line
//     metrics.csv    one row per evaluation during training (appended and flushed row by row, so a
//                    crash or Ctrl-C loses at most the row being written)
//     results.csv    one row per finished job (model x task size ...)
//     summary.md     what a human reads first: the table and whether the paper's effect shows
//     *.png          plots (tasks/common/plot.h), with the gnuplot script and data beside them
//
// CsvFile writes a header once; reopening an existing file with the same header appends, so a
// sweep that is started again keeps the rows it already has (read_csv gives them back, so an
// experiment can skip jobs that are done).
//
//   RunDir dir("runs/phonebook/demo");
//   dir.write_json("config.json", j);
//   CsvFile results = dir.csv("results.csv", {"model", "book_size", "exact_match"});
//   results.row({"moe-8e", "1000", "0.97"});
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moelab {

class CsvFile {
 public:
  // Opens path for appending; writes the header when the file is new or empty. Throws
  // std::runtime_error when the file exists with a different header (another experiment's file).
  CsvFile(const std::filesystem::path& path, const std::vector<std::string>& header);
  // Appends one row (as many cells as the header; cells with commas or quotes are quoted) and flushes.
  void row(const std::vector<std::string>& cells);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::vector<std::string> header_;
  std::ofstream out_;
};

// The rows of a CSV written by CsvFile, as maps from header names to cells (empty if no file).
std::vector<std::map<std::string, std::string>> read_csv(const std::filesystem::path& path);

// A number as a CSV cell: integers exactly, others with 6 significant digits.
std::string cell(double value);

class RunDir {
 public:
  // Creates the folder (and its parents); throws std::runtime_error naming it when it cannot.
  explicit RunDir(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path file(const std::string& name) const { return path_ / name; }

  void write_json(const std::string& name, const nlohmann::ordered_json& j) const;
  void write_text(const std::string& name, const std::string& text) const;  // replaces the file
  CsvFile csv(const std::string& name, const std::vector<std::string>& header) const;

 private:
  std::filesystem::path path_;
};

}  // namespace moelab
