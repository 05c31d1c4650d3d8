// tests/test_softmoe_l2norm.cpp — the implicit-bias paper's Appendix C (docs/REFERENCES.md;
// tasks/softmoe_l2norm/):
// the data and its tokenisation, the constant predictor's loss, the model's sizes (expert width
// 10d/n, 20 d^2 expert parameters, a head without parameters), the paper's effect at toy size, and
// the `moelab softmoe-l2norm` command end to end (files, resuming, bad settings).
//
// The effect at toy size (the test's setting: 400 steps of 256 fresh samples, Adam lr 3e-3 —
// three times the paper's 1e-3 so that 400 steps suffice; 2-4 s per model on one thread).
// Measured final losses (mean of the last 5% of the steps) for seeds 0-4 of the test's seeding,
// against the best constant's Var||x|| = 2.435:
//   5x2, n = 1:   6.91 7.12 6.30 6.87 6.67   (2.6 - 2.9 x the constant: never below it; the
//                                             bias-free model cannot even output a constant)
//   5x2, n = 10:  0.75 0.80 0.70 0.50 0.64   (0.21 - 0.33 x)
//   2x5, n = 1:   2.59 2.60 2.51 2.61 2.61   (1.03 - 1.07 x: at the constant, as the paper says)
// The test runs seed 0 and asserts n = 1 >= 0.9 x the constant (both tokenisations: measured at
// least 1.03 x), 5x2 n = 10 <= 0.5 x the constant (measured at most 0.33 x) and n = 10 below a
// fifth of n = 1 (measured: 9 to 14 times below).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "autograd/no_grad.h"
#include "autograd/ops.h"
#include "core/factories.h"
#include "core/parallel.h"
#include "runner/checked_file.h"
#include "runner/run_dir.h"
#include "runner/run_start.h"
#include "tasks/softmoe_l2norm/l2norm.h"
#include "tasks/softmoe_l2norm/l2norm_experiment.h"
#include "temp_dir.h"

using namespace moelab;
using namespace moelab::l2norm;

TEST_CASE("softmoe-l2norm: tokens are the coordinates of x in index order, labels are ||x||, variance 5") {
  for (std::int64_t d : {2, 5}) {
    CAPTURE(d);
    Generator gen(3);
    const std::int64_t B = 20000, m = 10 / d;
    const Batch b = draw_batch(B, 10, d, 5.0, gen);
    REQUIRE(b.x.shape() == Shape{B, m, d});
    REQUIRE(b.y.shape() == Shape{B});
    // The same draw as a flat [B, 10] sample: token i, value j is coordinate i*d + j.
    Generator again(3);
    const std::vector<float> flat = normal({B, 10}, 0.0, std::sqrt(5.0), again).to_vector<float>();
    const std::vector<float> x = b.x.to_vector<float>(), y = b.y.to_vector<float>();
    for (std::int64_t s : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, B - 1})
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < d; ++j)
          CHECK(x[static_cast<std::size_t>((s * m + i) * d + j)] == flat[static_cast<std::size_t>(s * 10 + i * d + j)]);
    double sum = 0, sq = 0, label_sum = 0, label_sq = 0;
    for (std::int64_t s = 0; s < B; ++s) {
      double n2 = 0;
      for (std::int64_t j = 0; j < 10; ++j) {
        const double v = x[static_cast<std::size_t>(s * 10 + j)];
        sum += v, sq += v * v, n2 += v * v;
      }
      CHECK(y[static_cast<std::size_t>(s)] == doctest::Approx(std::sqrt(n2)).epsilon(1e-6));
      label_sum += y[static_cast<std::size_t>(s)], label_sq += double(y[static_cast<std::size_t>(s)]) * y[static_cast<std::size_t>(s)];
    }
    const double n = static_cast<double>(B * 10);
    CHECK(std::abs(sum / n) < 0.03);                 // mean 0 (std of the mean: sqrt(5 / 2e5) = 0.005)
    CHECK(sq / n == doctest::Approx(5.0).epsilon(0.02));  // VARIANCE 5, not std 5
    // The labels' mean and variance are the closed forms the report uses.
    const double mean = label_sum / B, var = label_sq / B - mean * mean;
    CHECK(mean == doctest::Approx(expected_norm(10, 5.0)).epsilon(0.01));
    CHECK(var == doctest::Approx(constant_predictor_loss(10, 5.0)).epsilon(0.05));
  }
  // E chi_10 = sqrt(2) Gamma(11/2) / Gamma(5) = sqrt(2) (945 sqrt(pi) / 32) / 24 = 945 sqrt(2 pi) / 768
  // = 3.0843; Var = 5 (10 - 3.0843^2) = 2.4346.
  CHECK(expected_norm(10, 5.0) == doctest::Approx(std::sqrt(5.0) * 945 * std::sqrt(2 * M_PI) / 768).epsilon(1e-12));
  CHECK(constant_predictor_loss(10, 5.0) == doctest::Approx(2.4346).epsilon(1e-4));
  CHECK(constant_predictor_loss(1, 1.0) == doctest::Approx(1.0 - 2.0 / M_PI).epsilon(1e-12));  // half-normal
}

