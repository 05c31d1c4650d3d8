// tests/test_teacher_student.cpp — the granularity paper's (docs/REFERENCES.md) teacher-student
// regression (tasks/teacher_student/): the teacher is a deterministic function of its seed; a
// student with the teacher's architecture and weights has zero loss; the grid, names and
// normalised loss are what the experiment reports; and, at toy size, a student whose granularity
// matches the teacher's (16e8a, teacher 16e8a) reaches a clearly lower normalised loss than a
// coarse student of equal active size (4e2a) — the paper's Figure 2 effect.
//
// Why not a k' = 1 student: with top-1 routing the softmax over the one selected logit is always 1,
// so its router gets no gradient at all (docs/EXPERIMENTS.md); the paper's grids start at k = 2.
//
// The toy setting (d = 16, kw = 32, k'w' = 40, 40 epochs of 2^14 fresh samples, batch 256,
// AdamW lr 1e-2, cosine decay per epoch; about 9 s single-threaded) gave, for seeds 0 / 1 / 2,
// normalised losses 0.051 / 0.051 / 0.064 for the matched student against 0.108 / 0.092 / 0.114
// for the coarse one (ratios 0.47 to 0.56); the test keeps seed 0 and asserts a ratio below 0.75.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/no_grad.h"
#include "core/factories.h"
#include "core/parallel.h"
#include "nn/io/safetensors.h"
#include "runner/job_grid.h"
#include "runner/run_dir.h"
#include "tasks/common/router_settings.h"
#include "tasks/teacher_student/teacher_student_experiment.h"
#include "temp_dir.h"
#include "tasks/teacher_student/teacher_student.h"
#include "tasks/teacher_student/teacher_student_report.h"

using namespace moelab;
using namespace moelab::teacher_student;

