// tests/test_run_start.cpp — what happens before a run writes anything (runner/run_start.h):
// the seed's text, the run folder's checks, and resuming, which is refused when the folder holds
// a run with other settings that change results (every differing key named, with both values),
// and allowed when only threads, device or keys declared with may_change_on_resume differ; a key
// the folder's record lacks (added to the code later) counts as its default.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "runner/run_lock.h"
#include "runner/run_start.h"
#include "temp_dir.h"

using namespace moelab;

namespace {

Settings example_settings() {
  Settings s;
  s.add_int("steps", 100, "optimizer steps", 1, 1000000);
  s.add_real("lr", 3e-3, "learning rate", 0, 1);
  s.add_int_list("sizes", {250, 500}, "sizes to sweep (each a job of its own)", 1, 1e6);
  s.add_text("mode", "all", "which part to run", {"all", "report"});
  s.may_change_on_resume({"sizes", "mode"});
  return s;
}

Settings with(std::vector<std::string> sets) {
  Settings s = example_settings();
  for (const std::string& kv : sets) s.set_assignment(kv);
  return s;
}

nlohmann::ordered_json config_of(const Settings& s, std::uint64_t seed = 0, int threads = 1,
                                 const std::string& device = "cpu") {
  return run_config("example", "demo", seed, threads, device, "moelab example", s);
}

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("seeds: decimal digits from 0 to 2^64 - 1; -1, overflow and junk are usage errors") {
  CHECK(parse_seed("0") == 0);
  CHECK(parse_seed("42") == 42);
  CHECK(parse_seed("18446744073709551615") == 18446744073709551615ULL);
  for (const char* bad : {"-1", "18446744073709551616", "99999999999999999999999", "", "12x", "+3", " 1", "1e3"})
    CHECK_THROWS_WITH_AS(parse_seed(bad), doctest::Contains("is not a whole number from 0 to 18446744073709551615"),
                         UsageError);
}

TEST_CASE("the run folder: an empty name, a folder that cannot be made, or a file are usage errors") {
  testing::TempDir tmp;
  CHECK_THROWS_WITH_AS(open_run_folder(""), doctest::Contains("--out: the folder name is empty"), UsageError);
  { std::ofstream(tmp.file("a-file")) << "x"; }
  CHECK_THROWS_WITH_AS(open_run_folder(tmp.file("a-file")), doctest::Contains("exists and is not a folder"), UsageError);
  CHECK_THROWS_WITH_AS(open_run_folder(tmp.file("a-file") + "/run"), doctest::Contains("cannot create the folder"),
                       UsageError);
  const RunDir dir = open_run_folder(tmp.file("new/run"));
  CHECK(std::filesystem::is_directory(dir.path()));
  CHECK(std::filesystem::is_empty(dir.path()));  // the write probe is gone again
}

TEST_CASE("resuming with other settings is refused, naming every differing key; config.json stays") {
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "run");
  const Settings first = with({"steps=100"});
  CHECK_NOTHROW(begin_run(dir, config_of(first), first));  // a new folder: nothing to compare
  const std::string record = slurp(dir.file("config.json"));

  const Settings other = with({"steps=5", "lr=0.01"});
  try {
    begin_run(dir, config_of(other, 7), other);
    FAIL("resumed with other settings");
  } catch (const UsageError& err) {
    const std::string m = err.what();
    CHECK(m.find("--seed = 0 there, 7 now") != std::string::npos);
    CHECK(m.find("steps = 100 there, 5 now") != std::string::npos);
    CHECK(m.find("lr = 0.003 there, 0.01 now") != std::string::npos);
    CHECK(m.find("sizes") != std::string::npos);  // listed among the keys that may change
  }
  CHECK(slurp(dir.file("config.json")) == record);  // the earlier run's record is kept

  // The same settings, or differences only in threads, device and keys that may change: resumed.
  CHECK_NOTHROW(check_resume(dir, config_of(first, 0, 8, "cuda"), first));
  const Settings more_jobs = with({"steps=100", "sizes=250,500,1000", "mode=report"});
  CHECK_NOTHROW(begin_run(dir, config_of(more_jobs), more_jobs));

