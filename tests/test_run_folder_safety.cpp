// tests/test_run_folder_safety.cpp — a run folder handed over by someone else cannot turn moelab's
// writes against its user (core/safe_file.h, runner/run_folder_check.h).
//
// Each case plants what an outside audit planted (a link from a file moelab writes to a "victim"
// file elsewhere, a link for a folder, a FIFO, a user's own file with moelab's name) and checks
// two things: moelab refuses or replaces the entry, and the victim's bytes are untouched. Without
// the fixes each case fails: the victim was emptied, appended to or overwritten, or files landed
// outside the run folder. The names and settings moelab records (config.json, mode=list lines)
// must be UTF-8 without control characters: check_plain_text.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/safe_file.h"
#include "runner/checked_file.h"
#include "runner/plot.h"
#include "runner/run_dir.h"
#include "runner/run_folder_check.h"
#include "runner/run_lock.h"
#include "runner/run_start.h"
#include "temp_dir.h"

using namespace moelab;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

bool is_link(const fs::path& path) {
  std::error_code ec;
  return fs::is_symlink(fs::symlink_status(path, ec));
}

// A folder with a victim file outside the run folder `run`.
struct Scene {
  testing::TempDir tmp;
  fs::path run = tmp.path() / "run", victim = tmp.path() / "thesis.tex";
  Scene() {
    fs::create_directories(run);
    spit(victim, "my thesis\n");
  }
  bool victim_intact() const { return slurp(victim) == "my thesis\n"; }
};

}  // namespace

TEST_CASE("appending, cutting and locking never go through a link; the link's target stays as it was") {
  Scene s;
  fs::create_symlink(s.victim, s.run / "metrics.csv");
  CHECK_THROWS_WITH_AS(AppendFile(s.run / "metrics.csv"), doctest::Contains("is a symbolic link to"), Error);
  CHECK_THROWS_WITH_AS(CsvFile(s.run / "metrics.csv", {"a", "b"}), doctest::Contains("symbolic link"), Error);
  CHECK_THROWS_WITH_AS(cut_file(s.run / "metrics.csv", 0), doctest::Contains("symbolic link"), Error);
  CHECK(s.victim_intact());

  const RunDir dir(s.run);
  fs::create_symlink(s.victim, s.run / ".lock");
  const std::string lock_name = "'" + (s.run / ".lock").string() + "': it is a symbolic link";
  CHECK_THROWS_WITH_AS(lock_run_folder(dir, "all", "", "moelab x"), doctest::Contains(lock_name.c_str()), UsageError);
  CHECK(s.victim_intact());

  // A `.locks` folder that is a link to a folder elsewhere: no lock file lands there.
  fs::remove(s.run / ".lock");
  const fs::path elsewhere = s.tmp.path() / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_symlink(elsewhere, s.run / ".locks");
  CHECK_THROWS_WITH_AS(lock_run_folder(dir, "point", "p1", "moelab x"), doctest::Contains("is a symbolic link"), Error);
  CHECK(fs::is_empty(elsewhere));
  // points/ and checkpoints/ the same way.
  fs::create_symlink(elsewhere, s.run / "points");
  CHECK_THROWS_WITH_AS(dir.subfolder("points"), doctest::Contains("is a symbolic link"), Error);
  CHECK(fs::is_empty(elsewhere));
}

TEST_CASE("a FIFO where moelab appends is refused at once, not waited on for ever") {
  Scene s;
  REQUIRE(::mkfifo((s.run / "metrics.csv").c_str(), 0644) == 0);
  CHECK_THROWS_WITH_AS(AppendFile(s.run / "metrics.csv"), doctest::Contains("a FIFO"), Error);
}

TEST_CASE("a file written whole replaces a link at its name, and a link at its temporary name, never their targets") {
  Scene s;
  const RunDir dir(s.run);
  fs::create_symlink(s.victim, s.run / "summary.md");
  dir.write_text("summary.md", "the summary\n");
  CHECK(s.victim_intact());
  CHECK_FALSE(is_link(s.run / "summary.md"));
  CHECK(slurp(s.run / "summary.md") == "the summary\n");

  // The temporary name is predictable (<name>.partial.<host>.<pid>): a link planted there is
  // removed, and the file is created anew.
  const std::string temp = temporary_name((s.run / "results.csv").string());
  CHECK(temp.find(".partial." + host_name_for_files() + "." + std::to_string(::getpid())) != std::string::npos);
  fs::create_symlink(s.victim, temp);
  dir.write_text("results.csv", "a,b\n");
  CHECK(s.victim_intact());
  CHECK(slurp(s.run / "results.csv") == "a,b\n");
  CHECK_FALSE(entry_exists(temp));
}

