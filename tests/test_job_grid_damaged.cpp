// tests/test_job_grid_damaged.cpp — a report that cannot read a point result names the file
// (runner/job_grid.h, run_job_grid).
//
// A point result edited by hand or damaged on disk surfaces inside the report as the JSON
// library's "type_error.302: type must be number, but is string", naming nothing. run_job_grid
// then points at the likely damaged files: the ones whose fields' types differ from most others',
// including fields inside arrays of objects (an audit's damaged `runs[].best` was reported as "no
// point result differs"), and, when there is no majority to go by, the files that disagree.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "runner/job_grid.h"
#include "temp_dir.h"

using namespace moelab;

namespace {

Settings grid_settings() {
  Settings s;
  add_job_settings(s, "p0");
  s.set("mode", "report");
  return s;
}

// A grid of `names` whose report reads every point's runs[].best as a number.
int report(const RunDir& dir, const std::vector<std::string>& names) {
  const Settings s = grid_settings();
  const RunContext ctx{s, dir, "toy", 0, 1, Device::cpu(), "moelab"};
  JobGrid g;
  g.experiment = "toy";
  g.points = names;
  g.settings = grid_settings;
  g.run_point = [](std::size_t) {};
  g.report = [&] {
    for (const std::string& name : names) {
      const nlohmann::json j = *read_point(dir, name);
      for (const auto& run : j.at("runs")) (void)run.at("best").get<double>();
    }
  };
  return run_job_grid(ctx, g);
}

nlohmann::ordered_json result(const nlohmann::ordered_json& best) {
  nlohmann::ordered_json j;
  j["row"] = {{"model", "m"}};
  j["runs"] = nlohmann::ordered_json::array({{{"lr", 0.1}, {"best", 0.5}}, {{"lr", 0.2}, {"best", best}}});
  return j;
}

std::string error_of(const RunDir& dir, const std::vector<std::string>& names) {
  try {
    report(dir, names);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a damaged field inside an array of a point result is found by the others' majority, naming the file") {
  testing::TempDir tmp;
  const RunDir dir(tmp.path());
  for (const char* name : {"p0", "p1", "p2", "p3"}) write_point(dir, name, result(0.75));
  write_point(dir, "p2", result("0.75"));  // a number turned into text
  const std::string message = error_of(dir, {"p0", "p1", "p2", "p3"});
  CAPTURE(message);
  CHECK(message.find("Likely damaged: points/p2.json: 'runs[].best' is a number/string where 3 others have a number") !=
        std::string::npos);
}

TEST_CASE("with no majority to go by, the files that disagree, or the only file, are named") {
  testing::TempDir tmp;
  const RunDir dir(tmp.path());
  write_point(dir, "p0", result(0.75));
  write_point(dir, "p1", result("x"));
  std::string message = error_of(dir, {"p0", "p1"});
  CAPTURE(message);
  CHECK(message.find("points/p0.json has a number, points/p1.json has a number/string") != std::string::npos);

  testing::TempDir one;
  const RunDir single(one.path());
  write_point(single, "p0", result("x"));
  message = error_of(single, {"p0"});
  CHECK(message.find("The one finished point result is points/p0.json") != std::string::npos);
}
