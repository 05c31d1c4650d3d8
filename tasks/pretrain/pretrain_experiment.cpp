// tasks/pretrain/pretrain_experiment.cpp — settings, presets and the sweep of `moelab pretrain`
// (see the header). The report (tables, plots, verdict) is in pretrain_report.cpp.
#include "tasks/pretrain/pretrain_experiment.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "tasks/common/batch.h"
#include "runner/job_grid.h"
#include "tasks/common/precision_setting.h"
#include "tasks/common/routing_log.h"
#include "tasks/common/models.h"
#include "runner/report.h"
#include "tasks/common/router_settings.h"
#include "tasks/common/train.h"
#include "tasks/pretrain/corpus.h"
#include "tasks/pretrain/evaluate.h"
#include "tasks/pretrain/pretrain_claims.h"
#include "tasks/pretrain/pretrain_report.h"
#include "tasks/pretrain/tokenizer.h"

namespace moelab {

namespace {

using pretrain::CorpusConfig;

Settings pretrain_settings() {
  Settings s;
  const CorpusConfig c;  // the corpus's own defaults, where the CPU scale does not need less
  // The corpus (tasks/pretrain/corpus.h).
  s.add_int_list("people", {200},
                 "the knowledge loads: synthetic people per corpus, one grid per value (a load sweep); the first half "
                 "are trained on their questions, the other half held out (their bios are in training, their "
                 "questions are the knowledge test). A person's facts hold 34.8 bits (knowledge.h); the summary "
                 "gives each load's bits per parameter",
                 2, 1e9);
  s.add_int("bios_per_person", c.bios_per_person, "different biographies of every person in the training text", 0,
            1e9);
  s.add_int("templates_per_sentence", c.templates_per_sentence,
            "paraphrase templates per biography sentence (the first N of the built-in ones)", 0, 1e9);
  s.add_int("qa_test_questions", 300, "knowledge test: questions about held-out people (at most held-out x 6)", 0,
            1e9);
  s.add_int("qa_train_eval_questions", 300, "knowledge train score: questions that were in the training text", 0,
            1e9);
  s.add_int("math_train_problems", 2000, "math word problems in the training text", 0, 1e9);
  s.add_int("min_ops", 1, "fewest operations of a problem", 0, 1e9);
  s.add_int("max_ops", 2, "most operations of a problem (at most 5)", 0, 1e9);
  s.add_int("math_max_operand", 9,
            "largest start and largest number added or subtracted in a problem (multiplications are by 2 to 5)", 0,
            1e9);
  s.add_int("math_max_value", 99, "every count of a problem stays in [2, math_max_value] (at most 999)", 0, 1e9);
  s.add_int("math_test_problems", 200,
            "math test (in distribution): fresh problems drawn as the training ones, most of their equations seen", 0,
            1e9);
  s.add_int("math_train_eval_problems", 200, "math train score: problems that were in the training text", 0, 1e9);
  s.add_real("math_unseen_share", c.math_unseen_share,
             "share of all equations 'a op b' held out of every training problem (chosen by the seed; 0: none)", 0,
             0.9);
  s.add_int("math_unseen_test_problems", 200,
            "math unseen test: fresh problems every equation of which is held out, so none is in the training text "
            "(the math claims are judged on it; math_test is the second row)",
            0, 1e9);
  s.add_real("math_fraction", c.math_fraction, "share of the training tokens that are math", 0, 1);
  s.add_text("tokens", "word",
             "tokenizer: char (one token per character) or word (characters plus one token per word of the training "
             "text, so a name or a city is one token; digits stay characters): tasks/pretrain/tokenizer.h",
             {"char", "word"});
  s.add_int("validation_documents", 200, "held-out documents (fresh bios and problems) for the validation perplexity",
            0, 1e9);
  // The models.
  s.add_int("layers", 2, "decoder blocks", 1, 256);
  s.add_int("heads", 4, "attention heads (d / heads must be even)", 1, 256);
  s.add_int_list("dense_widths", {32, 48, 64}, "widths d of the dense models", 2, 1 << 16);
  s.add_int_list("dense_ffn_factors", {1}, "FFN widths of the dense models in units of d (the paper: 1)", 1, 64);
  s.add_int_list("moe_widths", {32}, "widths d of the MoE models (FFN width of each expert = d)", 2, 1 << 16);
  s.add_int_list("experts", {4, 8, 16, 32}, "expert counts E of the MoE models", 1, 4096);
  s.add_int("k", 2, "experts per token (router topk: Mixtral gates, no dropping)", 1, 4096);
  add_router_settings(s, "every MoE model");
  add_activation_setting(s);
  // Training.
  s.add_int("seq", 128, "tokens per training window (documents run across windows)", 2, 1 << 16);
  s.add_int("steps", 8000, "optimizer steps per model (unless passes is set)", 1, 1e9);
  s.add_real("passes", 0,
             "when > 0: the steps of each point are what reading every knowledge document this many times takes "
             "(each load then gives every fact the same exposures; math adds its share); 0: `steps` steps",
             0, 1e6);
  s.add_int("batch", 16, "windows per optimizer step", 1, 1 << 20);
  s.add_real("lr", 3e-3, "peak learning rate", 1e-9, 10);
  s.add_real("weight_decay", 0.1, "AdamW weight decay on matrices (the paper: 0.1)", 0, 10);
  s.add_real("warmup_fraction", 0.2, "share of the steps with a linear warmup (then linear decay to 0)", 0, 1);
  s.add_real("clip", 1.0, "gradient clipping: max global norm (0: none)", 0, 1e9);
  s.add_int("eval_every", 0, "evaluate every N steps as well (0: only after the last step; generation is slow)", 0,
            1e9);
  s.add_int("perplexity_every", 0,
            "validation perplexity every N steps as well (0: at the evaluations only); best_perplexity is the lowest "
            "of them, the one Fig. 6 matches models on (eval_every must be a multiple of it)",
            0, 1e9);
  s.add_int("eval_batch", 64, "prompts generated at once in the evaluation", 1, 1 << 20);
  s.add_int_list("seeds", {0, 1, 2}, "seeds: each draws its own corpus (shared by every model of that seed), initial "
                 "weights and document order; the report gives mean +- std over them", 0, 1e9);
  add_job_settings(s, "moe-d32-8e-p200-seed0");
  add_precision_setting(s);
  // A point depends on its load, model and seed only: more loads, seeds, widths or expert counts add points.
  s.may_change_on_resume({"seeds", "dense_widths", "moe_widths", "experts", "people"});
  return s;
}

std::vector<Preset> pretrain_presets() {
  return {
      {"demo",
       "about 3.5 minutes on 2 cores: 100 people, a dense d 32 against MoE d 32 with 16 experts, 4000 steps, one seed "
       "(shows the pipeline and the first effects; one seed decides nothing)",
       {{"people", "100"}, {"qa_test_questions", "150"}, {"qa_train_eval_questions", "150"},
        {"math_train_problems", "1000"}, {"math_test_problems", "100"}, {"math_train_eval_problems", "100"},
        {"math_unseen_test_problems", "100"}, {"validation_documents", "100"}, {"dense_widths", "32"},
        {"experts", "16"}, {"steps", "4000"}, {"perplexity_every", "400"}, {"seeds", "0"}}},
      {"cpu",
       "docs/EXPERIMENTS.md's CPU setting: word tokens, 200 people, 2000 problems of 1-2 operations on numbers "
       "below 100, dense d 32/48/64, MoE d 32 with 4/8/16/32 experts, 8000 steps of 16 windows of 128 tokens, seeds "
       "0, 1, 2 (21 points of 3-7 minutes on one core: about an hour as jobs, two at a time)",
       {{"perplexity_every", "400"}}},
      {"cpu-load",
       "Section 5 as a capacity-bound load sweep, the v2 record's grid: 800 and 1,600 people, the steps of 100 readings "
       "of each load's knowledge text (26,279 and 52,558 steps of 16 windows of 128 tokens), dense d 32/64 and MoE d "
       "32 with 16 experts, six seeds (the paired sign-flip test then reaches p = 0.03); 36 points, about 24 "
       "core-hours as measured on an AVX2 EPYC beside other work (a p800 point 33-47 minutes on one core, p1600 "
       "twice that; 12-15 minutes a p1600 point on an idle Zen 5 core): run it as jobs, in sittings if need be "
       "(docs/jobs.md; the record: docs/results/pretrain-cpu-load)",
       {{"perplexity_every", "2000"}, {"people", "800,1600"}, {"passes", "100"}, {"dense_widths", "32,64"},
        {"experts", "16"}, {"seeds", "0,1,2,3,4,5"}}},
      {"paper",
       "a GPU-scale grid in the spirit of the paper's Section 5 (its 63B tokens are out of reach): 5,000 people, "
       "50,000 problems, 8 layers, dense d 256/384/512/768, MoE d 256/384 with 4/8/16/32 experts, 30,000 steps of "
       "64 windows of 256 tokens, three seeds (docs/EXPERIMENTS.md gives the estimated GPU-hours)",
       {{"people", "5000"}, {"qa_test_questions", "3000"}, {"qa_train_eval_questions", "1000"},
        {"math_train_problems", "50000"}, {"min_ops", "2"}, {"max_ops", "5"}, {"math_max_operand", "30"},
        {"math_max_value", "999"}, {"math_test_problems", "1000"},
        {"math_train_eval_problems", "1000"}, {"validation_documents", "2000"}, {"layers", "8"}, {"heads", "8"},
        {"dense_widths", "256,384,512,768"}, {"moe_widths", "256,384"}, {"seq", "256"}, {"steps", "30000"},
        {"batch", "64"}, {"lr", "1e-3"}, {"math_unseen_test_problems", "1000"}, {"perplexity_every", "1000"}}},
  };
}

CorpusConfig corpus_config(const Settings& s, std::int64_t people) {
  CorpusConfig c;
  c.people = people;
  c.bios_per_person = s.integer("bios_per_person");
  c.templates_per_sentence = s.integer("templates_per_sentence");
  c.qa_test_questions = s.integer("qa_test_questions");
  c.qa_train_eval_questions = s.integer("qa_train_eval_questions");
  c.math_train_problems = s.integer("math_train_problems");
  c.min_ops = s.integer("min_ops");
  c.max_ops = s.integer("max_ops");
  c.math_range.max_operand = s.integer("math_max_operand");
  c.math_range.max_value = s.integer("math_max_value");
  c.math_test_problems = s.integer("math_test_problems");
  c.math_train_eval_problems = s.integer("math_train_eval_problems");
  c.math_unseen_share = s.real("math_unseen_share");
  c.math_unseen_test_problems = s.integer("math_unseen_test_problems");
  c.math_fraction = s.real("math_fraction");
  c.validation_documents = s.integer("validation_documents");
  return c;
}

std::vector<ModelSpec> pretrain_models(const Settings& s) {
  std::vector<ModelSpec> models = model_grid(s.ints("dense_widths"), s.ints("moe_widths"), s.ints("experts"),
                                             s.integer("k"), s.integer("layers"), s.integer("heads"),
                                             s.ints("dense_ffn_factors"));
  apply_router_settings(s, models);
  apply_activation_setting(s, models);
  return models;
}

// Load by load, model by model, seed by seed: "<model>-p<people>-seed<t>".
std::vector<PretrainPoint> grid_of(const Settings& s) {
  std::vector<PretrainPoint> out;
  const std::vector<ModelSpec> models = pretrain_models(s);
  for (std::int64_t people : s.ints("people"))
    for (std::size_t m = 0; m < models.size(); ++m)
      for (std::int64_t seed : s.ints("seeds"))
        out.push_back({m, seed, models[m].name() + "-p" + std::to_string(people) + "-seed" + std::to_string(seed),
                       people});
  return out;
}

// Settings that are each in range but cannot work together (UsageError naming the key, before
// anything is written).
void validate_pretrain(const Settings& s) {
  if (s.ints("people").empty()) throw UsageError("people: give at least one value");
  for (std::int64_t people : s.ints("people"))
    corpus_config(s, people).validate();  // "setting 'max_ops' = 6: must be in [1, 5] ..."
  if (s.real("passes") > 0 && s.real("math_fraction") >= 1)
    throw UsageError("passes = " + format_number(s.real("passes"), "%g") +
                     " counts passes over the knowledge text, which math_fraction = 1 leaves out (use steps)");
  check_model_grid(pretrain_models(s));
  if (s.ints("seeds").empty()) throw UsageError("seeds: give at least one value");
  const std::int64_t every = s.integer("perplexity_every"), eval_every = s.integer("eval_every");
  if (s.real("passes") == 0 && every > s.integer("steps"))
    throw UsageError("perplexity_every = " + std::to_string(every) + " is more than steps = " +
                     std::to_string(s.integer("steps")));
  if (every > 0 && eval_every > 0 && eval_every % every != 0)
    throw UsageError("eval_every = " + std::to_string(eval_every) + " must be a multiple of perplexity_every = " +
                     std::to_string(every) + " (both run at the same calls)");
  if (s.real("passes") == 0 && s.integer("eval_every") > s.integer("steps"))
    throw UsageError("eval_every = " + std::to_string(s.integer("eval_every")) + " is more than steps = " +
                     std::to_string(s.integer("steps")) + " (0: evaluate after the last step only)");
  std::vector<std::string> names;
  for (const PretrainPoint& p : grid_of(s)) names.push_back(p.name);
  validate_job_settings(s, names);
}

// The positions a model needs: a training window, and each evaluation's prompt (BOS + text) plus
// what it generates plus one (evaluate.h). Counted in characters, which bounds word tokens too.
std::int64_t max_positions(const pretrain::Corpus& corpus, std::int64_t seq) {
  std::int64_t need = seq;
  auto fit = [&](std::int64_t prompt_chars, std::int64_t new_tokens) {
    need = std::max(need, 1 + prompt_chars + new_tokens + 1);
  };
  for (const auto* pairs : {&corpus.qa_test, &corpus.qa_train_eval})
    for (const pretrain::QaPair& qa : *pairs)
      fit(static_cast<std::int64_t>(qa.prompt.size()), static_cast<std::int64_t>(qa.answer.size()) + 1);
  for (const auto* problems : {&corpus.math_test, &corpus.math_train_eval, &corpus.math_unseen_test})
    for (const pretrain::MathProblem& m : *problems)
      fit(static_cast<std::int64_t>(m.prompt().size()), pretrain::kMaxSolutionLength + 1);
  return need;
}

const std::vector<std::string> kResultsHeader = {
    "model", "family", "d", "experts", "k", "total_params", "active_params", "people", "seed", "steps", "tokens",
    "knowledge_passes", "knowledge_test", "knowledge_train", "math_test", "math_train", "math_gap", "math_unseen",
    "math_unseen_gap", "validation_loss", "perplexity", "best_perplexity", "best_perplexity_step", "corpus_bits",
    "stored_bits", "stored_bits_per_param", "final_loss", "seconds"};

// Stored knowledge: knowledge_train (the share of the trained people's questions answered, on the
// qa_train_eval sample) and the facts it stands for in bits: per attribute, the share answered times
// the attribute's bits (knowledge.h), summed, times the trained people. The people whose questions
// were not trained are left out: what a model holds of them shows only through extraction
// (knowledge_test).
struct StoredKnowledge {
  double accuracy = 0, bits = 0;
};
StoredKnowledge stored_knowledge(Decoder& model, const pretrain::Corpus& corpus, std::int64_t batch,
                                 const pretrain::Tokenizer& tokenizer) {
  std::int64_t correct = 0, total = 0;
  double bits_per_person = 0;
  for (pretrain::Attribute a : pretrain::kAllAttributes) {
    std::vector<pretrain::QaPair> asked;
    for (const pretrain::QaPair& qa : corpus.qa_train_eval)
      if (qa.attribute == a) asked.push_back(qa);
    if (asked.empty()) continue;
    const pretrain::Accuracy acc = pretrain::knowledge_accuracy(model, asked, batch, tokenizer);
    correct += acc.correct, total += acc.total;
    bits_per_person += acc.value() * pretrain::attribute_bits(a);
  }
  return {total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0,
          bits_per_person * static_cast<double>(corpus.trained_people)};
}

// One point: the corpus of the seed, the model trained on its stream, then the five measurements.
void run_point(const RunContext& ctx, const ModelSpec& spec, std::size_t mi, const PretrainPoint& p) {
  const Settings& s = ctx.settings;
  // Replicate 0 is the run's seed itself; every model of a seed gets the same corpus.
  const std::uint64_t seed = replicate_seed(ctx.seed, p.seed);
  const pretrain::Corpus corpus = pretrain::make_corpus(corpus_config(s, p.people), seed);
  const std::int64_t seq = s.integer("seq"), batch = s.integer("batch"), eval_batch = s.integer("eval_batch");
  const pretrain::Tokenizer tokenizer = s.text("tokens") == "word"
                                            ? pretrain::Tokenizer::words(pretrain::training_documents(corpus))
                                            : pretrain::Tokenizer::characters();
  pretrain::TrainingStream stream(corpus, seq, tokenizer);
  Generator init_gen(seed * 7919 + mi), data_gen(seed * 104729 + 1);
  std::unique_ptr<Decoder> model =
      build_decoder(spec, tokenizer.vocab_size(), max_positions(corpus, seq), init_gen);
  model->to(ctx.device);  // before train_decoder builds its optimizer
  const ModelSize size = model_size(*model);
  CsvFile metrics = ctx.dir.csv(point_curve_file(p.name), {"job", "step", "metric", "value"});

  // Steps: `steps`, or what `passes` readings of the knowledge text take at this load (the stream
  // mixes in math at math_fraction of the tokens, so knowledge is the rest of each step's tokens).
  const double knowledge_tokens_per_step =
      static_cast<double>(batch * (seq - 1)) * (1.0 - s.real("math_fraction"));
  const double passes = s.real("passes");
  TrainConfig tc;
  tc.steps = passes > 0 ? std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(
                                                        passes * static_cast<double>(stream.knowledge_pass_tokens()) /
                                                        knowledge_tokens_per_step)))
                        : s.integer("steps");
  tc.lr = s.real("lr"), tc.weight_decay = s.real("weight_decay");
  tc.warmup_fraction = s.real("warmup_fraction"), tc.clip = s.real("clip");
  // The loop calls back at every perplexity_every (when set) and eval_every; generation runs at
  // eval_every and after the last step only, the perplexity at every call.
  const std::int64_t eval_every = s.integer("eval_every"), perplexity_every = s.integer("perplexity_every");
  tc.eval_every = perplexity_every > 0 ? perplexity_every : eval_every;
  std::map<std::string, double> last;
  double best_perplexity = INFINITY;
  std::int64_t best_step = 0;
  RoutingLog routing(ctx.dir, p.name);  // MoE models: MaxVio, specialisation, drift (routing_log.h)
  // A point saves itself at every evaluation (points/<point>.resume.safetensors) and a point run
  // again after a crash or a stop goes on from there, bitwise as it would have (tasks/common/train.h).
  TrainResume resume;
  resume.path = ctx.dir.file(point_resume_file(p.name));
  resume.save = [&] {
    return nlohmann::json{{"stream", stream.state()}, {"routing", routing.state()},
                          {"best_perplexity", resume_number(best_perplexity)}, {"best_step", best_step},
                          {"last", resume_numbers(last)}};
  };
  resume.restore = [&](const nlohmann::json& j) {
    stream.restore(j.at("stream"));
    routing.restore(j.at("routing"));
    best_perplexity = resume_number(j.at("best_perplexity"));
    best_step = j.at("best_step").get<std::int64_t>();
    last = resume_numbers_from(j.at("last"));
  };
  const TrainReport report = train_decoder(
      *model, tc,
      routing.probing([&](Generator& g) {
        std::vector<std::vector<std::int32_t>> windows;
        for (std::int64_t b = 0; b < batch; ++b) windows.push_back(stream.next_sequence(g));
        return make_lm_batch(windows, pretrain::kPad);
      }),
      data_gen,
      routing.around([&](Decoder& m, std::int64_t step) {
        const pretrain::Perplexity v =
            pretrain::validation_perplexity(m, corpus.validation_documents, seq, batch, tokenizer);
        if (v.perplexity < best_perplexity) best_perplexity = v.perplexity, best_step = step;
        const bool full = step >= tc.steps || (eval_every > 0 && step % eval_every == 0);
        if (!full) return std::map<std::string, double>{{"validation_loss", v.mean_loss}, {"perplexity", v.perplexity}};
        const double k_test = pretrain::knowledge_accuracy(m, corpus.qa_test, eval_batch, tokenizer).value();
        const StoredKnowledge stored = stored_knowledge(m, corpus, eval_batch, tokenizer);
        const double k_train = stored.accuracy;
        const double m_test = pretrain::math_accuracy(m, corpus.math_test, eval_batch, tokenizer).value();
        const double m_train = pretrain::math_accuracy(m, corpus.math_train_eval, eval_batch, tokenizer).value();
        const double m_unseen = corpus.math_unseen_test.empty()
                                    ? NAN  // no equation held out: no unseen test
                                    : pretrain::math_accuracy(m, corpus.math_unseen_test, eval_batch, tokenizer).value();
        last = {{"knowledge_test", k_test}, {"knowledge_train", k_train},     {"math_test", m_test},
                {"math_train", m_train},    {"math_unseen", m_unseen},        {"validation_loss", v.mean_loss},
                {"perplexity", v.perplexity},       {"stored_bits", stored.bits}};
        return last;
      }, p.name),
      p.name, &metrics, {}, &resume);  // metrics.csv's job: the point
  const std::vector<std::string> row = {
      spec.name(), spec.family(), cell(spec.d), cell(spec.experts), cell(spec.moe() ? spec.k : 0),
      cell(size.non_embedding), cell(size.active), cell(p.people), cell(p.seed), cell(report.steps_done),
      cell(static_cast<double>(report.steps_done * batch * (seq - 1))),
      cell(static_cast<double>(report.steps_done) * knowledge_tokens_per_step /
           static_cast<double>(stream.knowledge_pass_tokens())),
      cell(last.at("knowledge_test")),
      cell(last.at("knowledge_train")), cell(last.at("math_test")), cell(last.at("math_train")),
      cell(last.at("math_train") - last.at("math_test")), cell(last.at("math_unseen")),
      cell(last.at("math_train") - last.at("math_unseen")), cell(last.at("validation_loss")),
      cell(last.at("perplexity")), cell(best_perplexity), cell(best_step),
      cell(static_cast<double>(p.people) * pretrain::person_bits()), cell(last.at("stored_bits")),
      cell(last.at("stored_bits") / static_cast<double>(size.non_embedding)), cell(report.final_loss),
      cell(report.seconds)};
  nlohmann::ordered_json j;
  j["point"] = p.name;
  for (std::size_t c = 0; c < row.size(); ++c) j["row"][kResultsHeader[c]] = row[c];
  write_point(ctx.dir, p.name, j);  // last: its presence marks the point done
  std::error_code ec;
  std::filesystem::remove(resume.path, ec);  // done: nothing to resume (a leftover is never read)
}

