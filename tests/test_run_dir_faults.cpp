// tests/test_run_dir_faults.cpp — the run folder when things go wrong: a full disk, a row cut
// short, a damaged cell. Every writer must fail loudly (naming the file and "No space left on
// device") and leave the folder so that the same command, with room on the disk, finishes the run.
//
// The full disk comes two ways, neither needing privileges: a file size limit (RLIMIT_FSIZE,
// tests/file_size_limit.h: writes past it fail with EFBIG, a real error from the kernel), and
// simulate_full_disk_after(n) (runner/checked_file.h: writes fail once n more bytes are
// written, as on a disk that fills up half-way through a row). (A link to /dev/full served once;
// moelab now refuses to write through links, which the last cases check.)
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/safe_file.h"
#include "runner/checked_file.h"
#include "runner/plot.h"
#include "runner/run_dir.h"
#include "file_size_limit.h"
#include "temp_dir.h"

using namespace moelab;

namespace {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Ends the simulated full disk however the test case leaves.
struct FullDiskAfter {
  explicit FullDiskAfter(std::int64_t bytes) { simulate_full_disk_after(bytes); }
  ~FullDiskAfter() { simulate_full_disk_after(-1); }
};

const std::vector<std::string> kHeader = {"job", "step", "loss"};

}  // namespace

TEST_CASE("full disk: CSV rows fail loudly, whole or not at all, and the file takes rows again later") {
  testing::TempDir tmp;
  const std::filesystem::path path = tmp.path() / "metrics.csv";
  CsvFile csv(path, kHeader);
  csv.row({"a", "1", "0.5"});
  const std::string before = slurp(path);
  {
    FullDiskAfter full(5);  // room for part of the next row only
    const std::string message = "cannot write '" + path.string() + "': No space left on device";
    CHECK_THROWS_WITH_AS(csv.row({"a", "2", "0.25"}), doctest::Contains(message.c_str()), std::runtime_error);
  }
  CHECK(slurp(path) == before);  // the half row was cut off again
  csv.row({"a", "2", "0.25"});   // room again: the same file takes the row
  const auto rows = read_csv(path);
  REQUIRE(rows.size() == 2);
  CHECK(rows[1].at("step") == "2");

  // No room at all from the kernel (a file size limit of 0 bytes): the header already fails, with
  // the kernel's reason.
  {
    testing::FileSizeLimit limit(0);
    CHECK_THROWS_WITH_AS(CsvFile(tmp.path() / "full.csv", kHeader), doctest::Contains(std::strerror(EFBIG)),
                         std::runtime_error);
  }
}

TEST_CASE("full disk: write_text and write_json fail loudly and keep the old file; a rerun succeeds") {
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "run");
  dir.write_text("summary.md", "old summary\n");
  // The file is written as summary.md.partial.<host>.<pid>, then renamed; the kernel refuses the
  // write past 1000 bytes.
  const std::string partial = temporary_name(dir.file("summary.md").string());
  {
    testing::FileSizeLimit limit(1000);
    const std::string message = "cannot write '" + partial + "': " + std::strerror(EFBIG);
    CHECK_THROWS_WITH_AS(dir.write_text("summary.md", std::string(100000, 'x')),
                         doctest::Contains(message.c_str()), std::runtime_error);
  }
  CHECK(slurp(dir.file("summary.md")) == "old summary\n");              // not cut, not emptied
  CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(partial)));  // no stale .partial
  dir.write_text("summary.md", "new summary\n");
  CHECK(slurp(dir.file("summary.md")) == "new summary\n");

  {
    FullDiskAfter full(10);
    nlohmann::ordered_json config;
    config["settings"]["steps"] = 100;
    CHECK_THROWS_WITH_AS(dir.write_json("config.json", config),
                         doctest::Contains("No space left on device"), std::runtime_error);
  }
  CHECK_FALSE(std::filesystem::exists(dir.file("config.json")));
  int entries = 0;  // summary.md only: no stale .partial
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++entries;
  CHECK(entries == 1);
}

