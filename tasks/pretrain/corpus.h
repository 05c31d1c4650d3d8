// tasks/pretrain/corpus.h — the synthetic pre-training corpus of Mixture of Parrots, Section 5, at
// CPU scale: a knowledge half (knowledge.h) and a math half (math_problems.h), mixed into one
// stream of documents, packed into token sequences (tokenizer.h), with held-out validation text and
// the evaluation sets that separate memorized knowledge from reasoning.
//
// What is in it (make_corpus; every part a pure function of the config and the seed):
//   people       `people` synthetic people. The first trained_people = people / 2 are the "trained"
//                half, the rest the "held-out" half (people are drawn i.i.d., so the split is random).
//   bios         bios_per_person different biographies of EVERY person (both halves), using the
//                first templates_per_sentence templates per sentence.
//   train_qa     the six question-answer pairs of every TRAINED person ("mixed training" in Physics
//                of LM 3.1): trained_people * 6 pairs, person by person, attributes in order.
//   math_train   math_train_problems problems with min_ops..max_ops operations, questions distinct.
// The training documents are two pools of strings (no BOS/EOS; the packer adds them):
//   knowledge_documents  every bio (person by person), then every train_qa text (prompt + answer)
//   math_documents       every math_train text (question, space, solution)
//
// The mixture (TrainingStream). Documents are drawn one at a time, each pool read in shuffled
// epochs (tasks/common/epoch_sampler.h, batch 1). Which pool comes next is decided by tokens (the
// stream's tokenizer's), with no randomness: math when the math tokens so far are fewer than
// math_fraction times all tokens so far, else knowledge (next_kind; the first document is knowledge
// unless math_fraction = 1). So math is math_fraction of the training tokens, up to one document,
// at every point of training. A document is BOS, its tokens, EOS; the documents are laid end to
// end and cut into windows of `seq` tokens that overlap by ONE token (window w = stream[w (seq-1), w (seq-1) + seq)), so with
// make_lm_batch (inputs = first seq-1, targets = last seq-1) every token of the stream after the
// first is a target exactly once. Documents run across window boundaries, as in GPT pre-training.
//
// Validation text (validation_documents): validation_documents documents in the same mix (counted
// in character tokens whatever the tokenizer, since the corpus does not know it), never verbatim in
// training: knowledge ones are fresh bios (new template/order draws, different
// from every training bio and from each other) of people drawn uniformly from ALL people; math ones
// are fresh problems whose questions are in neither math_train nor math_test. No question-answer
// pairs: the trained ones are verbatim in training and the held-out ones are the knowledge test.
// pack_documents cuts them into windows as above (the last window shorter).
//
// Evaluation sets and their protocol (a later session's harness generates greedily, nn/generate.h):
//   qa_test        qa_test_questions pairs of HELD-OUT people (their bios are in training, their
//                  questions never are), sampled without replacement; qa_train_eval the same from
//                  train_qa. The model gets BOS + prompt ("What is the birth city of Anya Forger? ")
//                  and generates up to answer.size() + 1 tokens; the pair is right when
//                  decode_until_eos(generated) == answer (exact match: the answer, then EOS).
//   math_test      math_test_problems fresh problems whose question text occurs in no training
//                  problem, drawn as the training problems are (no held-out equation): the
//                  in-distribution test, most of whose equations the training text holds (the table
//                  of a +- k up to 99 has ~1,500 entries; 2,000 problems write ~3,000 equations);
//                  math_train_eval: math_train_eval_problems of math_train, sampled
//                  without replacement.
//   math_unseen_test  math_unseen_test_problems fresh problems EVERY equation of which is held out
//                  (holdout: math_unseen_share of all equations "a op b", chosen by the seed, kept
//                  out of math_train, math_test and the validation text), so no equation of the test
//                  appears in training: a model must compute, not recall. This is the test the
//                  report judges math on. Why: the paper's GSM8k asks problems no model has seen
//                  whose arithmetic a 63B-token corpus has seen in every form; at our scale the
//                  in-distribution test is answered from a ~1,500-entry table the model can store, so
//                  it measures storage (which the paper ties to total parameters) as much as
//                  reasoning. Unseen equations keep the part the paper calls reasoning: applying
//                  the operation to operands in a combination never written down. The model gets BOS + prompt() (the question and a space),
//                  generates the solution (up to kMaxSolutionLength + 1 tokens, stopping at EOS),
//                  and the problem is solved when extract_answer(decode_until_eos(generated)) ==
//                  answer. The paper's measure is the train-test gap: math_train_eval - math_test.
//
// Sizes of the defaults (CorpusConfig{}, seed 1): 1000 people (500 trained), 5000 bios and 3000
// training QA pairs (8000 knowledge documents, ~1.49M characters), 5000 math problems (~1.17M
// characters; solutions at most 96), math_fraction 0.5; 600 + 600 QA and 500 + 500 math
// evaluation items; 1000 validation documents (~0.25M characters). make_corpus takes ~0.05 s.
//
//   CorpusConfig config;                 // defaults; config.people = 200; ...
//   Corpus corpus = make_corpus(config, /*seed=*/1);   // validates config first (UsageError)
//   TrainingStream stream(corpus, /*seq=*/257);
//   Generator data(2);
//   std::vector<std::int32_t> s = stream.next_sequence(data);   // [257] token ids < kVocab
//   ... make_lm_batch({s, ...}, kPad) -> inputs, targets [B, 256] ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/random.h"
#include "tasks/common/epoch_sampler.h"
#include "tasks/pretrain/knowledge.h"
#include "tasks/pretrain/math_problems.h"
#include "tasks/pretrain/tokenizer.h"