namespace {

MoESpec toy_teacher() { return spec_for(/*k=*/8, /*ratio=*/2, /*active=*/32, /*d=*/16); }

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST_CASE("teacher-student: specs, names and parameter counts") {
  const MoESpec t = toy_teacher();
  CHECK(t.name() == "16e8a");
  CHECK(t.width == 4);
  CHECK(t.active_neurons() == 32);
  // router 16 x 16, experts 16 x (16*4 + 4 + 4*16 + 16)
  CHECK(t.total_parameters() == 16 * 16 + 16 * (16 * 4 + 4 + 4 * 16 + 16));
  Generator gen(1);
  CHECK(make_student(t, gen)->num_parameters() == t.total_parameters());
  MoESpec b = spec_for(2, 4, 40, 16);
  b.router_bias = true;
  CHECK(b.name() == "8e2a");
  CHECK(b.width == 20);
  Generator gen2(2);
  CHECK(make_student(b, gen2)->num_parameters() == b.total_parameters());
  // kw not divisible by k: the width is rounded (the paper: "roughly equal" active parameters).
  CHECK(spec_for(6, 2, 256, 256).width == 43);
}

TEST_CASE("teacher-student: the teacher is deterministic for a seed") {
  const MoESpec spec = toy_teacher();
  auto a = make_teacher(spec, 123), b = make_teacher(spec, 123), c = make_teacher(spec, 124);
  const auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  REQUIRE(pa.size() == pb.size());
  bool any_differs_from_other_seed = false;
  for (std::size_t i = 0; i < pa.size(); ++i) {
    CHECK(values(pa[i].second.data()) == values(pb[i].second.data()));
    any_differs_from_other_seed |= values(pa[i].second.data()) != values(pc[i].second.data());
  }
  CHECK(any_differs_from_other_seed);
  // The same seed draws the same batches, and the teacher's outputs agree bitwise.
  Generator g1(7), g2(7);
  const Batch x1 = draw_batch(*a, 64, g1), x2 = draw_batch(*b, 64, g2);
  CHECK(values(x1.x) == values(x2.x));
  CHECK(values(x1.y) == values(x2.y));
  // ... and the teacher is not the zero function.
  double energy = 0;
  for (float v : values(x1.y)) energy += static_cast<double>(v) * v;
  CHECK(energy > 0);
}

TEST_CASE("teacher-student: a student with the teacher's architecture and weights has zero loss") {
  const MoESpec spec = toy_teacher();
  auto teacher = make_teacher(spec, 5);
  Generator init(99);
  auto student = make_student(spec, init);
  Generator data(3);
  const Batch b = draw_batch(*teacher, 512, data);
  CHECK(normalised_loss(*student, b) > 0.1);  // a fresh student is far off
  copy_parameters(*teacher, *student);
  CHECK(normalised_loss(*student, b) == 0.0);
  // A student with a trainable router bias at its initial value 0 is the same function too.
  MoESpec with_bias = spec;
  with_bias.router_bias = true;
  Generator init2(100);
  auto biased = make_student(with_bias, init2);
  CHECK_THROWS(copy_parameters(*teacher, *biased));  // one parameter more: refused, not guessed
}

TEST_CASE("teacher-student: the grid and its point names") {
  Settings s;
  s.add_int("d", 32, "");
  s.add_int_list("teacher_k", {2, 8}, "");
  s.add_int_list("teacher_ratios", {2}, "");
  s.add_int("teacher_active", 32, "");
  s.add_text("teacher_gates", "topk-softmax", "");
  s.add_int_list("student_k", {2, 4}, "");
  s.add_int_list("student_ratios", {2, 8}, "");
  s.add_int("student_active", 40, "");
  s.add_text("student_gates", "topk-softmax", "");
  s.add_flag("student_router_bias", true, "");
  add_router_settings(s, "the student");
  s.add_int_list("seeds", {0, 3}, "");
  const std::vector<GridPoint> g = grid(s);
  REQUIRE(g.size() == 16);  // 2 teachers x 4 students x 2 seeds, seeds innermost
  CHECK(g[0].name() == "t4e2a-s4e2a-seed0");
  CHECK(g[1].name() == "t4e2a-s4e2a-seed3");
  CHECK(g[2].name() == "t4e2a-s16e2a-seed0");
  CHECK(g[15].name() == "t16e8a-s32e4a-seed3");
  CHECK(g[15].cell() == "t16e8a-s32e4a");
  CHECK(!g[0].teacher.router_bias);  // the teacher's router never has a bias
  CHECK(g[0].student.router_bias);
  CHECK(g[0].student.router == "topk");  // the default; the teacher is always topk
  s.set("router", "top-p");
  s.set("router_options", "threshold:0.5");
  const std::vector<GridPoint> top_p = grid(s);
  CHECK(top_p[0].name() == "t4e2a-s4e2a-seed0");  // names as before: config.json records the router
  CHECK(top_p[0].teacher.router == "topk");
  CHECK(top_p[0].student.router == "top-p");
  CHECK(top_p[0].student.router_options == std::map<std::string, std::string>{{"threshold", "0.5"}});
  CHECK(g[15].student.width == 10);
  CHECK(point_file(g[15].name()) == "points/t16e8a-s32e4a-seed3.json");
}

TEST_CASE("teacher-student: a granularity-matched student fits the teacher clearly better than a coarse one") {
  set_num_threads(1);
  const MoESpec teacher_spec = toy_teacher();               // 16e8a, w = 4, d = 16
  const MoESpec matched = spec_for(8, 2, 40, 16);           // 16e8a, w' = 5 (25% more active neurons)
  const MoESpec coarse = spec_for(2, 2, 40, 16);            // 4e2a, w' = 20 (the same active neurons)
  const std::uint64_t seed = 0;                             // as `moelab teacher-student --preset toy`
  auto teacher = make_teacher(teacher_spec, name_hash(std::to_string(seed) + "/teacher/" + teacher_spec.name()));
  TrainOptions o;
  o.epochs = 40, o.samples_per_epoch = 1 << 14, o.test_samples = 1 << 12, o.batch = 256, o.lr = 1e-2;
  auto train = [&](const MoESpec& spec) {
    Generator init(name_hash(std::to_string(seed) + "/student/t" + teacher_spec.name() + "-s" + spec.name()));
    Generator data(name_hash(std::to_string(seed) + "/data/" + teacher_spec.name()));
    auto student = make_student(spec, init);
    return train_student(*student, *teacher, o, data);
  };
  const TrainResult m = train(matched), c = train(coarse);
  MESSAGE("normalised test loss: matched 16e8a " << m.best_test << ", coarse 4e2a " << c.best_test);
  REQUIRE(m.epochs.size() == 40);
  CHECK(std::isfinite(m.best_test));
  CHECK(std::isfinite(c.best_test));
  // Both learn something (the zero predictor scores 1) ...
  CHECK(m.best_test < 0.5);
  CHECK(c.best_test < 0.5);
  // ... and the best is the minimum over epochs.
  for (const EpochRecord& e : m.epochs) CHECK(e.test >= m.best_test);
  // The effect, with margin: the matched student's loss is under 3/4 of the coarse one's.
  CHECK(m.best_test < 0.75 * c.best_test);
}

TEST_CASE("teacher-student: one test set for the whole run, so an unchanged student scores the same every epoch") {
  set_num_threads(1);
  const MoESpec teacher_spec = toy_teacher();
  auto teacher = make_teacher(teacher_spec, 1);
  Generator init(2), data(3);
  auto student = make_student(spec_for(8, 2, 40, 16), init);
  TrainOptions o;
  o.epochs = 3, o.samples_per_epoch = 256, o.test_samples = 256, o.batch = 128, o.lr = 1e-9, o.weight_decay = 0;
  const TrainResult r = train_student(*student, *teacher, o, data);
  REQUIRE(r.epochs.size() == 3);
  // The student barely moves (lr 1e-9): on one test set its loss stays put to ~1e-6; fresh test
  // sets of 256 samples would move it by a few percent from epoch to epoch.
  for (const EpochRecord& e : r.epochs) CHECK(e.test == doctest::Approx(r.epochs[0].test).epsilon(1e-5));
}

TEST_CASE("teacher-student command: mode=point writes one point, mode=report gathers, mode=all skips done points") {
  set_num_threads(1);
  const Experiment e = teacher_student_experiment();
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "ts");
  auto settings = [&](std::vector<std::string> extra) {
    Settings s = e.settings();
    for (const char* kv : {"d=8", "teacher_k=2", "teacher_active=8", "student_k=2,4", "student_active=8",
                           "samples_per_epoch=256", "test_samples=64", "epochs=2", "batch=128", "lrs=1e-2"})
      s.set_assignment(kv);
    for (const std::string& kv : extra) s.set_assignment(kv);
    return s;
  };
  // An unknown point is a usage error, before any work.
  CHECK_THROWS_AS(e.validate(settings({"mode=point", "point=t4e2a-s99e9a-seed0"})), UsageError);
  CHECK_THROWS_AS(e.validate(settings({"mode=point"})), UsageError);
  // Fewer active neurons than active experts is rejected, not rounded up to width 1.
  CHECK_THROWS_WITH_AS(e.validate(settings({"student_active=3"})),
                       doctest::Contains("student_active = 3 is below student_k = 4"), UsageError);
  CHECK_THROWS_WITH_AS(e.validate(settings({"teacher_active=1"})),
                       doctest::Contains("teacher_active = 1 is below teacher_k = 2"), UsageError);
  CHECK_NOTHROW(e.validate(settings({"student_active=4"})));
  CHECK_THROWS_AS(teacher_student::spec_for(4, 2, 3, 8), moelab::Error);

