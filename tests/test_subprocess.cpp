// tests/test_subprocess.cpp — programs run with no shell (runner/subprocess.h): arguments
// and folder names reach the program as they are, whatever characters they hold, and nothing in
// them is ever executed. The plot writer, which once ran gnuplot through a shell, draws in a
// folder named like a shell injection and nothing is injected.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runner/plot.h"
#include "runner/subprocess.h"
#include "temp_dir.h"

using namespace moelab;

namespace {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every file named INJECTED* under root (what the hostile names below would create through a shell).
int injected_files(const std::filesystem::path& root) {
  int n = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root))
    if (entry.path().filename().string().rfind("INJECTED", 0) == 0) ++n;
  return n;
}

// Names a shell would act on: a quote, ';', '$(...)', backticks, spaces, a newline, '&&', '|'.
const std::vector<std::string> kHostileNames = {
    "bob's run", "x'; touch INJECTED1; echo '", "$(touch INJECTED2)", "`touch INJECTED3`",
    "a b\nc; touch INJECTED4", "x && touch INJECTED5 | cat", "\"quoted\" 'both'"};

// Runs the test from inside `dir`, so that a file a shell would create "here" lands where
// injected_files looks.
struct InFolder {
  explicit InFolder(const std::filesystem::path& dir) : before(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~InFolder() { std::filesystem::current_path(before); }
  std::filesystem::path before;
};

}  // namespace

TEST_CASE("run_program: arguments arrive as they are, and nothing in them runs") {
  moelab::testing::TempDir tmp;
  InFolder here(tmp.path());
  const auto printf_path = find_program("printf");
  REQUIRE(printf_path);
  for (const std::string& name : kHostileNames) {
    INFO(name);
    const ProgramResult r = run_program({printf_path->string(), "%s", name}, tmp.path(), "", "out.txt");
    CHECK(r.ok());
    CHECK(slurp(tmp.path() / "out.txt") == name);
  }
  CHECK(injected_files(tmp.path()) == 0);
}

TEST_CASE("run_program: runs in a folder of any name, and says why it could not start or failed") {
  moelab::testing::TempDir tmp;
  InFolder here(tmp.path());
  const auto pwd = find_program("pwd"), false_program = find_program("false"), sh = find_program("sh");
  REQUIRE(pwd);
  REQUIRE(false_program);
  REQUIRE(sh);
  for (const std::string& name : kHostileNames) {
    INFO(name);
    const std::filesystem::path dir = tmp.path() / name;
    std::filesystem::create_directories(dir);
    const ProgramResult r = run_program({pwd->string(), "-P"}, dir, "err.txt", "out.txt");
    CHECK(r.ok());
    CHECK(slurp(dir / "out.txt") == std::filesystem::canonical(dir).string() + "\n");
  }
  CHECK(injected_files(tmp.path()) == 0);

  const ProgramResult failed = run_program({false_program->string()}, tmp.path(), "");
  CHECK(failed.started);
  CHECK(!failed.ok());
  CHECK(failed.describe() == "exit status 1");
  // stderr lands in the file named, relative to the folder the program runs in.
  const ProgramResult err = run_program({sh->string(), "-c", "echo oops >&2; exit 3"}, tmp.path(), "e.log");
  CHECK(err.describe() == "exit status 3");
  CHECK(slurp(tmp.path() / "e.log") == "oops\n");
  const ProgramResult killed = run_program({sh->string(), "-c", "kill -9 $$"}, tmp.path(), "");
  CHECK(killed.describe() == "killed by signal 9");

  const ProgramResult missing = run_program({(tmp.path() / "no-such-program").string()}, tmp.path(), "");
  CHECK(!missing.started);
  CHECK(missing.describe().find("no-such-program") != std::string::npos);
  const ProgramResult no_folder = run_program({pwd->string()}, tmp.path() / "no-such-folder", "");
  CHECK(!no_folder.started);
  CHECK(no_folder.error.find("no-such-folder") != std::string::npos);
  CHECK(!run_program({}, tmp.path(), "").started);

  CHECK(!find_program("no-such-program-moelab"));
  CHECK(!find_program(""));
  CHECK(find_program(sh->string()) == sh);  // a path is taken as it is
}

TEST_CASE("plots are drawn in a run folder whose name is a shell injection, and nothing is injected") {
  if (!have_gnuplot()) {
    MESSAGE("gnuplot is not installed: the plot part is left out (run_program is checked above)");
    return;
  }
  moelab::testing::TempDir tmp;
  InFolder here(tmp.path());
  for (const std::string& name : kHostileNames) {
    INFO(name);
    const std::filesystem::path dir = tmp.path() / name;
    std::filesystem::create_directories(dir);
    LinePlot plot;
    plot.title = "it's a 'title'; $(touch INJECTED9)", plot.xlabel = "x", plot.ylabel = "y";
    plot.series.push_back({"s", {1, 2, 3}, {1, 4, 9}, {}, {}});
    const PlotResult r = plot_lines(plot, dir, "curve");
    CHECK(r.drawn);
    CHECK(png_complete(dir / "curve.png"));
  }
  CHECK(injected_files(tmp.path()) == 0);
}