namespace moelab::pretrain {

// The longest solution make_math_problem writes (kMaxOperations equations and the answer line),
// in characters: a bound for the evaluation's generation length.
constexpr std::int64_t kMaxSolutionLength = kMaxOperations * 20 + 24;
// At most this many math problems in one corpus (training + test + validation), so that drawing
// distinct ones by rejection stays cheap.
constexpr std::int64_t kMaxMathProblems = 1000000;

struct CorpusConfig {
  // Knowledge.
  std::int64_t people = 1000;                                      // [2, max_people()]
  std::int64_t bios_per_person = 5;                                // [1, kMaxBiosPerPerson]
  std::int64_t templates_per_sentence = kBioTemplatesPerSentence;  // [1, kBioTemplatesPerSentence]
  std::int64_t qa_test_questions = 600;        // [0, held-out people * 6]
  std::int64_t qa_train_eval_questions = 600;  // [0, trained people * 6]
  // Math.
  std::int64_t math_train_problems = 5000;     // [0, kMaxMathProblems]; >= 1 when math_fraction > 0
  std::int64_t min_ops = 2;                    // [1, max_ops]
  std::int64_t max_ops = 5;                    // [1, kMaxOperations]
  MathRange math_range;                        // the numbers' sizes (math_problems.h)
  std::int64_t math_test_problems = 500;       // >= 0
  std::int64_t math_train_eval_problems = 500; // [0, math_train_problems]
  double math_unseen_share = 0.2;              // [0, 0.9]: equations held out of training (0: none)
  std::int64_t math_unseen_test_problems = 500;  // >= 0; 0 when math_unseen_share is 0
  // Mixture.
  double math_fraction = 0.5;                  // [0, 1]: the share of training tokens that are math
  std::int64_t validation_documents = 1000;    // >= 1

  std::int64_t trained_people() const { return people / 2; }
  std::int64_t held_out_people() const { return people - people / 2; }

  // Throws moelab::UsageError (runner/settings.h) naming the first bad key, its value and the
  // allowed range, e.g. "setting 'max_ops' = 6: must be in [1, 5] (kMaxOperations)".
  void validate() const;
};

enum class DocumentKind { Knowledge, Math };

struct Corpus {
  CorpusConfig config;
  std::uint64_t seed = 0;

  std::vector<Person> people;                  // [people]: trained first, then held out
  std::int64_t trained_people = 0;             // people / 2
  std::vector<std::vector<std::string>> bios;  // [people][bios_per_person]
  std::vector<QaPair> train_qa;                // [trained_people * 6]
  std::vector<MathProblem> math_train;         // [math_train_problems]

  std::vector<std::string> knowledge_documents;  // bios, then train_qa texts
  std::vector<std::string> math_documents;       // math_train texts

