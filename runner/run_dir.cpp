// runner/run_dir.cpp — see run_dir.h.
#include "runner/run_dir.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/safe_file.h"

namespace moelab {

namespace {

std::string quote(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string join(const std::vector<std::string>& cells) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) line += (i ? "," : "") + quote(cells[i]);
  return line;
}

}  // namespace

std::string csv_line(const std::vector<std::string>& cells) { return join(cells); }

namespace {

// One CSV line into cells (quotes as written by quote()).
std::vector<std::string> split_line(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cells.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else cells.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return cells;
}

}  // namespace

std::string cell(double value) {
  if (std::isfinite(value) && value == std::round(value) && std::fabs(value) < 1e15)
    return std::to_string(static_cast<long long>(value));
  // The shortest text that reads back to exactly this double (std::to_chars without a precision:
  // at most 17 significant digits, 0.1 stays "0.1"). A float32 result widened to double reads back
  // to the same float32 bits too, so equal cells are equal values and different bits never print
  // alike. (6 digits, as before, made two runs that differed in the last bits look identical.)
  char text[64];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  if (error != std::errc()) return std::to_string(value);  // not reached: 64 chars always suffice
  return std::string(text, end);
}

CsvFile::CsvFile(const std::filesystem::path& path, const std::vector<std::string>& header)
    : path_(path), header_(header), file_((check_header(path, header), path)) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || std::filesystem::file_size(path, ec) == 0)
    file_.append(join(header) + "\n");
}

void CsvFile::check_header(const std::filesystem::path& path, const std::vector<std::string>& header) {
  // A link or a special file is refused before it is read (core/safe_file.h), so that nothing
  // of what it points to is read, cut or appended to.
  if (!entry_exists(path.string())) return;
  std::string text = read_regular_file(path, "open for appending");
  if (!text.empty() && text.back() != '\n') {
    // A last line cut short (a crash or a full disk while it was written): cut it off, so the
    // next row starts on a line of its own. Only part of a header: the file starts again.
    const std::size_t end = text.rfind('\n');
    const std::size_t keep = end == std::string::npos ? 0 : end + 1;
    cut_file(path, keep);  // never through a link (checked_file.h)
    std::fprintf(stderr, "note: %s: dropped an unfinished last line (%zu bytes)\n", path.c_str(), text.size() - keep);
    text.resize(keep);
  }
  if (text.empty()) return;
  const std::string first = text.substr(0, text.find('\n'));
  if (first != join(header))
    throw Error("'" + path.string() + "' exists with another header (" + first +
                "); use another --out folder or delete the file");
}

void CsvFile::restore(const std::string& text) {
  const std::string header = join(header_) + "\n";
  if (text.compare(0, header.size(), header) != 0)
    throw Error("CsvFile " + path_.string() + ": a saved copy that does not begin with its header line");
  cut_file(path_, 0);
  file_.append(text);
}

void CsvFile::row(const std::vector<std::string>& cells) {
  if (cells.size() != header_.size())
    throw Error("CsvFile " + path_.string() + ": a row of " + std::to_string(cells.size()) +
                " cells for " + std::to_string(header_.size()) + " columns");
  file_.append(join(cells) + "\n");
}

namespace {

[[noreturn]] void bad_cell(const CsvRow& row, const std::string& column, const std::string& what) {
  throw Error(row.file.string() + ", line " + std::to_string(row.line) + ", column '" + column + "': " +
              what + " (a damaged file: fix or delete that line, or use another --out folder)");
}

// The header (first line) of a CSV file: its cells, or none when there is no complete line.
std::vector<std::string> read_header(std::istream& in) {
  std::string line;
  if (!std::getline(in, line) || in.eof()) return {};
  return split_line(line);
}

}  // namespace

const std::string& CsvRow::text(const std::string& column) const {
  const auto it = find(column);
  if (it == end())
    throw Error(file.string() + " has no column '" + column +
                "' (a file of another version or experiment: use another --out folder)");
  return it->second;
}

std::int64_t CsvRow::integer(const std::string& column) const {
  const std::string& s = text(column);
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    bad_cell(*this, column, "'" + s + "' is not an integer");
  return v;
}

double CsvRow::real(const std::string& column) const {
  const std::string& s = text(column);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) bad_cell(*this, column, "'" + s + "' is not a number");
  return v;
}

std::vector<CsvRow> read_csv(const std::filesystem::path& path) {
  std::vector<CsvRow> rows;
  std::ifstream in(path);
  if (!in) return rows;
  const std::vector<std::string> header = read_header(in);
  std::string line;
  for (std::size_t number = 2; std::getline(in, line); ++number) {
    if (in.eof()) break;  // no newline: the last row was cut short
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_line(line);
    if (cells.size() != header.size()) continue;  // a row cut short by a crash
    CsvRow row;
    row.file = path, row.line = number;
    for (std::size_t i = 0; i < header.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

std::size_t drop_csv_rows(const std::filesystem::path& path, const std::function<bool(const CsvRow&)>& keep) {
  std::vector<std::string> header;
  std::size_t lines = 0;
  {
    std::ifstream in(path);
    if (!in) return 0;
    header = read_header(in);
    for (std::string line; std::getline(in, line);) lines += !line.empty();
  }
  if (header.empty()) return 0;
  std::string text = join(header) + "\n";
  std::size_t kept = 0;
  for (const CsvRow& row : read_csv(path)) {
    if (!keep(row)) continue;
    std::vector<std::string> cells;
    for (const std::string& h : header) cells.push_back(row.at(h));
    text += join(cells) + "\n";
    ++kept;
  }
  if (kept == lines) return 0;
  write_file_atomic(path, text);
  return lines - kept;
}

std::size_t drop_unfinished_rows(const std::filesystem::path& path,
                                 const std::function<bool(const CsvRow&)>& unfinished) {
  const std::size_t dropped = drop_csv_rows(path, [&](const CsvRow& row) { return !unfinished(row); });
  if (dropped > 0)
    std::printf("%s: dropped %zu rows of jobs that did not finish (they run again)\n", path.c_str(), dropped);
  return dropped;
}

RunDir::RunDir(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path))
    throw Error("cannot create the run folder '" + path.string() + "'" +
                (ec ? ": " + ec.message() : std::string()));
}

std::filesystem::path RunDir::subfolder(const std::string& name) const {
  const std::filesystem::path folder = file(name);
  std::error_code ec;
  std::filesystem::create_directory(folder, ec);  // a link to a folder counts as existing: checked next
  const std::string kind = file_kind(folder.string());
  if (kind != "a folder")
    throw Error("'" + folder.string() + "' is " + kind + ", where moelab keeps a folder of its own" +
                (ec ? " (" + ec.message() + ")" : std::string()) +
                ": moelab never writes through links; remove it, or use another --out folder");
  return folder;
}

void RunDir::write_json(const std::string& name, const nlohmann::ordered_json& j) const {
  write_text(name, j.dump(2) + "\n");
}

void RunDir::write_text(const std::string& name, const std::string& text) const {
  // Written beside and renamed over, so a reader never sees half a file.
  write_file_atomic(file(name), text);
}

CsvFile RunDir::csv(const std::string& name, const std::vector<std::string>& header) const {
  return CsvFile(file(name), header);
}

}  // namespace moelab