  // Another experiment's folder, or a record that cannot be read, is refused too.
  nlohmann::ordered_json elsewhere = config_of(first);
  elsewhere["experiment"] = "phonebook";
  CHECK_THROWS_WITH_AS(check_resume(dir, elsewhere, first),
                       doctest::Contains("experiment = \"example\" there, \"phonebook\" now"), UsageError);
  { std::ofstream(dir.file("config.json"), std::ios::trunc) << "{\"settings\": {\"steps\": 1"; }
  CHECK_THROWS_WITH_AS(check_resume(dir, config_of(first), first), doctest::Contains("cannot be read"), UsageError);
}

TEST_CASE("config.json names the code: the git commit the binary was built from, and the CPU") {
  const nlohmann::ordered_json config = config_of(example_settings());
  REQUIRE(config.contains("commit"));
  const std::string commit = config["commit"].get<std::string>();
  // "unknown" outside a git checkout; else 12 hex digits, "+dirty" with uncommitted changes.
  const std::string head = commit.substr(0, commit.find('+'));
  const bool hex = head.size() == 12 && head.find_first_not_of("0123456789abcdef") == std::string::npos;
  CHECK((commit == "unknown" || (hex && (commit.size() == 12 || commit.substr(12) == "+dirty"))));
  CHECK(config.contains("cpu"));
}

TEST_CASE("a setting the folder's record lacks (added to the code later) counts as its default") {
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "run");
  // The earlier run's code had no `router` setting; the code now declares it with the old behaviour
  // as its default.
  const Settings old = example_settings();
  begin_run(dir, config_of(old), old);
  auto now = [](const std::string& router) {
    Settings s = example_settings();
    s.add_text("router", "topk", "routing scheme", {"topk", "top-p"});
    s.set("router", router);
    return s;
  };
  CHECK_NOTHROW(check_resume(dir, config_of(now("topk")), now("topk")));  // the default: what the old run did
  CHECK_THROWS_WITH_AS(
      check_resume(dir, config_of(now("top-p")), now("top-p")),
      doctest::Contains("router = \"topk\" there (not recorded: the folder predates the setting, so its default), "
                        "\"top-p\" now"),
      UsageError);
  // A preset that sets the key is compared the same way: the value the run ends up with counts.
  Settings preset = now("topk");
  preset.apply(Preset{"p", "", {{"router", "top-p"}}});
  CHECK_THROWS_AS(check_resume(dir, config_of(preset), preset), UsageError);
  // Keys the record has are compared as before.
  CHECK_THROWS_WITH_AS(check_resume(dir, config_of(with({"steps=7"})), with({"steps=7"})),
                       doctest::Contains("steps = 100 there, 7 now"), UsageError);
}

TEST_CASE("config.json names the kernels and the build: compiler, Eigen, type and flags") {
  const nlohmann::ordered_json config = config_of(example_settings());
  const std::string kernels = config.at("kernels").get<std::string>();
  CHECK((kernels == "generic" || kernels == "avx2" || kernels == "avx512"));
  for (const char* key : {"compiler", "eigen", "type", "flags"}) {
    INFO(key);
    CHECK(!config.at("build").at(key).get<std::string>().empty());
    CHECK(config.at("build").at(key).get<std::string>() != "unknown");
  }
  CHECK(config.at("build").at("flags").get<std::string>().find("EIGEN_FAST_MATH=0") != std::string::npos);
}

TEST_CASE("a folder with results but no config.json is refused: whose settings made them is unknown") {
  moelab::testing::TempDir tmp;
  const RunDir dir = open_run_folder(tmp.file("run"));
  std::filesystem::create_directories(dir.file("points"));
  const Settings s = example_settings();
  CHECK_THROWS_WITH_AS(begin_run(dir, config_of(s), s), doctest::Contains("no config.json"), UsageError);
  CHECK(!std::filesystem::exists(dir.file("config.json")));
  std::filesystem::remove(dir.file("points"));
  CHECK_NOTHROW(begin_run(dir, config_of(s), s));  // empty: a new run
}