TEST_CASE("softmoe-l2norm: expert width 10d/n keeps 20 d^2 expert parameters; the head has none") {
  for (std::int64_t d : {2, 5})
    for (std::int64_t n : {1, 2, 5, 10}) {
      CAPTURE(d);
      CAPTURE(n);
      ModelSpec s;
      s.d = d, s.experts = n;
      CHECK(s.hidden() == 10 * d / n);
      CHECK(s.tokens() == 10 / d);
      CHECK(s.expert_parameters() == 20 * d * d);
      CHECK(s.router_parameters() == d * n);
      Generator gen(1);
      L2NormModel model(s, gen);
      // Every parameter is the Soft MoE's: phi [d, n], w_in [n, d, h], w_out [n, h, d]; nothing else.
      const auto named = model.named_parameters();
      REQUIRE(named.size() == 3);
      CHECK(named[0].first == "moe.phi");
      CHECK(named[1].first == "moe.experts.w_in");
      CHECK(named[2].first == "moe.experts.w_out");
      CHECK(named[1].second.shape() == Shape{n, d, 10 * d / n});
      CHECK(model.num_parameters() == 20 * d * d + d * n);
      CHECK(model.num_parameters() == model.moe().num_parameters());
      CHECK(!model.moe().config().normalize);
    }
  ModelSpec bad;
  bad.d = 2, bad.experts = 3;  // 20 / 3 is not a width
  CHECK_THROWS_AS(bad.hidden(), Error);

  // The head is the plain sum over tokens and features of the layer's output.
  Generator gen(2), data(4);
  ModelSpec s;
  s.d = 5, s.experts = 2;
  L2NormModel model(s, gen);
  const Batch b = draw_batch(3, 10, 5, 5.0, data);
  NoGradGuard no_grad;
  const std::vector<float> y = model.layer_output(Variable(b.x)).data().to_vector<float>();
  const std::vector<float> pred = model.forward(Variable(b.x)).data().to_vector<float>();
  REQUIRE(pred.size() == 3);
  for (std::size_t e = 0; e < 3; ++e) {
    double sum = 0;
    for (std::size_t j = 0; j < 10; ++j) sum += y[e * 10 + j];
    CHECK(pred[e] == doctest::Approx(sum).epsilon(1e-5));
  }
}

TEST_CASE("softmoe-l2norm: one expert stays at the constant's loss, ten experts go far below (toy size)") {
  set_num_threads(1);
  const double constant = constant_predictor_loss(10, 5.0);
  const std::uint64_t seed = 0;
  auto final_loss = [&](std::int64_t d, std::int64_t n) {
    ModelSpec s;
    s.d = d, s.experts = n;
    Generator init(name_hash("toy-init/" + std::to_string(seed) + "/" + std::to_string(d) + "/" + std::to_string(n)));
    Generator data(seed);
    L2NormModel model(s, init);
    TrainOptions o;
    o.steps = 400, o.batch = 256, o.lr = 3e-3;
    return tail_mean(train(model, o, data), 0.05);
  };
  const double one = final_loss(2, 1), ten = final_loss(2, 10), one_2x5 = final_loss(5, 1);
  MESSAGE("5x2: n=1 ", one, ", n=10 ", ten, "; 2x5: n=1 ", one_2x5, "; constant ", constant);
  CHECK(one >= 0.9 * constant);
  CHECK(one_2x5 >= 0.9 * constant);
  CHECK(ten <= 0.5 * constant);
  CHECK(ten < one / 5);
}

TEST_CASE("softmoe-l2norm: tail_mean") {
  CHECK(tail_mean({1, 2, 3, 4}, 0.5) == 3.5);
  CHECK(tail_mean({1, 2, 3, 4}, 0.01) == 4);  // at least one value
  CHECK(tail_mean(std::vector<double>(100, 1.0), 0.05) == 1.0);
}