  const Settings one = settings({"mode=point", "point=t4e2a-s8e4a-seed0"});
  REQUIRE(e.run(RunContext{one, dir, "test", 0, 1, Device::cpu()}) == 0);
  CHECK(std::filesystem::exists(dir.file("points/t4e2a-s8e4a-seed0.json")));
  CHECK(std::filesystem::exists(dir.file("points/t4e2a-s8e4a-seed0.csv")));
  CHECK(!std::filesystem::exists(dir.file("points/t4e2a-s4e2a-seed0.json")));
  std::ifstream in(dir.file("points/t4e2a-s8e4a-seed0.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j.at("runs").size() == 1);
  const double loss = j.at("normalised_loss").get<double>();
  CHECK(loss > 0);
  CHECK(std::isfinite(loss));
  REQUIRE(read_csv(dir.file("points/t4e2a-s8e4a-seed0.csv")).size() == 2);  // one row per epoch

  const Settings report = settings({"mode=report"});
  REQUIRE(e.run(RunContext{report, dir, "test", 0, 1, Device::cpu()}) == 0);
  REQUIRE(read_csv(dir.file("results.csv")).size() == 1);
  CHECK(std::filesystem::exists(dir.file("summary.md")));
  {
    // The comparisons in numbers, and no second verdict beside the Claims section.
    std::ifstream summary_file(dir.file("summary.md"));
    const std::string summary((std::istreambuf_iterator<char>(summary_file)), std::istreambuf_iterator<char>());
    CHECK(summary.find("## Comparisons") != std::string::npos);
    CHECK(summary.find("## In numbers") == std::string::npos);
  }

  const Settings all = settings({});
  REQUIRE(e.run(RunContext{all, dir, "test", 0, 1, Device::cpu()}) == 0);
  const auto rows = read_csv(dir.file("results.csv"));
  REQUIRE(rows.size() == 2);
  // The finished point was kept, not trained again.
  std::ifstream again(dir.file("points/t4e2a-s8e4a-seed0.json"));
  CHECK(nlohmann::json::parse(again).at("normalised_loss").get<double>() == loss);
}

TEST_CASE("teacher-student command: save_init writes the point's teacher, initial student and test set") {
  set_num_threads(1);
  const Experiment e = teacher_student_experiment();
  testing::TempDir tmp;
  const RunDir dir(tmp.path() / "ts");
  Settings s = e.settings();
  for (const char* kv : {"d=8", "teacher_k=2", "teacher_active=8", "student_k=4", "student_active=8",
                         "samples_per_epoch=256", "test_samples=64", "epochs=1", "batch=128", "lrs=1e-2",
                         "student_router_bias=true", "seeds=0,1", "mode=point", "point=t4e2a-s8e4a-seed1"})
    s.set_assignment(kv);
  REQUIRE(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}) == 0);
  CHECK(!std::filesystem::exists(dir.file("points/t4e2a-s8e4a-seed1.init.safetensors")));  // only when asked

