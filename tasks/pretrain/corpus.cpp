// tasks/pretrain/corpus.cpp — see corpus.h.
#include "tasks/pretrain/corpus.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <sstream>

#include "core/error.h"
#include "runner/settings.h"
#include "tasks/pretrain/tokenizer.h"

namespace moelab::pretrain {

namespace {

// The parts of a corpus, each drawn from its own generator (part_generator).
enum class Part : std::uint64_t {
  People = 1, Bios, QaSamples, MathTrain, MathTest, MathSamples, Validation, MathHoldout, MathUnseen
};

// splitmix64 over (seed, part): independent Philox keys for the parts of one corpus.
Generator part_generator(std::uint64_t seed, Part part) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(part) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return Generator(z ^ (z >> 31));
}

// `count` distinct indices of [0, n), drawn uniformly (a partial Fisher-Yates shuffle), increasing.
std::vector<std::int64_t> sample_indices(std::int64_t n, std::int64_t count, Generator& gen) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(n));
  std::iota(all.begin(), all.end(), std::int64_t{0});
  for (std::int64_t k = 0; k < count; ++k) {
    const std::int64_t j = k + gen.next_below(static_cast<std::uint32_t>(n - k));
    std::swap(all[static_cast<std::size_t>(k)], all[static_cast<std::size_t>(j)]);
  }
  all.resize(static_cast<std::size_t>(count));
  std::sort(all.begin(), all.end());
  return all;
}

// Throws UsageError "setting 'key' = value: must be ..." unless ok.
template <class T>
void require(bool ok, const char* key, T value, const std::string& what) {
  if (ok) return;
  std::ostringstream message;
  message << "setting '" << key << "' = " << value << ": " << what;
  throw UsageError(message.str());
}
std::string in_range(std::int64_t lo, std::int64_t hi, const std::string& why = "") {
  return "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]" + (why.empty() ? "" : " (" + why + ")");
}

// Characters + BOS + EOS: the validation mixture is counted in character tokens (either tokenizer).
std::int64_t document_tokens(const std::string& text) { return static_cast<std::int64_t>(text.size()) + 2; }

}  // namespace

void CorpusConfig::validate() const {
  require(people >= 2 && people <= max_people(), "people", people,
          in_range(2, max_people(), "a trained and a held-out half, at most half of the " +
                                        std::to_string(name_space()) + " names"));
  require(bios_per_person >= 1 && bios_per_person <= kMaxBiosPerPerson, "bios_per_person", bios_per_person,
          in_range(1, kMaxBiosPerPerson));
  require(templates_per_sentence >= 1 && templates_per_sentence <= kBioTemplatesPerSentence, "templates_per_sentence",
          templates_per_sentence, in_range(1, kBioTemplatesPerSentence, "the built-in templates per sentence"));
  require(qa_test_questions >= 0 && qa_test_questions <= held_out_people() * kAttributes, "qa_test_questions",
          qa_test_questions, in_range(0, held_out_people() * kAttributes, "held-out people x 6 questions"));
  require(qa_train_eval_questions >= 0 && qa_train_eval_questions <= trained_people() * kAttributes,
          "qa_train_eval_questions", qa_train_eval_questions,
          in_range(0, trained_people() * kAttributes, "trained people x 6 questions"));
  require(max_ops >= 1 && max_ops <= kMaxOperations, "max_ops", max_ops,
          in_range(1, kMaxOperations, "the most operations a problem supports"));
  require(min_ops >= 1 && min_ops <= max_ops, "min_ops", min_ops, in_range(1, max_ops, "1 to max_ops"));
  require(math_range.max_value >= 5 && math_range.max_value <= kMaxValue, "math_max_value", math_range.max_value,
          in_range(5, kMaxValue, "every count of a problem stays in [2, math_max_value]"));
  require(math_range.max_operand >= 2 && math_range.max_operand <= math_range.max_value, "math_max_operand",
          math_range.max_operand, in_range(2, math_range.max_value, "start and added or subtracted numbers, at most "
                                                                    "math_max_value"));
  require(math_train_problems >= 0 && math_train_problems <= kMaxMathProblems, "math_train_problems",
          math_train_problems, in_range(0, kMaxMathProblems));
  require(math_test_problems >= 0 && math_test_problems <= kMaxMathProblems, "math_test_problems", math_test_problems,
          in_range(0, kMaxMathProblems));
  require(math_train_eval_problems >= 0 && math_train_eval_problems <= math_train_problems, "math_train_eval_problems",
          math_train_eval_problems, in_range(0, math_train_problems, "a sample of the training problems"));
  require(std::isfinite(math_fraction) && math_fraction >= 0 && math_fraction <= 1, "math_fraction", math_fraction,
          "must be in [0, 1] (the share of training tokens that are math)");
  require(math_fraction == 0 || math_train_problems >= 1, "math_train_problems", math_train_problems,
          "must be >= 1 when math_fraction > 0 (math_fraction = " + std::to_string(math_fraction) + ")");
  require(std::isfinite(math_unseen_share) && math_unseen_share >= 0 && math_unseen_share <= 0.9, "math_unseen_share",
          math_unseen_share, "must be in [0, 0.9] (the share of equations held out of training)");
  require(math_unseen_test_problems >= 0 && math_unseen_test_problems <= kMaxMathProblems,
          "math_unseen_test_problems", math_unseen_test_problems, in_range(0, kMaxMathProblems));
  require(math_unseen_share > 0 || math_unseen_test_problems == 0, "math_unseen_test_problems",
          math_unseen_test_problems, "must be 0 when math_unseen_share is 0 (no equation is held out)");
  require(validation_documents >= 1 && validation_documents <= kMaxMathProblems, "validation_documents",
          validation_documents, in_range(1, kMaxMathProblems));
  const std::int64_t math_total =
      math_train_problems + math_test_problems + math_unseen_test_problems + validation_documents;
  require(math_total <= kMaxMathProblems, "math_train_problems", math_train_problems,
          "math_train_problems + math_test_problems + math_unseen_test_problems + validation_documents = " +
              std::to_string(math_total) +
              " must be <= " + std::to_string(kMaxMathProblems));
}