TEST_CASE("a plot never writes through a link at its picture or its log (the audit's thesis.tex case)") {
  Scene s;
  const LinePlot plot{.title = "t", .xlabel = "x", .ylabel = "y", .series = {{"s", {1, 2, 3}, {1, 4, 9}, {}, {}}}};
  fs::create_symlink(s.victim, s.run / "loss.gnuplot.log");
  fs::create_symlink(s.victim, s.run / "loss.png");
  fs::create_symlink(s.victim, s.run / "loss.gp");
  const PlotResult r = plot_lines(plot, s.run, "loss");
  CHECK(s.victim_intact());
  if (!have_gnuplot()) {
    MESSAGE("gnuplot is not installed: the picture itself is not drawn");
    return;
  }
  CHECK(r.drawn);
  CHECK_FALSE(is_link(r.png));
  CHECK(png_complete(r.png));
  CHECK_FALSE(entry_exists((s.run / "loss.gnuplot.log").string()));
  for (const auto& entry : fs::directory_iterator(s.run))  // no drawing folder left behind
    CHECK(entry.path().filename().string().rfind(".plot.", 0) == std::string::npos);
}

TEST_CASE("a folder with links, special files or a user's files is refused before anything is written") {
  Scene s;
  CHECK_NOTHROW(check_run_folder_contents(s.run, "--out"));                 // empty: a new run folder
  CHECK_NOTHROW(check_run_folder_contents(s.tmp.path() / "nope", "--out"));  // not there yet
  spit(s.run / ".lock", "pid 1");
  fs::create_directories(s.run / ".locks");
  CHECK_NOTHROW(check_run_folder_contents(s.run, "--out"));  // a first run stopped before config.json

  spit(s.run / "loss_5x2.png", "mine");  // the user's own file, no config.json
  CHECK_THROWS_WITH_AS(check_run_folder_contents(s.run, "--out"), doctest::Contains("not a moelab run folder"), UsageError);
  spit(s.run / "config.json", "{}");  // a run folder: its pictures are moelab's
  CHECK_NOTHROW(check_run_folder_contents(s.run, "--out"));

  fs::create_directories(s.run / "points");
  fs::create_symlink(s.victim, s.run / "points" / "a.csv");  // at any depth
  const std::string linked = "points/a.csv' is a symbolic link to '" + s.victim.string() + "'";
  CHECK_THROWS_WITH_AS(check_run_folder_contents(s.run, "--out"), doctest::Contains(linked.c_str()), UsageError);
  fs::remove(s.run / "points" / "a.csv");
  REQUIRE(::mkfifo((s.run / "fig.gnuplot.log").c_str(), 0644) == 0);
  CHECK_THROWS_WITH_AS(check_run_folder_contents(s.run, "--out"), doctest::Contains("a FIFO"), UsageError);
  fs::remove(s.run / "fig.gnuplot.log");
  fs::create_symlink(s.tmp.path(), s.run / "checkpoints");  // a link to a folder is a link too
  CHECK_THROWS_WITH_AS(check_run_folder_contents(s.run, "--out"), doctest::Contains("checkpoints' is a symbolic link"),
                       UsageError);
  // open_run_folder runs the check before it writes its probe file.
  CHECK_THROWS_AS(open_run_folder(s.run.string()), UsageError);
  CHECK(s.victim_intact());
}

TEST_CASE("names and settings: UTF-8 without control characters, refused naming the argument, nothing created") {
  CHECK_NOTHROW(check_plain_text("--out", "runs/bob's run $(x) `y` -z ünïcödé 日本"));
  CHECK_THROWS_WITH_AS(check_plain_text("--out", "a\ntouch INJ #"), doctest::Contains("--out holds a newline (at byte 1)"),
                       UsageError);
  CHECK_THROWS_WITH_AS(check_plain_text("--out", "a\rb"), doctest::Contains("a carriage return"), UsageError);
  CHECK_THROWS_WITH_AS(check_plain_text("--out", std::string("a\x1b[31m", 6)), doctest::Contains("0x1B"), UsageError);
  CHECK_THROWS_WITH_AS(check_plain_text("--out", "r\xff"), doctest::Contains("not valid UTF-8 (byte 0xFF at byte 1)"),
                       UsageError);
  CHECK_THROWS_AS(check_plain_text("x", "\xc0\x80"), UsageError);          // an overlong NUL
  CHECK_THROWS_AS(check_plain_text("x", "\xed\xa0\x80"), UsageError);      // a surrogate
  CHECK_THROWS_AS(check_plain_text("x", "\xf4\x90\x80\x80"), UsageError);  // above U+10FFFF
  CHECK_THROWS_AS(check_plain_text("x", "\xe6\x97"), UsageError);          // cut short

  testing::TempDir tmp;
  const std::string bad = (tmp.path() / "r\xff").string();
  CHECK_THROWS_WITH_AS(open_run_folder(bad), doctest::Contains("--out"), UsageError);
  CHECK_FALSE(entry_exists(bad));
  Settings settings;
  settings.add_text("data_dir", "data", "where the data is");
  CHECK_THROWS_WITH_AS(settings.set("data_dir", "d\nx"), doctest::Contains("setting 'data_dir' holds a newline"), UsageError);
}