TEST_CASE("softmoe-l2norm command: files, a rerun trains nothing, bad settings are usage errors") {
  set_num_threads(1);
  const Experiment e = softmoe_l2norm_experiment();
  CHECK(e.name == "softmoe-l2norm");
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "l2");
  auto settings = [&](std::vector<std::string> extra) {
    Settings s = e.settings();
    for (const char* kv : {"experts=1,2", "steps=6", "batch=32", "seeds=0,1", "log_every=2"}) s.set_assignment(kv);
    for (const std::string& kv : extra) s.set_assignment(kv);
    return s;
  };
  CHECK_THROWS_AS(e.validate(settings({"token_dims=3"})), UsageError);   // 3 does not divide 10
  CHECK_THROWS_AS(e.validate(settings({"experts=1,3"})), UsageError);    // 3 does not divide 10 d
  CHECK_THROWS_AS(e.validate(settings({"seeds=1,1"})), UsageError);      // a job twice
  CHECK_THROWS_AS(e.validate(settings({"log_every=7"})), UsageError);    // more than steps
  CHECK_THROWS_AS(settings({"no_such_key=1"}), UsageError);
  CHECK_THROWS_AS(settings({"variance=0"}), UsageError);
  CHECK_NOTHROW(e.validate(settings({})));
  for (const Preset& p : e.presets) {
    Settings s = e.settings();
    s.apply(p);
    CHECK_NOTHROW(e.validate(s));
  }

  const Settings s = settings({});
  // As the command line does: the folder's record first (a folder with results and no record is
  // refused later).
  begin_run(dir, run_config(e.name, "test", 0, 1, "cpu", "moelab softmoe-l2norm", s), s);
  REQUIRE(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}) == 0);
  const auto results = read_csv(dir.file("results.csv"));
  CHECK(results.size() == 2 * 2 * 2);  // 2 tokenisations x 2 n x 2 seeds
  const auto metrics = read_csv(dir.file("metrics.csv"));
  CHECK(metrics.size() == 8 * 3);      // steps 2, 4, 6 of each job
  CHECK(std::filesystem::exists(dir.file("summary.md")));
  for (const auto& row : results) {
    CHECK(std::stod(row.at("constant_loss")) == doctest::Approx(2.4346).epsilon(1e-4));
    CHECK(std::isfinite(std::stod(row.at("final_loss"))));
    CHECK(std::stoll(row.at("expert_parameters")) == 20 * std::stoll(row.at("d")) * std::stoll(row.at("d")));
  }
  std::ifstream in(dir.file("summary.md"));
  const std::string summary((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(summary.find("2.435") != std::string::npos);
  CHECK(summary.find("## Comparisons") != std::string::npos);
  CHECK(summary.find("## In numbers") == std::string::npos);  // no second verdict beside the Claims
  CHECK(summary.find("met in every tokenisation") == std::string::npos);
  // The Claims section comes after the report, before the first table, with both of the paper's claims.
  CHECK(summary.find("## Claims") < summary.find("## 5 tokens of 2"));
  CHECK(summary.find("| Thm. 1: ") != std::string::npos);
  CHECK(summary.find("| App. C: ") != std::string::npos);

  // A rerun trains nothing: the CSVs keep their rows, no more and no fewer.
  REQUIRE(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}) == 0);
  CHECK(read_csv(dir.file("results.csv")).size() == results.size());
  CHECK(read_csv(dir.file("metrics.csv")).size() == metrics.size());
  CHECK(read_csv(dir.file("results.csv")) == results);

  // A half-finished job (a curve, no result file) is trained again from a clean slate; one more seed adds its jobs.
  {
    CsvFile m(dir.file("points/5x2-n1-seed2.csv"), {"tokenisation", "experts", "seed", "step", "loss"});
    m.row({"5x2", "1", "2", "2", "9.9"});
  }
  const Settings more = settings({"seeds=0,1,2"});
  REQUIRE(e.run(RunContext{more, dir, "test", 0, 1, Device::cpu()}) == 0);
  CHECK(read_csv(dir.file("results.csv")).size() == 12);
  const auto m2 = read_csv(dir.file("metrics.csv"));
  CHECK(m2.size() == 12 * 3);
  for (const auto& row : m2) CHECK(row.at("loss") != "9.9");

  // Results of other settings in the folder are refused, not mixed: the shared check of the
  // command line (runner/run_start.h) against the folder's config.json. More seeds, experts
  // or tokenisations only add jobs, so they may change.
  begin_run(dir, run_config(e.name, "test", 0, 1, "cpu", "moelab softmoe-l2norm", more), more);
  const Settings longer = settings({"steps=8"});
  CHECK_THROWS_WITH_AS(begin_run(dir, run_config(e.name, "test", 0, 1, "cpu", "", longer), longer),
                       doctest::Contains("steps = 6 there, 8 now"), UsageError);
  const Settings wider = settings({"seeds=0,1,2,3", "experts=1,2,5"});
  CHECK_NOTHROW(check_resume(dir, run_config(e.name, "test", 0, 1, "cpu", "", wider), wider));
}