Corpus make_corpus(const CorpusConfig& config, std::uint64_t seed) {
  config.validate();
  Corpus c;
  c.config = config;
  c.seed = seed;
  const std::int64_t templates = config.templates_per_sentence;

  // Knowledge: people, every person's bios, the trained half's QA pairs.
  Generator people_gen = part_generator(seed, Part::People);
  c.people = make_people(config.people, people_gen);
  c.trained_people = config.trained_people();
  Generator bios_gen = part_generator(seed, Part::Bios);
  for (const Person& p : c.people) c.bios.push_back(make_bios(p, config.bios_per_person, templates, bios_gen));
  for (std::int64_t i = 0; i < c.trained_people; ++i)
    for (Attribute a : kAllAttributes) c.train_qa.push_back(make_qa(c.people, i, a));
  for (const std::vector<std::string>& person_bios : c.bios)
    c.knowledge_documents.insert(c.knowledge_documents.end(), person_bios.begin(), person_bios.end());
  for (const QaPair& qa : c.train_qa) c.knowledge_documents.push_back(qa.text());

  // Knowledge evaluation: held-out people's pairs and a sample of the trained pairs.
  Generator qa_gen = part_generator(seed, Part::QaSamples);
  const std::int64_t held_out_pairs = config.held_out_people() * kAttributes;
  for (std::int64_t k : sample_indices(held_out_pairs, config.qa_test_questions, qa_gen))
    c.qa_test.push_back(make_qa(c.people, c.trained_people + k / kAttributes, kAllAttributes[k % kAttributes]));
  for (std::int64_t k : sample_indices(static_cast<std::int64_t>(c.train_qa.size()), config.qa_train_eval_questions,
                                       qa_gen))
    c.qa_train_eval.push_back(c.train_qa[static_cast<std::size_t>(k)]);

  // Math: the held-out equations; training problems without them, fresh test problems without
  // them, a sample of the training problems, and fresh problems of held-out equations only.
  c.holdout = EquationHoldout{part_generator(seed, Part::MathHoldout).seed(), config.math_unseen_share};
  const EquationHoldout holdout = c.holdout;
  const auto trainable = [holdout](const MathProblem& p) { return !holdout.any_held_out(p); };
  Generator math_gen = part_generator(seed, Part::MathTrain);
  c.math_train = make_math_problems(config.math_train_problems, config.min_ops, config.max_ops, math_gen, nullptr,
                                    config.math_range, trainable);
  for (const MathProblem& p : c.math_train) c.math_documents.push_back(p.text());
  std::set<std::string> used_questions;
  for (const MathProblem& p : c.math_train) used_questions.insert(p.question);
  Generator test_gen = part_generator(seed, Part::MathTest);
  c.math_test = make_math_problems(config.math_test_problems, config.min_ops, config.max_ops, test_gen, &used_questions,
                                   config.math_range, trainable);
  for (const MathProblem& p : c.math_test) used_questions.insert(p.question);
  Generator unseen_gen = part_generator(seed, Part::MathUnseen);
  c.math_unseen_test = make_math_problems(
      config.math_unseen_test_problems, config.min_ops, config.max_ops, unseen_gen, &used_questions, config.math_range,
      {}, [holdout](std::int64_t a, Operation op, std::int64_t b) { return holdout.held_out(a, op, b); });
  for (const MathProblem& p : c.math_unseen_test) used_questions.insert(p.question);
  Generator sample_gen = part_generator(seed, Part::MathSamples);
  for (std::int64_t k : sample_indices(config.math_train_problems, config.math_train_eval_problems, sample_gen))
    c.math_train_eval.push_back(c.math_train[static_cast<std::size_t>(k)]);

  // Validation: fresh bios and fresh problems in the training mix of tokens.
  Generator val_gen = part_generator(seed, Part::Validation);
  std::set<std::string> used_bios;
  for (const std::vector<std::string>& person_bios : c.bios) used_bios.insert(person_bios.begin(), person_bios.end());
  std::int64_t math_tokens = 0, total_tokens = 0;
  while (static_cast<std::int64_t>(c.validation_documents.size()) < config.validation_documents) {
    const DocumentKind kind = next_kind(config.math_fraction, math_tokens, total_tokens);
    std::string text;
    if (kind == DocumentKind::Math) {
      MathProblem p = std::move(make_math_problems(1, config.min_ops, config.max_ops, val_gen, &used_questions,
                                                   config.math_range, trainable)[0]);
      used_questions.insert(p.question);
      text = p.text();
      math_tokens += document_tokens(text);
    } else {
      const Person& p = c.people[val_gen.next_below(static_cast<std::uint32_t>(c.people.size()))];
      text = make_bios(p, 1, templates, val_gen, &used_bios)[0];
      used_bios.insert(text);
    }
    total_tokens += document_tokens(text);
    c.validation_documents.push_back(std::move(text));
    c.validation_kinds.push_back(kind);
  }
  return c;
}

