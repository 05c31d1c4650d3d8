// tasks/teacher_student/teacher_student_experiment.cpp — settings, presets, the modes and one grid
// point of `moelab teacher-student` (see the header). The grid and the report are in
// teacher_student_report.cpp; the model, data and training loop in teacher_student.cpp.
#include "tasks/teacher_student/teacher_student_experiment.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "nn/io/safetensors.h"
#include "runner/job_grid.h"
#include "runner/report.h"
#include "tasks/common/memory_check.h"
#include "tasks/common/precision_setting.h"
#include "tasks/common/router_settings.h"
#include "tasks/teacher_student/teacher_student.h"
#include "tasks/teacher_student/teacher_student_claims.h"
#include "tasks/teacher_student/teacher_student_report.h"

namespace moelab {

namespace ts = teacher_student;

namespace {

Settings teacher_student_settings() {
  Settings s;
  s.add_int("d", 256, "input and output dimension", 1, 1 << 16);
  s.add_int_list("teacher_k", {2, 4, 6, 8, 10, 12, 14, 16}, "teacher granularities k (active experts)", 1, 4096);
  s.add_int_list("teacher_ratios", {2}, "teacher experts per active expert m/k", 1, 4096);
  s.add_int("teacher_active", 256, "teacher active neurons kw (width w = round(kw / k))", 1, 1 << 24);
  s.add_text("teacher_gates", "topk-softmax", "teacher gates: softmax over the k selected logits, or 1/k",
             {"topk-softmax", "equal"});
  s.add_int_list("student_k", {2, 4, 6, 8, 10, 12, 14, 16},
                 "student granularities k' (k' = 1 with topk-softmax gates is refused: its one gate is always 1, "
                 "so the router would get no gradient)",
                 1, 4096);
  s.add_int_list("student_ratios", {2}, "student experts per active expert m'/k'", 1, 4096);
  s.add_int("student_active", 320, "student active neurons k'w' (the paper: 25% more than the teacher)", 1, 1 << 24);
  s.add_text("student_gates", "topk-softmax", "student gates (equal: the router gets no gradient)",
             {"topk-softmax", "equal"});
  s.add_flag("student_router_bias", false, "trainable router bias in the student (the paper's Figure 3)");
  add_router_settings(s, "the student (the teacher's is topk; with topk the student's gates and bias come from "
                         "student_gates and student_router_bias, with another scheme student_gates must stay "
                         "topk-softmax)");
  s.add_int("samples_per_epoch", 1 << 18, "fresh training samples per epoch (whole batches)", 1, 1e12);
  s.add_int("test_samples", 1 << 12, "test samples: one set drawn before training, used after every epoch", 1, 1e9);
  s.add_int("epochs", 100, "epochs (the cosine schedule steps once per epoch)", 1, 1e6);
  s.add_int("batch", 2048, "samples per optimizer step", 1, 1 << 24);
  s.add_real_list("lrs", {1e-3, 1e-2}, "AdamW learning rates to try; the best normalised loss counts", 1e-9, 10);
  s.add_real("weight_decay", 0.01, "AdamW weight decay (on every parameter)", 0, 10);
  s.add_int_list("seeds", {0}, "replicates of every (teacher, student) pair: each draws its own teacher, student "
                 "and data (0,1,2: three; the report gives mean +- std)", 0, 1e9);
  s.add_flag("save_init", false,
             "also write points/<point>.init.safetensors when a point runs (a finished one is not run again): "
             "the teacher, the initial student and the test set, for bench/pytorch/teacher_student_check.py "
             "(the same start in PyTorch)");
  add_job_settings(s, "t16e8a-s32e8a-seed0");
  add_precision_setting(s);
  // The grid's lists choose which points exist, and a point's teacher, student and data depend on
  // its own name only.
  s.may_change_on_resume({"teacher_k", "teacher_ratios", "student_k", "student_ratios", "seeds"});
  return s;
}

std::vector<Preset> teacher_student_presets() {
  const std::pair<std::string, std::string> cpu_size[] = {
      {"d", "32"}, {"teacher_active", "64"}, {"student_active", "80"}, {"samples_per_epoch", "65536"}};
  // kw = 64, k'w' = 80 are the smallest active counts with the paper's 25% more active neurons in
  // the student and whole widths for every k, k' up to 16 (with kw = 32, k'w' = 40 the 32e16a
  // student's width 2.5 was rounded to 3: 48 active neurons). kw = 2d here, between the paper's
  // kw = d (Figures 2-3) and kw = 4d (Appendix D, "qualitatively the same").
  auto cpu = [&](std::vector<std::pair<std::string, std::string>> more) {
    std::vector<std::pair<std::string, std::string>> v(std::begin(cpu_size), std::end(cpu_size));
    v.insert(v.end(), more.begin(), more.end());
    return v;
  };
  return {
      {"fig2",
       "the paper's Figure 2 (GPU-scale: 64 pairs x 3 seeds x 2 learning rates, each 100 epochs of 2^18 samples "
       "in d = 256): teachers and students 4e2a..32e16a (m = 2k, k = 2..16), teacher kw = 256, student k'w' = 320",
       {{"seeds", "0,1,2"}}},
      {"fig3",
       "the paper's Figure 3 (GPU-scale): teacher 16e8a; students k' in {2,4,8} with m'/k' in {2,4,8,16,32} "
       "and a trainable router bias, 3 seeds",
       {{"teacher_k", "8"}, {"student_k", "2,4,8"}, {"student_ratios", "2,4,8,16,32"},
        {"student_router_bias", "true"}, {"seeds", "0,1,2"}}},
      {"cpu-fig2",
       "Figure 2 at CPU size (d = 32, kw = 64, k'w' = 80: whole widths for every k up to 16; 2^16 samples per "
       "epoch, 100 epochs, batch 2048, best of lr 1e-3 and 1e-2) on a coarser grid, k and k' in {2,4,8,16} "
       "(4e2a, 8e4a, 16e8a, 32e16a), 3 seeds: 48 points of one to a few core-minutes each; run them with "
       "mode=list | parallel. The full 8 x 8 grid: --set teacher_k=2,4,6,8,10,12,14,16 --set "
       "student_k=2,4,6,8,10,12,14,16 (4 times the points; k = 6, 10, 12, 14 then round their widths)",
       cpu({{"teacher_k", "2,4,8,16"}, {"student_k", "2,4,8,16"}, {"seeds", "0,1,2"}})},
      {"cpu-fig3",
       "Figure 3 at CPU size (as cpu-fig2): teacher 16e8a; students k' in {2,4,8} x m'/k' in {2,4,8,16,32} "
       "with a trainable router bias, 3 seeds (45 points of one to a few core-minutes each; run them with "
       "mode=list | parallel)",
       cpu({{"teacher_k", "8"}, {"student_k", "2,4,8"}, {"student_ratios", "2,4,8,16,32"},
            {"student_router_bias", "true"}, {"seeds", "0,1,2"}})},
      {"cpu-fig3-long",
       "cpu-fig3 with 500 epochs instead of 100, as the paper's Appendix D trains its Figure 5 'to aid "
       "optimization': separates optimisation speed from capacity, whether the fine-enough students fit the "
       "teacher at every size given time. In steps (32 of 2048 per epoch) 16,000: 1.25x the paper's Figure 3 "
       "(100 epochs of 128 steps), where cpu-fig3 has a quarter of it. About 7 core-hours (5 to 17 minutes "
       "per point on one core, the larger students longer; measured, docs/results/teacher-student-cpu-fig3-long): "
       "3.5 hours as jobs two at a time, a CPU night",
       cpu({{"teacher_k", "8"}, {"student_k", "2,4,8"}, {"student_ratios", "2,4,8,16,32"},
            {"student_router_bias", "true"}, {"seeds", "0,1,2"}, {"epochs", "500"}})},
      {"toy",
       "about 10 s on one core, to try the command (the test's setting; one seed): d = 16, teacher 16e8a "
       "(kw = 32), students 4e2a and 16e8a (k'w' = 40), 40 epochs of 2^14 samples, batch 256, lr 1e-2",
       {{"d", "16"}, {"teacher_k", "8"}, {"teacher_active", "32"}, {"student_k", "2,8"}, {"student_active", "40"},
        {"samples_per_epoch", "16384"}, {"epochs", "40"}, {"batch", "256"}, {"lrs", "1e-2"}}},
  };
}

void validate_teacher_student(const Settings& s) {
  for (const char* key : {"teacher_k", "teacher_ratios", "student_k", "student_ratios", "lrs", "seeds"})
    if (s.to_json()[key].empty()) throw UsageError(std::string(key) + ": give at least one value");
  if (s.integer("samples_per_epoch") < s.integer("batch"))
    throw UsageError("samples_per_epoch (" + std::to_string(s.integer("samples_per_epoch")) +
                     ") must be at least one batch (" + std::to_string(s.integer("batch")) + ")");
  // kw active neurons shared by k active experts: each gets round(kw / k) >= 1 of them only when
  // kw >= k; a smaller kw would be a different architecture than the one asked for.
  for (const auto& [ks, active] : {std::pair<const char*, const char*>{"teacher_k", "teacher_active"},
                                   std::pair<const char*, const char*>{"student_k", "student_active"}})
    for (std::int64_t k : s.ints(ks))
      if (s.integer(active) < k)
        throw UsageError(std::string(active) + " = " + std::to_string(s.integer(active)) + " is below " + ks + " = " +
                         std::to_string(k) + ": " + std::to_string(k) + " active experts need at least one neuron each");
  // The student's router: its own keys through their settings, then built once per student shape
  // so that an unknown option or a k the scheme refuses stops the command before any training.
  const std::string& router = s.text("router");
  const std::map<std::string, std::string> options = parse_router_options(s.text("router_options"));
  if (options.count("bias"))
    throw UsageError("router_options: set the student's router bias with student_router_bias, not the option 'bias'");
  if (router == "topk" && options.count("gates"))
    throw UsageError("router_options: set the topk student's gates with student_gates, not the option 'gates'");
  if (router != "topk" && s.text("student_gates") != "topk-softmax")
    throw UsageError("student_gates = " + s.text("student_gates") + " is a gate mode of the topk router; router = " +
                     router + " takes its own gates through router_options (see its header in nn/moe/)");
  std::vector<std::string> names;
  const double batch = static_cast<double>(s.integer("batch")), test = static_cast<double>(s.integer("test_samples"));
  for (const ts::GridPoint& p : ts::grid(s)) {
    names.push_back(p.name());
    // The student trains (16 bytes a parameter), the teacher only runs (4); a step holds x, the
    // teacher's and the student's active hidden units and both outputs; the test set its x and y.
    const double d = static_cast<double>(p.student.d);
    const double bytes = 16.0 * static_cast<double>(p.student.total_parameters()) +
                         4.0 * static_cast<double>(p.teacher.total_parameters()) +
                         4.0 * batch * (3.0 * d + static_cast<double>(p.teacher.active_neurons() + p.student.active_neurons())) +
                         4.0 * test * 2.0 * d;
    check_memory_bound(p.name() + " with batch = " + std::to_string(s.integer("batch")), bytes,
                       "the student's parameters with gradients and Adam's moments, the teacher's, and one step's "
                       "activations");
    const MoEConfig c = p.student.config();
    check_router(c.router, c.router_options, c.d, c.experts, c.k);
  }
  validate_job_settings(s, names);
}

// The generators of a point's student and data: one seed string, the point's names.
Generator student_generator(const std::string& seed, const ts::GridPoint& p) {
  return Generator(ts::name_hash(seed + "/student/" + p.name()));
}
Generator data_generator(const std::string& seed, const ts::GridPoint& p) {
  return Generator(ts::name_hash(seed + "/data/" + p.teacher.name()));
}

// points/<point>.init.safetensors: everything a second implementation needs to start where this
// point starts. "teacher.<name>" and "student.<name>" are the layers' parameters by their
// named_parameters() names (router.weight [m, d], router.bias [m], experts.w_in [m, d, w],
// experts.b_in [m, w], experts.w_out [m, w, d], experts.b_out [m, d]); test_x [n, d] and test_y
// [n, d] are the test set train_student draws first from the data generator. The training batches
// come after it in moelab's Philox stream, so the other implementation draws its own: with
// fresh samples every step that changes the sample path, not the loss it estimates.
void save_init(const RunContext& ctx, const ts::GridPoint& p, const std::string& seed, MoELayer& teacher) {
  const Settings& s = ctx.settings;
  Generator init_gen = student_generator(seed, p), data_gen = data_generator(seed, p);
  const std::unique_ptr<MoELayer> student = ts::make_student(p.student, init_gen);
  const ts::Batch test = ts::draw_batch(teacher, s.integer("test_samples"), data_gen);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, v] : teacher.named_parameters()) tensors.emplace_back("teacher." + name, v.data());
  for (const auto& [name, v] : student->named_parameters()) tensors.emplace_back("student." + name, v.data());
  tensors.emplace_back("test_x", test.x);
  tensors.emplace_back("test_y", test.y);
  std::ostringstream lrs;
  for (double lr : s.reals("lrs")) lrs << (lrs.tellp() > 0 ? "," : "") << cell(lr);
  const std::map<std::string, std::string> metadata = {
      {"point", p.name()},
      {"teacher", p.teacher.name()},
      {"teacher_k", std::to_string(p.teacher.k)},
      {"teacher_gates", p.teacher.gates},
      {"student", p.student.name()},
      {"student_k", std::to_string(p.student.k)},
      {"student_gates", p.student.gates},
      {"student_router", p.student.router},
      {"epochs", std::to_string(s.integer("epochs"))},
      {"samples_per_epoch", std::to_string(s.integer("samples_per_epoch"))},
      {"batch", std::to_string(s.integer("batch"))},
      {"lrs", lrs.str()},
      {"weight_decay", cell(s.real("weight_decay"))}};
  write_safetensors(ctx.dir.file("points/" + p.name() + ".init.safetensors").string(), tensors, metadata);
}