TEST_CASE("softmoe-l2norm report: a run whose loss is not finite is reported as diverged, never compared") {
  set_num_threads(1);
  const Experiment e = softmoe_l2norm_experiment();
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "l2");
  Settings s = e.settings();
  for (const char* kv : {"experts=1,2", "steps=6", "batch=32", "seeds=0,1", "token_dims=5", "log_every=2"})
    s.set_assignment(kv);
  begin_run(dir, run_config(e.name, "test", 0, 1, "cpu", "moelab softmoe-l2norm", s), s);
  REQUIRE(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}) == 0);
  // What a run that blew up leaves: its point result with a NaN or infinite loss (the losses are
  // written as the numbers they are; here two points of n = 2 are edited to say so).
  auto diverge = [&](const std::string& point, const std::string& key, const std::string& value) {
    const std::filesystem::path path = dir.file("points/" + point + ".json");
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(std::ifstream(path));
    j["row"][key] = value;
    std::ofstream(path) << j.dump(2);
  };
  auto report = [&] {
    Settings r = s;
    r.set_assignment("mode=report");
    REQUIRE(e.run(RunContext{r, dir, "test", 0, 1, Device::cpu()}) == 0);
    std::ifstream in(dir.file("summary.md"));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  auto has = [](const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; };

  diverge("2x5-n2-seed1", "final_loss", "nan");
  std::string summary = report();
  INFO(summary);
  CHECK(has(summary, "Diverged (the loss became NaN or infinite; left out of the means above): n = 2 (1 of 2 seeds)"));
  CHECK(has(summary, "| 2 | 25 | 500 | 1 |"));  // the mean of n = 2 is over the one finite seed
  CHECK(has(summary, "2x5: DIVERGED runs, n = 2 (1 of 2 seeds), not compared."));
  CHECK_FALSE(has(summary, "**shows**"));
  CHECK_FALSE(has(summary, "nan"));  // no NaN reaches a mean, a ratio or the verdict

  diverge("2x5-n2-seed0", "first_loss", "inf");
  summary = report();
  CHECK(has(summary, "| 2 | 25 | 500 | 0 | diverged | diverged | - |"));
  CHECK(has(summary, "n = 2 (2 of 2 seeds)"));
  CHECK(has(summary, "no n >= 2 has a finite loss to compare"));  // not a vacuous "every n >= 2 lowers it"
  CHECK_FALSE(has(summary, "every n >= 2 lowers it"));
  CHECK_FALSE(has(summary, "**shows**"));
  CHECK_FALSE(has(summary, "nan"));
  CHECK_FALSE(has(summary, "| inf"));
}

TEST_CASE("softmoe-l2norm command: a disk that fills up mid-run fails loudly; the same run with room completes it") {
  set_num_threads(1);
  const Experiment e = softmoe_l2norm_experiment();
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "l2");
  Settings s = e.settings();
  for (const char* kv : {"experts=1,2", "steps=6", "batch=32", "seeds=0,1", "log_every=2"}) s.set_assignment(kv);
  simulate_full_disk_after(2000);  // room for a few jobs' files, not for all of them
  CHECK_THROWS_WITH_AS(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}),
                       doctest::Contains("No space left on device"), std::runtime_error);
  simulate_full_disk_after(-1);
  std::size_t finished = 0;  // the jobs whose result file was written whole
  for (const auto& f : std::filesystem::directory_iterator(dir.file("points")))
    finished += f.path().extension() == ".json";
  CHECK(finished > 0);
  CHECK(finished < 8);

  REQUIRE(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}) == 0);
  const auto results = read_csv(dir.file("results.csv"));
  CHECK(results.size() == 8);
  std::set<std::string> jobs, points;
  for (const auto& r : results) jobs.insert(r.at("tokenisation") + "/" + r.at("experts") + "/" + r.at("seed"));
  CHECK(jobs.size() == 8);  // every job once
  const auto metrics = read_csv(dir.file("metrics.csv"));
  for (const auto& r : metrics)
    points.insert(r.at("tokenisation") + "/" + r.at("experts") + "/" + r.at("seed") + "/" + r.at("step"));
  CHECK(metrics.size() == 8 * 3);  // one curve per job: the unfinished job's rows were dropped
  CHECK(points.size() == metrics.size());
  CHECK(std::filesystem::exists(dir.file("summary.md")));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path()))  // no temporary file left
    CHECK(entry.path().filename().string().find(".partial") == std::string::npos);
}