  s.set_assignment("save_init=true");
  std::filesystem::remove(dir.file("points/t4e2a-s8e4a-seed1.json"));
  REQUIRE(e.run(RunContext{s, dir, "test", 0, 1, Device::cpu()}) == 0);
  const SafetensorsFile f = read_safetensors(dir.file("points/t4e2a-s8e4a-seed1.init.safetensors").string());
  CHECK(f.metadata.at("point") == "t4e2a-s8e4a-seed1");
  CHECK(f.metadata.at("student_k") == "4");
  CHECK(f.metadata.at("epochs") == "1");
  CHECK(f.metadata.at("lrs") == "0.01");
  CHECK(f.at("student.router.bias").shape() == Shape{8});
  CHECK(f.at("student.experts.w_in").shape() == Shape{8, 8, 2});
  CHECK(f.at("test_x").shape() == Shape{64, 8});

  // The teacher and the initial student are the ones the point trains from (replicate 1 of run
  // seed 0), bit for bit, and test_y is the teacher's output on test_x.
  const std::vector<GridPoint> points = grid(s);
  const GridPoint& p = *std::find_if(points.begin(), points.end(),
                                     [](const GridPoint& g) { return g.name() == "t4e2a-s8e4a-seed1"; });
  const std::string seed = std::to_string(replicate_seed(0, 1));
  const auto teacher = make_teacher(p.teacher, name_hash(seed + "/teacher/" + p.teacher.name()));
  Generator init_gen(name_hash(seed + "/student/" + p.name()));
  const auto student = make_student(p.student, init_gen);
  for (const auto& [name, v] : teacher->named_parameters()) CHECK(values(f.at("teacher." + name)) == values(v.data()));
  for (const auto& [name, v] : student->named_parameters()) CHECK(values(f.at("student." + name)) == values(v.data()));
  NoGradGuard no_grad;
  CHECK(values(teacher->forward(Variable(f.at("test_x"))).data()) == values(f.at("test_y")));
}
