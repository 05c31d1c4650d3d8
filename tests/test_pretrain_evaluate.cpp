// tests/test_pretrain_evaluate.cpp — the scoring of the pre-training experiment
// (tasks/pretrain/evaluate.h): the exact-match rules, batched greedy completion that gives every
// prompt what it would get alone, validation perplexity that counts every target once whatever the
// batch, and a tiny decoder that learns two QA pairs scoring 1 where an untrained one scores 0.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "nn/loss.h"
#include "nn/optim/adam.h"
#include "tasks/common/batch.h"
#include "tasks/common/models.h"
#include "tasks/pretrain/corpus.h"
#include "tasks/pretrain/evaluate.h"
#include "tasks/pretrain/tokenizer.h"

using namespace moelab;
using namespace moelab::pretrain;

namespace {

std::unique_ptr<Decoder> tiny_decoder(std::uint64_t seed, std::int64_t max_seq = 64, std::int64_t vocab = kVocab) {
  Generator gen(seed);
  ModelSpec spec;
  spec.d = 32, spec.layers = 1, spec.heads = 2;
  return build_decoder(spec, vocab, max_seq, gen);
}

// Trains `model` on `docs` (each its own sequence, tokens from `tokenizer`) for `steps` AdamW steps.
void train_on(Decoder& model, const std::vector<std::string>& docs, const Tokenizer& tokenizer, int steps) {
  std::vector<std::vector<std::int32_t>> sequences;
  for (const std::string& d : docs) sequences.push_back(tokenizer.encode_document(d));
  const TokenBatch batch = make_lm_batch(sequences, kPad);
  AdamW opt(model.parameters(), AdamOptions{.lr = 1e-2});
  for (int step = 0; step < steps; ++step) {
    const Variable loss = nn::cross_entropy(model.forward(batch.inputs), batch.targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
}

QaPair pair(const std::string& prompt, const std::string& answer) {
  QaPair qa;
  qa.prompt = prompt, qa.answer = answer;
  return qa;
}

}  // namespace

TEST_CASE("scoring: the answer then EOS for knowledge, 'The answer is N.' with N right for math") {
  const QaPair qa = pair("What is the birth city of Anya Forger? ", "Kyoto");
  CHECK(knowledge_correct("Kyoto", qa));
  CHECK(!knowledge_correct("Kyotoo", qa));
  CHECK(!knowledge_correct("Kyot", qa));
  CHECK(!knowledge_correct(" Kyoto", qa));
  MathProblem p;
  p.answer = 17;
  CHECK(math_correct("12 + 5 = 17. The answer is 17.", p));
  CHECK(!math_correct("12 + 5 = 18. The answer is 18.", p));
  CHECK(!math_correct("12 + 5 = 17.", p));             // no answer line
  CHECK(!math_correct("12 + 5 = 17. The answer is 17", p));  // cut off before its '.'
}

TEST_CASE("complete_greedy: prompts of several lengths in batches get what each gets alone, in order") {
  set_num_threads(1);
  auto model = tiny_decoder(3);
  const std::vector<std::string> prompts = {"What is it? ", "Mia has 12 apples. ", "Why? ", "What is this? ",
                                            "Who? ", "Mia has 13 apples. ", "A"};
  const std::vector<std::string> together = complete_greedy(*model, prompts, 6, 2);
  REQUIRE(together.size() == prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    CAPTURE(prompts[i]);
    CHECK(complete_greedy(*model, {prompts[i]}, 6, 1).at(0) == together[i]);
  }
  CHECK(model->is_training());  // left as it was
  CHECK_THROWS_AS(complete_greedy(*model, {std::string(60, 'a')}, 10, 1), Error);  // beyond max_seq
  CHECK_THROWS_AS(complete_greedy(*model, {"a#b"}, 4, 1), Error);                  // not in the alphabet
}

TEST_CASE("validation_perplexity: every target counted once, the same whatever the batch") {
  set_num_threads(1);
  auto model = tiny_decoder(4);
  const std::vector<std::string> docs = {"Mia has 12 apples.", "What is the birth city of Anya Forger? Kyoto",
                                         "12 + 5 = 17. The answer is 17.", "short"};
  std::int64_t characters = 0;
  for (const std::string& d : docs) characters += static_cast<std::int64_t>(d.size()) + 2;  // BOS, EOS
  const Perplexity one = validation_perplexity(*model, docs, 17, 1);
  const Perplexity four = validation_perplexity(*model, docs, 17, 4);
  CHECK(one.tokens == characters - 1);  // every token after the first is a target once
  CHECK(four.tokens == one.tokens);
  CHECK(four.mean_loss == doctest::Approx(one.mean_loss).epsilon(1e-5));
  // Untrained: near the uniform guess over the vocabulary (ln 82 = 4.41), far from 0.
  CHECK(one.mean_loss > 3.0);
  CHECK(one.mean_loss < 6.0);
  CHECK(one.perplexity == doctest::Approx(std::exp(one.mean_loss)));
}

TEST_CASE("a tiny decoder that learned two QA pairs answers them exactly; untrained, it does not") {
  set_num_threads(1);
  auto model = tiny_decoder(5);
  const std::vector<QaPair> pairs = {pair("What is the birth city of Anya Forger? ", "Kyoto"),
                                     pair("What is the major of Loid Forger? ", "Physics")};
  std::vector<std::string> docs;
  for (const QaPair& qa : pairs) docs.push_back(qa.text());
  CHECK(knowledge_accuracy(*model, pairs, 2).correct == 0);
  const double before = validation_perplexity(*model, docs, 64, 2).mean_loss;

  train_on(*model, docs, character_tokenizer(), 150);
  const Accuracy learned = knowledge_accuracy(*model, pairs, 2);
  CHECK(learned.total == 2);
  CHECK(learned.correct == 2);
  CHECK(learned.value() == 1.0);
  // Validation packs both documents into one window (the second at other positions than in this
  // training, where each had its own sequence), so the loss falls less than on the training rows:
  // 4.7 -> 1.4 nats here.
  CHECK(validation_perplexity(*model, docs, 64, 2).mean_loss < 0.5 * before);
}

TEST_CASE("word tokens: the prompt's final space is the model's to write, as in training; scores as with characters") {
  set_num_threads(1);
  const std::vector<QaPair> pairs = {pair("What is the birth city of Anya Forger? ", "Kyoto"),
                                     pair("What is the major of Loid Forger? ", "Marine Biology")};
  std::vector<std::string> docs;
  for (const QaPair& qa : pairs) docs.push_back(qa.text());
  docs.push_back("Mia has 3 cards. How many cards does Mia have now? 3. The answer is 3.");
  const Tokenizer words = Tokenizer::words(docs);
  // In training " Kyoto" is one piece; a prompt ending in ' ' would ask for "Kyoto", never seen.
  CHECK(words.encode(pairs[0].text()).back() == words.encode(" Kyoto").at(0));
  auto model = tiny_decoder(6, 160, words.vocab_size());  // room for math_accuracy's generation
  CHECK(knowledge_accuracy(*model, pairs, 2, words).correct == 0);
  train_on(*model, docs, words, 150);
  const std::vector<std::string> written = complete_greedy(*model, {pairs[0].prompt, pairs[1].prompt}, 4, 2, words);
  CHECK(written == std::vector<std::string>{"Kyoto", "Marine Biology"});  // the space written, then dropped
  CHECK(knowledge_accuracy(*model, pairs, 2, words).correct == 2);
  MathProblem p;
  p.question = "Mia has 3 cards. How many cards does Mia have now?";
  p.answer = 3;
  CHECK(math_accuracy(*model, {p}, 1, words).correct == 1);
  // Perplexity counts word tokens: fewer targets than characters.
  CHECK(validation_perplexity(*model, docs, 64, 2, words).tokens < validation_perplexity(*model, docs, 64, 2).tokens);
}