// A result file of one point, written whole (the folder's write_text renames a finished file).
void run_point(const RunContext& ctx, const ts::GridPoint& p) {
  const Settings& s = ctx.settings;
  // Replicate 0 is the run's seed itself: a one-seed run draws what runs before seeds drew.
  const std::string seed = std::to_string(replicate_seed(ctx.seed, p.seed));
  const std::uint64_t teacher_seed = ts::name_hash(seed + "/teacher/" + p.teacher.name());
  std::unique_ptr<MoELayer> teacher = ts::make_teacher(p.teacher, teacher_seed);
  teacher->to(ctx.device);

  if (s.flag("save_init")) save_init(ctx, p, seed, *teacher);

  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  std::ostringstream curves;
  curves << "lr,epoch,lr_used,train_normalised,test_normalised\n";
  double best = INFINITY, best_lr = 0, seconds = 0;
  for (double lr : s.reals("lrs")) {
    // The same initial student and the same data for every learning rate; every student of one
    // teacher sees the same samples.
    Generator init_gen = student_generator(seed, p), data_gen = data_generator(seed, p);
    std::unique_ptr<MoELayer> student = ts::make_student(p.student, init_gen);
    student->to(ctx.device);  // before train_student builds its optimizer
    ts::TrainOptions o;
    o.epochs = s.integer("epochs"), o.samples_per_epoch = s.integer("samples_per_epoch");
    o.test_samples = s.integer("test_samples"), o.batch = s.integer("batch");
    o.lr = lr, o.weight_decay = s.real("weight_decay");
    o.label = p.name() + " lr " + cell(lr);
    const ts::TrainResult r = ts::train_student(*student, *teacher, o, data_gen);
    for (const ts::EpochRecord& e : r.epochs)
      curves << cell(lr) << "," << e.epoch << "," << cell(e.lr) << "," << cell(e.train) << "," << cell(e.test) << "\n";
    runs.push_back({{"lr", lr},
                    {"best_test_normalised", r.best_test},
                    {"best_epoch", r.best_epoch},
                    {"final_test_normalised", r.epochs.back().test},
                    {"final_train_normalised", r.epochs.back().train},
                    {"seconds", r.seconds}});
    seconds += r.seconds;
    if (r.best_test < best) best = r.best_test, best_lr = lr;
  }
  auto spec_json = [](const ts::MoESpec& m) {
    nlohmann::ordered_json spec{{"name", m.name()},         {"experts", m.experts},
                                {"k", m.k},                 {"width", m.width},
                                {"d", m.d},                 {"active_neurons", m.active_neurons()},
                                {"total_parameters", m.total_parameters()}, {"gates", m.gates},
                                {"router_bias", m.router_bias}};
    // The router only when it is not topk: the files of topk runs are what they were before.
    if (m.router != "topk") spec["router"] = m.router, spec["router_options"] = router_options_text(m.router_options);
    return spec;
  };
  nlohmann::ordered_json j;
  j["point"] = p.name();
  j["teacher"] = spec_json(p.teacher);
  j["student"] = spec_json(p.student);
  j["relative_size"] = static_cast<double>(p.student.total_parameters()) / static_cast<double>(p.teacher.total_parameters());
  j["normalised_loss"] = best;
  j["best_lr"] = best_lr;
  j["seconds"] = seconds;
  j["seed"] = p.seed;
  j["run_seed"] = ctx.seed;
  j["teacher_seed"] = teacher_seed;
  j["runs"] = runs;
  ctx.dir.write_text(point_curve_file(p.name()), curves.str());
  write_point(ctx.dir, p.name(), j);  // last: its presence marks the point done
}