  std::vector<std::string> validation_documents;  // [validation_documents]
  std::vector<DocumentKind> validation_kinds;     // the kind of each

  std::vector<QaPair> qa_test;                 // held-out people's pairs, in (person, attribute) order
  std::vector<QaPair> qa_train_eval;           // a sample of train_qa, in its order
  std::vector<MathProblem> math_test;          // fresh, in no training problem
  std::vector<MathProblem> math_train_eval;    // a sample of math_train, in its order
  EquationHoldout holdout;                     // the equations no training text holds
  std::vector<MathProblem> math_unseen_test;   // fresh, every equation held out

  bool is_held_out(std::int64_t person) const { return person >= trained_people; }
};

// Validates config (UsageError), then draws every part from its own generator, seeded from `seed`
// and the part (people, bios, QA samples, math training, math test, validation), so that changing
// the math settings leaves the people and bios as they were, and vice versa.
Corpus make_corpus(const CorpusConfig& config, std::uint64_t seed);

// Every training document: knowledge_documents, then math_documents.
std::vector<std::string> training_documents(const Corpus& corpus);

// The mixture rule (see above): Math when math_fraction >= 1, Knowledge when it is <= 0, else Math
// exactly when math_tokens < math_fraction * total_tokens.
DocumentKind next_kind(double math_fraction, std::int64_t math_tokens, std::int64_t total_tokens);

// documents laid end to end as BOS text EOS and cut into windows of `seq` >= 2 tokens overlapping
// by one (see above); the last window holds what is left (>= 2 tokens). moelab::Error for a
// character outside the alphabet or seq < 2; no documents -> no windows.
// Tokens come from `tokenizer` (tokenizer.h; the character one unless given).
std::vector<std::vector<std::int32_t>> pack_documents(const std::vector<std::string>& documents, std::int64_t seq,
                                                      const Tokenizer& tokenizer = character_tokenizer());

// The endless training stream of a corpus (which must outlive it). next_document draws the next
// document of the mixture; next_sequence packs drawn documents into the next window of `seq`
// tokens. Use one or the other on a stream: next_sequence draws through next_document, so from
// the same generator state both see the same documents in the same order.
class TrainingStream {
 public:
  // seq >= 2, else moelab::Error. Every training document is encoded with `tokenizer` here, once
  // (a foreign character is a moelab::Error now); the mixture counts those tokens. The corpus must
  // outlive the stream.
  TrainingStream(const Corpus& corpus, std::int64_t seq, const Tokenizer& tokenizer = character_tokenizer());

  struct Document {
    DocumentKind kind;
    const std::string* text;                   // into the corpus's pools
    const std::vector<std::int32_t>* tokens;   // its tokens (BOS, ..., EOS), encoded once per stream
  };
  Document next_document(Generator& gen);
  std::vector<std::int32_t> next_sequence(Generator& gen);  // [seq]

  std::int64_t seq() const { return seq_; }
  std::int64_t math_tokens() const { return math_tokens_; }    // tokens of math documents drawn
  // The tokens (BOS and EOS included) of one reading of every knowledge document: a "pass".
  std::int64_t knowledge_pass_tokens() const { return knowledge_pass_tokens_; }
  std::int64_t total_tokens() const { return total_tokens_; }  // tokens of all documents drawn

  // Where the stream stands, for a checkpoint (tasks/common/train.h, TrainResume): both pools'
  // samplers, the tokens drawn but not yet handed out, the mixture's counts. restore() takes back
  // what state() gave on a stream of the same corpus, which then draws what it would have;
  // moelab::Error for a state that does not fit this stream.
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);

 private:
  const Corpus* corpus_;
  std::int64_t seq_;
  std::optional<EpochSampler> knowledge_sampler_, math_sampler_;  // absent for an empty pool
  // Every training document encoded once, at construction (the stream draws each many times):
  // [pool size][its tokens], knowledge_documents' and math_documents' order.
  std::vector<std::vector<std::int32_t>> knowledge_encoded_, math_encoded_;
  std::int64_t math_tokens_ = 0, total_tokens_ = 0;
  std::int64_t knowledge_pass_tokens_ = 0;
  std::vector<std::int32_t> pending_;  // drawn tokens not yet handed out (the overlap token first)
};

}  // namespace moelab::pretrain