int run_pretrain(const RunContext& ctx) {
  const Settings& s = ctx.settings;
  validate_pretrain(s);
  const std::vector<ModelSpec> models = pretrain_models(s);
  const std::vector<PretrainPoint> points = grid_of(s);
  JobGrid g = job_grid_for(pretrain_experiment());
  for (const PretrainPoint& p : points) g.points.push_back(p.name);
  g.run_point = [&](std::size_t i) { run_point(ctx, models[points[i].model], points[i].model, points[i]); };
  g.report = [&] {
    // results.csv and metrics.csv from the finished points, in grid order.
    ctx.dir.write_text("results.csv", gather_rows(ctx.dir, g.points, kResultsHeader));
    ctx.dir.write_text("metrics.csv", gather_curves(ctx.dir, g.points));
    write_routing_report(ctx.dir, g.points);  // routing.csv and its plots (MoE points)
    write_pretrain_report(ctx, models);
  };
  return run_job_grid(ctx, g);
}

}  // namespace

Experiment pretrain_experiment() {
  Experiment e;
  e.name = "pretrain";
  e.summary = "Mixture of Parrots Sec. 5 (Figs. 1, 5, 6): pre-training on synthetic knowledge and math";
  e.details =
      "Generates a corpus from the seed for each load of `people` (synthetic people's biographies with the "
      "questions of half of them, and multi-step arithmetic word problems with solutions, a share of all equations "
      "held out), trains each model of the grid (dense widths; MoE widths x expert counts, top-k or the `router` "
      "setting's scheme, FFN width d) on its packed token stream for `steps` steps or `passes` readings of the "
      "knowledge text, and measures stored knowledge (the trained questions, and its bits per parameter), "
      "extraction (the held-out people's questions), math on unseen equations and on fresh and training problems, "
      "and the validation perplexity; the report sets them against total and active parameters and against "
      "perplexity, with mean +- std over `seeds`. Every (load, model, seed) is an independent job: "
      "--set mode=list prints one command line per missing point (docs/jobs.md), mode=point runs one, mode=report "
      "gathers them, mode=all (default) runs the missing ones and reports. A point saves itself at every "
      "evaluation (points/<point>.resume.safetensors) and, run again after a crash or a stop, goes on from there "
      "bitwise as it would have gone on.";
  e.settings = pretrain_settings;
  e.presets = pretrain_presets();
  e.default_preset = "cpu";
  e.validate = validate_pretrain;
  e.run = run_pretrain;
  e.claims = pretrain_claims;
  return e;
}

}  // namespace moelab
