// tasks/pretrain/evaluate.h — scoring a language model on the pre-training corpus (corpus.h):
// knowledge accuracy, math accuracy and validation perplexity, the three measurements of Mixture
// of Parrots Section 5 (Figures 1, 5 and 6), on a moelab Decoder trained on the corpus's tokens.
//
// Knowledge (qa_test: held-out people's questions; qa_train_eval: trained ones). The prompt is
// BOS + "What is the birth city of Anya Forger? "; the model continues greedily for answer.size() + 1
// tokens; the pair is right when the text before the first EOS is the answer exactly (so "Kyoto"
// then EOS; "Kyotoo" or "Kyoto" with no EOS in time are wrong).
// Math (math_test: fresh problems; math_train_eval: training problems). The prompt is BOS +
// question + " "; the model writes the solution greedily, up to kMaxSolutionLength + 1 tokens (one
// more for a moved space, below); the problem is solved when extract_answer (math_problems.h)
// finds "The answer is N." with N the answer in the text before the first EOS. The paper's Figure 5 gap is train accuracy - test.
// Validation perplexity (validation_documents): the documents packed into windows of `seq` tokens
// as in training (pack_documents), the mean next-token cross-entropy over every target of every
// window, and its exp. The paper measures it on 5,000 held-out sequences of its training mixture.
//
// Tokens come from the tokenizer given (tokenizer.h; the character one by default). With word
// tokens a prompt's final space is not given to the model: in training text the space before a
// word belongs to the word's piece (" Kyoto"), so the prompt ends at '?' and the model is expected
// to write the space; complete_greedy drops that one leading space from what it returns, so the
// scoring rules below read the same text with either tokenizer.
// Generation is batched: generate_greedy (nn/generate.h) needs one prompt length per batch, so
// prompts are grouped by length and each group is cut into batches of at most `batch`; results
// come back in the order of the input. Nothing here trains: the model runs in evaluation mode and
// without a graph (NoGradGuard), and is left in the mode it was in (EvalModeGuard, nn/module.h).
//
//   Accuracy k = knowledge_accuracy(model, corpus.qa_test, 64);      // k.value() in [0, 1]
//   Accuracy m = math_accuracy(model, corpus.math_test, 64);
//   Perplexity p = validation_perplexity(model, corpus.validation_documents, 129, 32);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/decoder.h"
#include "tasks/pretrain/knowledge.h"
#include "tasks/pretrain/math_problems.h"
#include "tasks/pretrain/tokenizer.h"

namespace moelab::pretrain {

struct Accuracy {
  std::int64_t correct = 0, total = 0;
  double value() const { return total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
};

struct Perplexity {
  double mean_loss = 0.0;   // nats per target token
  double perplexity = 0.0;  // exp(mean_loss)
  std::int64_t tokens = 0;  // targets counted
};

// What the model writes after each prompt (BOS is put in front of each): greedy, new_tokens
// tokens, decoded up to the first EOS (decode_until_eos). prompt + new_tokens + 1 must fit the
// model's max_seq (moelab::Error naming the longest prompt otherwise); batch >= 1.
std::vector<std::string> complete_greedy(Decoder& model, const std::vector<std::string>& prompts,
                                         std::int64_t new_tokens, std::int64_t batch,
                                         const Tokenizer& tokenizer = character_tokenizer());

// The scoring rules above, on what a model wrote (text before the first EOS).
bool knowledge_correct(const std::string& written, const QaPair& qa);
bool math_correct(const std::string& written, const MathProblem& problem);

Accuracy knowledge_accuracy(Decoder& model, const std::vector<QaPair>& pairs, std::int64_t batch,
                            const Tokenizer& tokenizer = character_tokenizer());
Accuracy math_accuracy(Decoder& model, const std::vector<MathProblem>& problems, std::int64_t batch,
                       const Tokenizer& tokenizer = character_tokenizer());

// documents: the validation texts (no BOS/EOS: the packer adds them); seq >= 2; batch >= 1.
Perplexity validation_perplexity(Decoder& model, const std::vector<std::string>& documents, std::int64_t seq,
                                 std::int64_t batch, const Tokenizer& tokenizer = character_tokenizer());

}  // namespace moelab::pretrain