std::vector<std::string> training_documents(const Corpus& corpus) {
  std::vector<std::string> docs = corpus.knowledge_documents;
  docs.insert(docs.end(), corpus.math_documents.begin(), corpus.math_documents.end());
  return docs;
}

DocumentKind next_kind(double math_fraction, std::int64_t math_tokens, std::int64_t total_tokens) {
  if (math_fraction >= 1) return DocumentKind::Math;
  if (math_fraction <= 0) return DocumentKind::Knowledge;
  return static_cast<double>(math_tokens) < math_fraction * static_cast<double>(total_tokens) ? DocumentKind::Math
                                                                                               : DocumentKind::Knowledge;
}

std::vector<std::vector<std::int32_t>> pack_documents(const std::vector<std::string>& documents, std::int64_t seq,
                                                      const Tokenizer& tokenizer) {
  MOELAB_CHECK(seq >= 2, "pretrain::pack_documents", "seq must be >= 2 (an input and a target), got ", seq);
  std::vector<std::int32_t> stream;
  for (const std::string& d : documents) {
    const std::vector<std::int32_t> tokens = tokenizer.encode_document(d);
    stream.insert(stream.end(), tokens.begin(), tokens.end());
  }
  std::vector<std::vector<std::int32_t>> windows;
  const auto n = static_cast<std::int64_t>(stream.size());
  for (std::int64_t start = 0; start + 1 < n; start += seq - 1)
    windows.emplace_back(stream.begin() + start, stream.begin() + std::min(start + seq, n));
  return windows;
}