int run_teacher_student(const RunContext& ctx) {
  validate_teacher_student(ctx.settings);
  const std::vector<ts::GridPoint> points = ts::grid(ctx.settings);
  JobGrid g = job_grid_for(teacher_student_experiment());
  for (const ts::GridPoint& p : points) g.points.push_back(p.name());
  g.run_point = [&](std::size_t i) { run_point(ctx, points[i]); };
  g.report = [&] { ts::write_report(ctx, points); };
  return run_job_grid(ctx, g);
}

}  // namespace

Experiment teacher_student_experiment() {
  Experiment e;
  e.name = "teacher-student";
  e.summary = "granularity paper Figs. 2-3: a student MoE fits a random teacher MoE only if k' >= k";
  e.details =
      "Trains student MoEs (one MoELayer, ReLU experts with biases, top-k routing with a softmax over the k "
      "selected logits by default; `router` picks another registered scheme for the student) by MSE to imitate "
      "random teacher MoEs on fresh standard Gaussian inputs, and reports "
      "the test MSE over the zero predictor's (minimum over epochs, best learning rate) for every "
      "(teacher, student) pair and seed (mean +- std over `seeds`). Every (pair, seed) is an independent job: "
      "--set mode=list prints one command line per missing point (for GNU parallel or a job array, docs/jobs.md), "
      "mode=point runs one, mode=report gathers them, mode=all (default) runs the missing ones and reports.";
  e.settings = teacher_student_settings;
  e.presets = teacher_student_presets();
  e.default_preset = "cpu-fig2";
  e.validate = validate_teacher_student;
  e.run = run_teacher_student;
  e.claims = teacher_student::teacher_student_claims;
  return e;
}

}  // namespace moelab
