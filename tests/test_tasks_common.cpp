// tests/test_tasks_common.cpp — the experiments' shared pieces: settings and presets, the run
// folder's CSV files (append, resume, quoting), next-token batches, model recipes, rank correlation.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "core/random.h"
#include "tasks/common/batch.h"
#include "tasks/common/models.h"
#include "nn/progress.h"
#include "runner/run_dir.h"
#include "runner/settings.h"
#include "runner/plot.h"
#include "runner/report.h"
#include "temp_dir.h"

using namespace moelab;

namespace {

Settings example_settings() {
  Settings s;
  s.add_int("steps", 100, "optimizer steps", 1, 1000);
  s.add_real("lr", 3e-3, "learning rate", 0, 1);
  s.add_text("schedule", "warmup-linear", "schedule", {"warmup-linear", "constant"});
  s.add_flag("verbose", false, "print more");
  s.add_int_list("sizes", {250, 500}, "sizes", 1, 1e6);
  s.add_real_list("lrs", {1e-3}, "learning rates", 0, 1);
  return s;
}

}  // namespace

TEST_CASE("settings: defaults, presets, --set, and typed reads") {
  Settings s = example_settings();
  CHECK(s.integer("steps") == 100);
  CHECK(s.real("lr") == doctest::Approx(3e-3));
  CHECK(s.text("schedule") == "warmup-linear");
  CHECK_FALSE(s.flag("verbose"));
  CHECK(s.ints("sizes") == std::vector<std::int64_t>{250, 500});

  s.apply(Preset{"fast", "", {{"steps", "10"}, {"sizes", "1,2,3"}}});
  s.set_assignment("steps=20");  // --set comes after the preset and wins
  s.set("verbose", "true");
  s.set("lrs", "1e-4,5e-4");
  s.set("schedule", "constant");
  CHECK(s.integer("steps") == 20);
  CHECK(s.flag("verbose"));
  CHECK(s.ints("sizes") == std::vector<std::int64_t>{1, 2, 3});
  CHECK(s.reals("lrs") == std::vector<double>{1e-4, 5e-4});
  CHECK(s.text("schedule") == "constant");

  const auto j = s.to_json();
  CHECK(j["steps"] == 20);
  CHECK(j["sizes"].size() == 3);
  CHECK(j["verbose"] == true);
  CHECK(j.begin().key() == "steps");  // declaration order
  CHECK(s.describe().find("steps = 20") != std::string::npos);
}