TrainingStream::TrainingStream(const Corpus& corpus, std::int64_t seq, const Tokenizer& tokenizer)
    : corpus_(&corpus), seq_(seq) {
  MOELAB_CHECK(seq >= 2, "pretrain::TrainingStream", "seq must be >= 2 (an input and a target), got ", seq);
  if (!corpus.knowledge_documents.empty())
    knowledge_sampler_.emplace(static_cast<std::int64_t>(corpus.knowledge_documents.size()), 1, Sampling::Epochs);
  if (!corpus.math_documents.empty())
    math_sampler_.emplace(static_cast<std::int64_t>(corpus.math_documents.size()), 1, Sampling::Epochs);
  for (const std::string& d : corpus.knowledge_documents) {
    knowledge_encoded_.push_back(tokenizer.encode_document(d));
    knowledge_pass_tokens_ += static_cast<std::int64_t>(knowledge_encoded_.back().size());
  }
  for (const std::string& d : corpus.math_documents) math_encoded_.push_back(tokenizer.encode_document(d));
}

TrainingStream::Document TrainingStream::next_document(Generator& gen) {
  DocumentKind kind = next_kind(corpus_->config.math_fraction, math_tokens_, total_tokens_);
  // A corpus from make_corpus always has the pool the rule asks for; a hand-made one may not.
  if (kind == DocumentKind::Math && !math_sampler_) kind = DocumentKind::Knowledge;
  if (kind == DocumentKind::Knowledge && !knowledge_sampler_) kind = DocumentKind::Math;
  MOELAB_CHECK(kind == DocumentKind::Math ? math_sampler_.has_value() : knowledge_sampler_.has_value(),
               "pretrain::TrainingStream", "the corpus has no training documents");
  const bool math = kind == DocumentKind::Math;
  const std::int64_t index = (math ? *math_sampler_ : *knowledge_sampler_).next(gen)[0];
  const auto i = static_cast<std::size_t>(index);
  const std::string& text = (math ? corpus_->math_documents : corpus_->knowledge_documents)[i];
  const std::vector<std::int32_t>& encoded = (math ? math_encoded_ : knowledge_encoded_)[i];
  const auto tokens = static_cast<std::int64_t>(encoded.size());
  total_tokens_ += tokens;
  if (math) math_tokens_ += tokens;
  return {kind, &text, &encoded};
}

namespace {

nlohmann::json sampler_state(const std::optional<EpochSampler>& sampler) {
  if (!sampler) return nullptr;
  const EpochSampler::State st = sampler->state();
  return {{"order", st.order}, {"position", st.position}, {"epochs_started", st.epochs_started}};
}

void restore_sampler(std::optional<EpochSampler>& sampler, const nlohmann::json& j, const char* pool) {
  MOELAB_CHECK(j.is_null() == !sampler.has_value(), "pretrain::TrainingStream",
               "a saved state ", j.is_null() ? "without" : "with", " a ", pool, " sampler for a stream ",
               sampler ? "with" : "without", " one");
  if (!sampler) return;
  sampler->restore({j.at("order").get<std::vector<std::int64_t>>(), j.at("position").get<std::int64_t>(),
                    j.at("epochs_started").get<std::int64_t>()});
}

}  // namespace

nlohmann::json TrainingStream::state() const {
  return {{"knowledge", sampler_state(knowledge_sampler_)}, {"math", sampler_state(math_sampler_)},
          {"pending", pending_}, {"math_tokens", math_tokens_}, {"total_tokens", total_tokens_}};
}

void TrainingStream::restore(const nlohmann::json& state) {
  try {
    restore_sampler(knowledge_sampler_, state.at("knowledge"), "knowledge");
    restore_sampler(math_sampler_, state.at("math"), "math");
    pending_ = state.at("pending").get<std::vector<std::int32_t>>();
    math_tokens_ = state.at("math_tokens").get<std::int64_t>();
    total_tokens_ = state.at("total_tokens").get<std::int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("pretrain::TrainingStream: a saved state that is not one: ") + e.what());
  }
  MOELAB_CHECK(math_tokens_ >= 0 && math_tokens_ <= total_tokens_, "pretrain::TrainingStream",
               "a saved state with ", math_tokens_, " math tokens of ", total_tokens_, " in all");
}

std::vector<std::int32_t> TrainingStream::next_sequence(Generator& gen) {
  while (static_cast<std::int64_t>(pending_.size()) < seq_) {
    const std::vector<std::int32_t>& tokens = *next_document(gen).tokens;
    pending_.insert(pending_.end(), tokens.begin(), tokens.end());
  }
  std::vector<std::int32_t> window(pending_.begin(), pending_.begin() + seq_);
  pending_.erase(pending_.begin(), pending_.begin() + (seq_ - 1));  // keep the last token: the overlap
  return window;
}

}  // namespace moelab::pretrain