TEST_CASE("full disk: plots fail loudly, also when gnuplot cuts the PNG and still exits with 0") {
  testing::TempDir tmp;
  LinePlot plot{.title = "t", .xlabel = "x", .ylabel = "y", .series = {{"s", {1, 2, 3}, {1, 4, 9}, {}, {}}}};
  {
    FullDiskAfter full(0);
    CHECK_THROWS_WITH_AS(plot_lines(plot, tmp.path(), "curve"), doctest::Contains("No space left on device"),
                         std::runtime_error);
  }
  // A cut PNG is not complete; gnuplot, when there is one, cut short by the kernel (a file size
  // limit it inherits) exits with 0 and must still be caught.
  spit(tmp.path() / "cut.png", std::string("\x89PNG\r\n\x1a\n", 8) + std::string(100, 'x'));
  CHECK_FALSE(png_complete(tmp.path() / "cut.png"));
  CHECK_FALSE(png_complete(tmp.path() / "missing.png"));
  if (!have_gnuplot()) return;
  {
    testing::FileSizeLimit limit(4000);  // room for the data and the script, not for the picture
    CHECK_THROWS_WITH_AS(plot_lines(plot, tmp.path(), "curve"), doctest::Contains("curve.png"), std::runtime_error);
  }
  CHECK_FALSE(std::filesystem::exists(tmp.path() / "curve.png"));  // no cut picture left as if it were one
  const PlotResult r = plot_lines(plot, tmp.path(), "curve");  // room again: the rerun draws it
  CHECK(r.drawn);
  CHECK(png_complete(r.png));
}

TEST_CASE("a row cut short is not read back and is cut off before the next row") {
  testing::TempDir tmp;
  const std::filesystem::path path = tmp.path() / "results.csv";
  spit(path, "job,step,loss\na,1,0.5\na,2,0.2");  // the last row lost its end: 0.2 may be 0.25 cut
  REQUIRE(read_csv(path).size() == 1);
  {
    CsvFile csv(path, kHeader);
    csv.row({"a", "2", "0.25"});
  }
  CHECK(slurp(path) == "job,step,loss\na,1,0.5\na,2,0.25\n");

  spit(path, "job,st");  // only part of the header: the file starts again
  {
    CsvFile csv(path, kHeader);
    csv.row({"b", "1", "1"});
  }
  CHECK(slurp(path) == "job,step,loss\nb,1,1\n");
}

TEST_CASE("cells read back are parsed whole: trailing junk is an error naming file, line and column") {
  testing::TempDir tmp;
  const std::filesystem::path path = tmp.path() / "results.csv";
  spit(path, "n,acc\n5,0.5\n5O,0.5x\n,1e-3\n");
  const auto rows = read_csv(path);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].integer("n") == 5);
  CHECK(rows[0].real("acc") == 0.5);
  CHECK(rows[2].real("acc") == 1e-3);
  CHECK_THROWS_WITH_AS(rows[1].integer("n"), doctest::Contains("results.csv, line 3, column 'n': '5O' is not an integer"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(rows[1].real("acc"), doctest::Contains("'0.5x' is not a number"), std::runtime_error);
  CHECK_THROWS_WITH_AS(rows[2].integer("n"), doctest::Contains("line 4"), std::runtime_error);  // empty
  CHECK_THROWS_WITH_AS(rows[0].integer("n "), doctest::Contains("no column 'n '"), std::runtime_error);
  CHECK_THROWS_AS(rows[0].integer("acc"), std::runtime_error);  // 0.5 is not an integer
}

TEST_CASE("drop_csv_rows keeps the chosen rows, drops rows cut short, and leaves an untouched file alone") {
  testing::TempDir tmp;
  const std::filesystem::path path = tmp.path() / "train.csv";
  CHECK(drop_csv_rows(path, [](const CsvRow&) { return true; }) == 0);  // no file
  spit(path, "job,step,loss\na,1,0.5\nb,1,0.7\na,2,0.4\nb,2");
  CHECK(drop_csv_rows(path, [](const CsvRow& r) { return r.at("job") == "a"; }) == 2);
  CHECK(slurp(path) == "job,step,loss\na,1,0.5\na,2,0.4\n");
  CHECK(drop_csv_rows(path, [](const CsvRow&) { return true; }) == 0);
  CHECK(slurp(path) == "job,step,loss\na,1,0.5\na,2,0.4\n");
}

TEST_CASE("write_file_atomic: processes writing the same file at once each land a whole file, none fails") {
  // As jobs of one grid started together write the run folder's config.json: with one shared
  // temporary name, one process renamed the other's file away and that one failed.
  testing::TempDir dir;
  const std::filesystem::path path = dir.path() / "config.json";
  constexpr int kProcesses = 8, kRounds = 200;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int status = 0;
      try {
        for (int r = 0; r < kRounds; ++r) write_file_atomic(path, std::string(1000 + p, static_cast<char>('a' + p)));
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = -1;
    ::waitpid(pid, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  const std::string text = slurp(path);
  REQUIRE(text.size() >= 1000);
  const int writer = static_cast<int>(text.size()) - 1000;
  CHECK(text == std::string(1000 + writer, static_cast<char>('a' + writer)));
  CHECK(dir.entries() == std::vector<std::string>{"config.json"});  // no temporary left behind
}