TEST_CASE("settings: unknown keys, malformed values and out-of-range values are usage errors") {
  Settings s = example_settings();
  CHECK_THROWS_WITH_AS(s.set("step", "1"), doctest::Contains("unknown setting 'step'"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("steps", "ten"), doctest::Contains("'ten' is not an integer"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("steps", "1.5"), doctest::Contains("not an integer"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("steps", "0"), doctest::Contains("out of range"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("steps", "1,2"), doctest::Contains("not an integer"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("lr", "nan"), doctest::Contains("not a number"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("schedule", "cosine"), doctest::Contains("not one of warmup-linear, constant"),
                       UsageError);
  CHECK_THROWS_WITH_AS(s.set("verbose", "maybe"), doctest::Contains("not true or false"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("sizes", "1,,2"), doctest::Contains("sizes"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("sizes", "1,2,"), doctest::Contains("sizes"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("sizes", ""), doctest::Contains("sizes"), UsageError);
  CHECK_THROWS_WITH_AS(s.set_assignment("steps"), doctest::Contains("key=value"), UsageError);
  CHECK(s.integer("steps") == 100);  // a rejected value changes nothing
}

TEST_CASE("settings: integers beyond 64 bits or beyond 2^53 (kept exactly) are out of range, never wrapped") {
  Settings s;
  s.add_int("steps", 100, "optimizer steps", 1, 1e9);
  s.add_int("offset", 0, "any integer");
  s.add_int_list("seeds", {0}, "seeds", 0, 1e15);
  CHECK_THROWS_WITH_AS(s.set("steps", "99999999999999999999"), doctest::Contains("out of range (must be in [1, 1000000000])"),
                       UsageError);
  CHECK_THROWS_WITH_AS(s.set("offset", "-99999999999999999999"), doctest::Contains("out of range (must be within +-2^53)"),
                       UsageError);
  CHECK_THROWS_WITH_AS(s.set("offset", "9007199254740993"), doctest::Contains("out of range"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("seeds", "0,18446744073709551615"), doctest::Contains("out of range"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("seeds", "-1"), doctest::Contains("out of range"), UsageError);
  CHECK_THROWS_WITH_AS(s.set("steps", " 5"), doctest::Contains("not an integer"), UsageError);
  s.set("offset", "-9007199254740992");
  CHECK(s.integer("offset") == -9007199254740992LL);
  CHECK(s.integer("steps") == 100);
}

TEST_CASE("run folder: CSV files append, resume, quote, and refuse another header") {
  testing::TempDir tmp;
  RunDir dir(tmp.path() / "runs" / "exp" / "demo");  // parents are created
  {
    CsvFile f = dir.csv("results.csv", {"model", "note", "value"});
    f.row({"dense-d64", "a, b", cell(0.5)});
    f.row({"moe \"8e\"", "", cell(3)});
    CHECK_THROWS(f.row({"too", "few"}));
  }
  {
    CsvFile again = dir.csv("results.csv", {"model", "note", "value"});  // resumes: no second header
    again.row({"moe-d64-4e", "x", cell(1e-3)});
  }
  const auto rows = read_csv(dir.file("results.csv"));
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].at("note") == "a, b");
  CHECK(rows[1].at("model") == "moe \"8e\"");
  CHECK(rows[1].at("value") == "3");
  CHECK(rows[2].at("value") == "0.001");
  CHECK_THROWS_WITH(dir.csv("results.csv", {"other"}), doctest::Contains("another header"));

  dir.write_text("summary.md", "first");
  dir.write_text("summary.md", "second");  // replaced whole
  std::ifstream in(dir.file("summary.md"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == "second");
  CHECK(read_csv(dir.file("missing.csv")).empty());
}

TEST_CASE("next-token batches: shift by one, pad, and mask") {
  const std::vector<std::vector<std::int32_t>> seqs = {{1, 2, 3, 4}, {5, 6}};
  const TokenBatch all = make_lm_batch(seqs, /*pad=*/0);
  CHECK(all.inputs.shape() == Shape{2, 3});
  CHECK(all.inputs.to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 2, 3, 5, 0, 0});
  CHECK(all.targets.to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{2, 3, 4, 6, kIgnoreTarget, kIgnoreTarget});
  CHECK(all.counted_targets == 4);

  const std::vector<std::vector<std::uint8_t>> masks = {{0, 0, 1, 1}, {0, 0}};
  const TokenBatch masked = make_lm_batch(seqs, 0, &masks);
  CHECK(masked.targets.to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{kIgnoreTarget, 3, 4, kIgnoreTarget, kIgnoreTarget, kIgnoreTarget});
  CHECK(masked.counted_targets == 2);

  CHECK_THROWS_WITH(make_lm_batch({{1}}, 0), doctest::Contains("at least 2"));
  CHECK_THROWS_WITH(make_lm_batch({}, 0), doctest::Contains("at least one"));
  const std::vector<std::vector<std::uint8_t>> short_mask = {{1}, {1, 1}};
  CHECK_THROWS_WITH(make_lm_batch(seqs, 0, &short_mask), doctest::Contains("loss mask 0"));
}

TEST_CASE("model recipes: names, grid, and the paper's parameter counts") {
  const std::vector<ModelSpec> grid = model_grid({32, 48}, {32}, {4, 8}, 2, 2, 4);
  REQUIRE(grid.size() == 4);
  CHECK(grid[0].name() == "dense-d32");
  CHECK(grid[2].name() == "moe-d32-4e");
  CHECK(grid[3].family() == "moe-d32");
  CHECK(ModelSpec{.d = 32, .experts = 8, .k = 1}.name() == "moe-d32-8e-top1");

  Generator gen(1);
  const auto dense = build_decoder(grid[0], 39, 16, gen);
  const auto moe = build_decoder(grid[3], 39, 16, gen);
  const ModelSize ds = model_size(*dense), ms = model_size(*moe);
  const std::int64_t d = 32, L = 2, E = 8, k = 2;
  // Dense: L (4 d^2 attention + 2 d^2 FFN + 2 d norms) + d final norm.
  CHECK(ds.non_embedding == L * (6 * d * d + 2 * d) + d);
  CHECK(ds.active == ds.non_embedding);
  // MoE: the FFN becomes a router (E d) and E experts of 2 d^2; one token uses k of them.
  CHECK(ms.non_embedding == L * (4 * d * d + 2 * d + E * d + E * 2 * d * d) + d);
  CHECK(ms.active == ms.non_embedding - L * (E - k) * 2 * d * d);
  // FFN factor 2: a dense model with the active parameters of a top-2 MoE of its width, less the router.
  const std::vector<ModelSpec> wide = model_grid({32}, {}, {}, 2, 2, 4, {1, 2});
  REQUIRE(wide.size() == 2);
  CHECK(wide[1].name() == "dense-d32-f64");
  const ModelSize ws = model_size(*build_decoder(wide[1], 39, 16, gen));
  CHECK(ws.active == ms.active - L * E * d);
  CHECK_NOTHROW(check_model_grid(grid));
  CHECK_THROWS_WITH_AS(check_model_grid({ModelSpec{.d = 36, .heads = 4}}), doctest::Contains("even head width"),
                       UsageError);
  CHECK_THROWS_WITH_AS(check_model_grid({ModelSpec{.d = 32, .experts = 1, .k = 2}}), doctest::Contains("k = 2"),
                       UsageError);
  CHECK_THROWS_AS(check_model_grid({}), UsageError);
  CHECK_THROWS(build_decoder(ModelSpec{.d = 30, .heads = 4}, 39, 16, gen));
  CHECK_THROWS(build_decoder(ModelSpec{.d = 32, .experts = 1, .k = 2}, 39, 16, gen));
}

TEST_CASE("rank correlation and clock text") {
  CHECK(rank_correlation({1, 2, 3, 4}, {10, 20, 30, 40}) == doctest::Approx(1.0));
  CHECK(rank_correlation({1, 2, 3, 4}, {4, 3, 2, 1}) == doctest::Approx(-1.0));
  CHECK(rank_correlation({1, 2, 3}, {1, 1, 1}) != rank_correlation({1, 2, 3}, {1, 1, 1}));  // NaN: constant
  CHECK(std::isnan(rank_correlation({1, 2}, {1, 2})));
  CHECK(clock_text(7) == "0:07");
  CHECK(clock_text(205) == "3:25");
  CHECK(clock_text(3723) == "1:02:03");
}

TEST_CASE("mean_std: the sample std (/ (n - 1)) by default, the population std (/ n) on request") {
  // {2, 4, 4, 4, 5, 5, 7, 9}: mean 5, sum of squares 32.
  const std::vector<double> v{2, 4, 4, 4, 5, 5, 7, 9};
  CHECK(mean_std(v).mean == 5.0);
  CHECK(mean_std(v).std == doctest::Approx(std::sqrt(32.0 / 7.0)));
  CHECK(mean_std(v, StdKind::Population).std == doctest::Approx(2.0));
  CHECK(mean_std({3.0}, StdKind::Population).std == 0.0);
  CHECK(std::isnan(mean_std({}).mean));
}

TEST_CASE("plots with seed error bars: series_by_family carries them, the data has 4 columns, gnuplot draws yerrorlines") {
  const std::vector<Series> s = series_by_family({{"moe", 20, 2, 1.5, 2.5}, {"moe", 10, 1, NAN, NAN}, {"dense", 5, 3}});
  REQUIRE(s.size() == 2);
  CHECK(s[0].title == "moe");
  CHECK(s[0].x == std::vector<double>{10, 20});  // sorted by x, the bounds with their points
  REQUIRE(s[0].has_bars());
  CHECK(std::isnan(s[0].y_low[0]));
  CHECK(s[0].y_low[1] == 1.5);
  CHECK(s[0].y_high[1] == 2.5);
  CHECK(!s[1].has_bars());  // no bound anywhere in the family: no bars
  testing::TempDir tmp;
  LinePlot plot{.title = "t", .xlabel = "x", .ylabel = "y", .log_x = true, .log_y = false, .series = s};
  const PlotResult r = plot_lines(plot, tmp.path(), "bars");
  std::ifstream dat(tmp.file("bars.dat")), gp(tmp.file("bars.gp"));
  const std::string data((std::istreambuf_iterator<char>(dat)), {}), script((std::istreambuf_iterator<char>(gp)), {});
  CHECK(data.find("10 1 1 1\n20 2 1.5 2.5\n") != std::string::npos);  // an undefined bound: no bar there
  CHECK(data.find("5 3\n") != std::string::npos);
  CHECK(script.find("index 0 using 1:2:3:4 with yerrorlines") != std::string::npos);
  CHECK(script.find("index 1 using 1:2 with linespoints") != std::string::npos);
  CHECK(script.find("set offsets 0, 0, graph 0.05, graph 0.05\n") != std::string::npos);  // caps clear of the frame
  CHECK(r.drawn == have_gnuplot());
  // No bars, or a log y axis: no margin (it would stretch the axis to the next tic or decade).
  LinePlot plain{.title = "t", .xlabel = "x", .ylabel = "y", .log_x = false, .log_y = false, .series = {s[1]}};
  LinePlot log_y = plot;
  log_y.log_y = true;
  for (const LinePlot* p : {&plain, &log_y}) {
    plot_lines(*p, tmp.path(), "margin");
    std::ifstream in(tmp.file("margin.gp"));
    CHECK(std::string((std::istreambuf_iterator<char>(in)), {}).find("set offsets") == std::string::npos);
  }
  // Nothing to draw: no PNG (an earlier one is removed), and the message says why.
  LinePlot empty{.title = "t", .xlabel = "x", .ylabel = "y", .log_x = true, .log_y = false, .series = {}};
  { std::ofstream old(tmp.file("none.png")); old << "old"; }
  const PlotResult n = plot_lines(empty, tmp.path(), "none");
  CHECK(!n.drawn);
  CHECK(n.message == "no point to plot yet");
  CHECK(!std::filesystem::exists(tmp.file("none.png")));
}

TEST_CASE("heat maps with seed spreads: each cell's std goes into the data and under its value") {
  testing::TempDir tmp;
  HeatMap h{.title = "t", .xlabel = "student", .ylabel = "teacher", .column_labels = {"a", "b"},
            .row_labels = {"x", "y"}, .values = {{0.1, 0.2}, {0.3, NAN}}};
  h.spread = {{0.01, NAN}, {0.03, NAN}};
  const PlotResult r = plot_heat_map(h, tmp.path(), "map");
  std::ifstream dat(tmp.file("map.dat")), gp(tmp.file("map.gp"));
  const std::string data((std::istreambuf_iterator<char>(dat)), {}), script((std::istreambuf_iterator<char>(gp)), {});
  CHECK(data.find("0 0 0.1 0.01\n") != std::string::npos);
  CHECK(data.find("1 0 0.2 nan\n") != std::string::npos);  // one seed: no spread, the value alone
  CHECK(script.find("(!valid(3) ? '' : valid(4) ? sprintf(\"%.3f\\n± %.3f\", $3, $4) : sprintf('%.3f', $3))") !=
        std::string::npos);  // a missing cell gets no label, one without a spread its value alone
  CHECK(r.drawn == have_gnuplot());
  // A spread of another shape is ignored, not read out of bounds.
  h.spread = {{0.01}};
  plot_heat_map(h, tmp.path(), "map2");
  std::ifstream gp2(tmp.file("map2.gp"));
  const std::string script2((std::istreambuf_iterator<char>(gp2)), {});
  CHECK(script2.find("± %.3f") == std::string::npos);
}
