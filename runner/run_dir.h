// runner/run_dir.h — the folder one run writes: configuration, metrics, results, summary.
//
//   runs/<experiment>/<name>/
//     config.json    the resolved settings (preset + --set), the seed, threads, device, command line
//     metrics.csv    one row per evaluation during training (appended and flushed row by row, so a
//                    crash or Ctrl-C loses at most the row being written)
//     results.csv    one row per finished job (model x task size ...)
//     summary.md     what a human reads first: the table and whether the paper's effect shows
//     *.png          plots (runner/plot.h), with the gnuplot script and data beside them
//
// CsvFile writes a header once; reopening an existing file with the same header appends, so a
// sweep that is started again keeps the rows it already has (read_csv gives them back, so an
// experiment can skip jobs that are done).
//
// Every write is checked (runner/checked_file.h): a full disk or an I/O error throws an
// error naming the file and the reason, and leaves the folder resumable. A row is written whole
// or not at all; a last line cut short anyway (a crash, a kill) is ignored by read_csv and cut off
// when CsvFile reopens the file. write_text and write_json replace a file whole or leave it as it
// was. Cells read back are parsed whole (CsvRow::integer, CsvRow::real): "5O" is an error naming
// the file, the line and the column, never the number 5. A job retrained after an interruption
// first drops the curve rows of its unfinished try (drop_csv_rows), so no job has two curves.
//
//   RunDir dir("runs/phonebook/demo");
//   dir.write_json("config.json", j);
//   CsvFile results = dir.csv("results.csv", {"model", "book_size", "exact_match"});
//   results.row({"moe-8e", "1000", "0.97"});
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runner/checked_file.h"

namespace moelab {

class CsvFile {
 public:
  // Opens path for appending; writes the header when the file is new, empty or holds only part
  // of a header line; cuts off a last line without its newline (a row cut short). Throws
  // moelab::Error when the file exists with a different header (another experiment's file)
  // or cannot be written.
  CsvFile(const std::filesystem::path& path, const std::vector<std::string>& header);
  // Appends one row (as many cells as the header; cells with commas or quotes are quoted), whole
  // or not at all; moelab::Error naming the file and the reason when it cannot be written.
  void row(const std::vector<std::string>& cells);
  // Makes the file `text` again (what it held when a run was saved: its header line and rows,
  // tasks/common/train.h's TrainResume), cutting what was written since; moelab::Error when text
  // does not begin with this file's header line.
  void restore(const std::string& text);
  const std::filesystem::path& path() const { return path_; }

 private:
  // Refuses another header; cuts off an unfinished last line (see the constructor).
  static void check_header(const std::filesystem::path& path, const std::vector<std::string>& header);

  std::filesystem::path path_;
  std::vector<std::string> header_;
  AppendFile file_;
};

// One row read back: its cells by column name, and where it came from, so that a cell that is not
// what it should be is reported with its file, line and column.
struct CsvRow : std::map<std::string, std::string> {
  std::filesystem::path file;
  std::size_t line = 0;  // 1-based; the header is line 1

  // The whole cell as an integer / a real number; moelab::Error naming the file, the line and
  // the column for anything else (trailing characters, an empty cell, no such column).
  std::int64_t integer(const std::string& column) const;
  double real(const std::string& column) const;
  // The cell as it is; moelab::Error naming the file when there is no such column.
  const std::string& text(const std::string& column) const;
};

// The rows of a CSV written by CsvFile (empty if no file). Skips rows with another number of cells
// than the header and a last line without its newline: both are rows cut short.
std::vector<CsvRow> read_csv(const std::filesystem::path& path);

// Rewrites a CSV file keeping only the rows for which keep(row) is true (whole or not at all);
// returns the number of rows dropped (rows cut short count as dropped). No file: 0. For curves
// appended while a job trains: before the unfinished jobs are run again, their rows go.
std::size_t drop_csv_rows(const std::filesystem::path& path, const std::function<bool(const CsvRow&)>& keep);

// What every experiment calls before it runs its jobs, before it opens the file for appending:
// drops the rows for which unfinished(row) is true (the curve of a job that was interrupted and
// is about to be trained again) and says so on stdout. Returns the number of rows dropped.
std::size_t drop_unfinished_rows(const std::filesystem::path& path,
                                 const std::function<bool(const CsvRow&)>& unfinished);

// One CSV line of cells (no newline), quoted as CsvFile writes them: for files derived whole.
std::string csv_line(const std::vector<std::string>& cells);

// A number as a CSV cell: integers exactly, others in the shortest form that reads back to the same
// double (up to 17 significant digits): equal text is equal bits. For prose, format_number.
std::string cell(double value);

class RunDir {
 public:
  // Creates the folder (and its parents); throws moelab::Error naming it when it cannot.
  explicit RunDir(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path file(const std::string& name) const { return path_ / name; }

  // Replace the file whole (written beside and renamed over); moelab::Error naming the file
  // and the reason when it cannot be written, and then the old file is still there.
  void write_json(const std::string& name, const nlohmann::ordered_json& j) const;
  // The folder <path>/<name> ("points", "checkpoints", ".locks"), created when missing; its path.
  // moelab::Error naming it when it is a link (files written there would land wherever it points)
  // or anything else but a folder.
  std::filesystem::path subfolder(const std::string& name) const;
  void write_text(const std::string& name, const std::string& text) const;
  CsvFile csv(const std::string& name, const std::vector<std::string>& header) const;

 private:
  std::filesystem::path path_;
};

}  // namespace moelab
