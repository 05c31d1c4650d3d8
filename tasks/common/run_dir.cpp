// tasks/common/run_dir.cpp — see run_dir.h.
#include "tasks/common/run_dir.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

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
  std::ostringstream s;
  s.precision(6);
  s << value;
  return s.str();
}

CsvFile::CsvFile(const std::filesystem::path& path, const std::vector<std::string>& header)
    : path_(path), header_(header) {
  bool fresh = true;
  {
    std::ifstream in(path);
    std::string first;
    if (in && std::getline(in, first) && !first.empty()) {
      if (first != join(header))
        throw std::runtime_error("'" + path.string() + "' exists with another header (" + first +
                                 "); use another --out folder or delete the file");
      fresh = false;
    }
  }
  out_.open(path, std::ios::app);
  if (!out_) throw std::runtime_error("cannot write '" + path.string() + "'");
  if (fresh) out_ << join(header) << "\n" << std::flush;
}

void CsvFile::row(const std::vector<std::string>& cells) {
  if (cells.size() != header_.size())
    throw std::logic_error("CsvFile " + path_.string() + ": a row of " + std::to_string(cells.size()) +
                           " cells for " + std::to_string(header_.size()) + " columns");
  out_ << join(cells) << "\n" << std::flush;
}

std::vector<std::map<std::string, std::string>> read_csv(const std::filesystem::path& path) {
  std::vector<std::map<std::string, std::string>> rows;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return rows;
  const std::vector<std::string> header = split_line(line);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split_line(line);
    if (cells.size() != header.size()) continue;  // a row cut short by a crash
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

RunDir::RunDir(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path))
    throw std::runtime_error("cannot create the run folder '" + path.string() + "'" +
                             (ec ? ": " + ec.message() : std::string()));
}

void RunDir::write_json(const std::string& name, const nlohmann::ordered_json& j) const {
  write_text(name, j.dump(2) + "\n");
}

void RunDir::write_text(const std::string& name, const std::string& text) const {
  // Written beside and renamed over, so a reader never sees half a file.
  const std::filesystem::path target = file(name), temp = file(name + ".partial");
  {
    std::ofstream out(temp, std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write '" + temp.string() + "'");
  }
  std::filesystem::rename(temp, target);
}

CsvFile RunDir::csv(const std::string& name, const std::vector<std::string>& header) const {
  return CsvFile(file(name), header);
}

}  // namespace moelab