TEST_CASE("a damaged config.json is refused with a message naming it: a folder, a FIFO, 100,000 levels deep") {
  moelab::testing::TempDir tmp;
  const Settings s = example_settings();
  {
    const RunDir dir = open_run_folder(tmp.file("folder"));
    std::filesystem::create_directories(dir.file("config.json"));
    CHECK_THROWS_WITH_AS(begin_run(dir, config_of(s), s), doctest::Contains("is a folder"), UsageError);
  }
  {
    const RunDir dir = open_run_folder(tmp.file("fifo"));
    REQUIRE(::mkfifo(dir.file("config.json").c_str(), 0644) == 0);
    CHECK_THROWS_WITH_AS(begin_run(dir, config_of(s), s), doctest::Contains("not a regular file"), UsageError);
  }
  {
    // A stack overflow before (the DOM's copy recursed once per level): refused before parsing.
    const RunDir dir = open_run_folder(tmp.file("deep"));
    std::ofstream(dir.file("config.json")) << "{\"settings\": {\"steps\": " << std::string(100000, '[')
                                           << std::string(100000, ']') << "}}";
    CHECK_THROWS_WITH_AS(begin_run(dir, config_of(s), s), doctest::Contains("nested deeper than"), UsageError);
  }
  {
    // A huge value in the record: the message names its size, not its 5,000,000 elements.
    const RunDir dir = open_run_folder(tmp.file("huge"));
    std::string values;
    for (int i = 0; i < 5000000; ++i) values += i ? ",7" : "7";
    std::ofstream(dir.file("config.json")) << "{\"experiment\": \"example\", \"seed\": 0, \"settings\": {\"steps\": ["
                                           << values << "]}}";
    try {
      begin_run(dir, config_of(s), s);
      FAIL("a record with other settings was accepted");
    } catch (const UsageError& e) {
      const std::string message = e.what();
      CHECK(message.find("an array of 5000000 elements") != std::string::npos);
      CHECK(message.size() < 2000);
    }
  }
}

TEST_CASE("one writer per run folder: a second run is refused naming the first; jobs of a grid share it") {
  moelab::testing::TempDir tmp;
  const RunDir dir = open_run_folder(tmp.file("run"));
  {
    const RunLock all = lock_run_folder(dir, "all", "", "moelab example --out run");
    // flock locks belong to an open file: a second open in this process conflicts as another
    // process would.
    CHECK_THROWS_WITH_AS(lock_run_folder(dir, "all", "", "second"), doctest::Contains("moelab example --out run"),
                         UsageError);
    CHECK_THROWS_WITH_AS(lock_run_folder(dir, "point", "p1", "job"), doctest::Contains("is in use by pid"),
                         UsageError);
    CHECK_THROWS_AS(lock_run_folder(dir, "report", "", "report"), UsageError);
  }
  {
    const RunLock p1 = lock_run_folder(dir, "point", "p1", "moelab example --set point=p1");
    const RunLock p2 = lock_run_folder(dir, "point", "p2", "moelab example --set point=p2");  // shared: fine
    const RunLock list = lock_run_folder(dir, "list", "", "moelab example --set mode=list");
    CHECK_THROWS_WITH_AS(lock_run_folder(dir, "point", "p1", "again"), doctest::Contains("point=p1"), UsageError);
    // A run of the whole grid waits for nothing and names the running jobs.
    CHECK_THROWS_WITH_AS(lock_run_folder(dir, "all", "", "all"), doctest::Contains("jobs of its grid"), UsageError);
  }
  CHECK_NOTHROW(lock_run_folder(dir, "all", "", "after the jobs"));  // released with the RunLocks

  // Killed with SIGKILL, a holder leaves no lock behind: the kernel releases it.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      const RunLock held = lock_run_folder(dir, "all", "", "the child");
      [[maybe_unused]] const ssize_t n = ::write(ready[1], "x", 1);
      ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  char byte;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  CHECK_THROWS_WITH_AS(lock_run_folder(dir, "all", "", "parent"), doctest::Contains("the child"), UsageError);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  CHECK_NOTHROW(lock_run_folder(dir, "all", "", "parent"));
}
