// tasks/pretrain/evaluate.cpp — see evaluate.h.
#include "tasks/pretrain/evaluate.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "autograd/no_grad.h"
#include "core/error.h"
#include "core/factories.h"
#include "nn/generate.h"
#include "nn/loss.h"
#include "tasks/common/batch.h"
#include "tasks/pretrain/corpus.h"
#include "tasks/pretrain/tokenizer.h"

namespace moelab::pretrain {

std::vector<std::string> complete_greedy(Decoder& model, const std::vector<std::string>& prompts,
                                         std::int64_t new_tokens, std::int64_t batch, const Tokenizer& tokenizer) {
  MOELAB_CHECK(batch >= 1 && new_tokens >= 1, "pretrain::complete_greedy", "batch and new_tokens must be >= 1, got ",
               batch, " and ", new_tokens);
  // Prompt tokens (BOS first), grouped by length: generate_greedy takes one length per batch.
  std::vector<std::vector<std::int32_t>> tokens(prompts.size());
  std::map<std::size_t, std::vector<std::size_t>> by_length;
  // Word tokens: a final space goes to the model's side (evaluate.h), as the training text has it.
  std::vector<bool> space_moved(prompts.size(), false);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    std::string_view prompt = prompts[i];
    if (tokenizer.kind() == Tokenizer::Kind::Words && !prompt.empty() && prompt.back() == ' ') {
      prompt.remove_suffix(1);
      space_moved[i] = true;
    }
    tokens[i] = tokenizer.encode(prompt);
    tokens[i].insert(tokens[i].begin(), kBos);
    MOELAB_CHECK(static_cast<std::int64_t>(tokens[i].size()) + new_tokens <= model.config().max_seq,
                 "pretrain::complete_greedy", "prompt ", i, " (", tokens[i].size(), " tokens) and ", new_tokens,
                 " new tokens exceed the model's max_seq ", model.config().max_seq, ": '", prompts[i], "'");
    by_length[tokens[i].size()].push_back(i);
  }
  const EvalModeGuard eval(model);
  NoGradGuard no_grad;
  std::vector<std::string> out(prompts.size());
  for (const auto& [length, rows] : by_length) {
    for (std::size_t first = 0; first < rows.size(); first += static_cast<std::size_t>(batch)) {
      const std::size_t count = std::min(rows.size() - first, static_cast<std::size_t>(batch));
      std::vector<std::int32_t> flat;
      for (std::size_t r = 0; r < count; ++r) {
        const std::vector<std::int32_t>& t = tokens[rows[first + r]];
        flat.insert(flat.end(), t.begin(), t.end());
      }
      const Tensor prompt = from_vector(flat, {static_cast<std::int64_t>(count), static_cast<std::int64_t>(length)});
      const std::vector<std::int32_t> written =
          generate_greedy(model, prompt, new_tokens).tokens.to(Device::cpu()).to_vector<std::int32_t>();
      for (std::size_t r = 0; r < count; ++r) {
        const auto begin = written.begin() + static_cast<std::ptrdiff_t>(r * static_cast<std::size_t>(new_tokens));
        std::string text = tokenizer.decode_until_eos(std::vector<std::int32_t>(begin, begin + new_tokens));
        if (space_moved[rows[first + r]] && !text.empty() && text.front() == ' ') text.erase(0, 1);
        out[rows[first + r]] = std::move(text);
      }
    }
  }
  return out;
}

bool knowledge_correct(const std::string& written, const QaPair& qa) { return written == qa.answer; }

bool math_correct(const std::string& written, const MathProblem& problem) {
  const std::optional<std::int64_t> answer = extract_answer(written);
  return answer.has_value() && *answer == problem.answer;
}

Accuracy knowledge_accuracy(Decoder& model, const std::vector<QaPair>& pairs, std::int64_t batch,
                            const Tokenizer& tokenizer) {
  // One length of generation for all: the longest answer (with the space a word tokenizer moves to
  // the model's side) + EOS; a shorter answer must stop with its EOS, which decode_until_eos cuts at.
  std::int64_t longest = 1;
  std::vector<std::string> prompts;
  for (const QaPair& qa : pairs) {
    prompts.push_back(qa.prompt);
    const std::string continuation = (tokenizer.kind() == Tokenizer::Kind::Words ? " " : "") + qa.answer;
    longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(tokenizer.encode(continuation).size()) + 1);
  }
  Accuracy a;
  if (pairs.empty()) return a;
  const std::vector<std::string> written = complete_greedy(model, prompts, longest, batch, tokenizer);
  for (std::size_t i = 0; i < pairs.size(); ++i) a.correct += knowledge_correct(written[i], pairs[i]);
  a.total = static_cast<std::int64_t>(pairs.size());
  return a;
}

Accuracy math_accuracy(Decoder& model, const std::vector<MathProblem>& problems, std::int64_t batch,
                       const Tokenizer& tokenizer) {
  std::vector<std::string> prompts;
  for (const MathProblem& p : problems) prompts.push_back(p.prompt());
  Accuracy a;
  if (problems.empty()) return a;
  // The longest solution in characters bounds it in tokens too; + EOS, + the space word tokens move.
  const std::int64_t new_tokens = kMaxSolutionLength + (tokenizer.kind() == Tokenizer::Kind::Words ? 2 : 1);
  const std::vector<std::string> written = complete_greedy(model, prompts, new_tokens, batch, tokenizer);
  for (std::size_t i = 0; i < problems.size(); ++i) a.correct += math_correct(written[i], problems[i]);
  a.total = static_cast<std::int64_t>(problems.size());
  return a;
}

Perplexity validation_perplexity(Decoder& model, const std::vector<std::string>& documents, std::int64_t seq,
                                 std::int64_t batch, const Tokenizer& tokenizer) {
  MOELAB_CHECK(batch >= 1 && seq >= 2, "pretrain::validation_perplexity", "batch must be >= 1 and seq >= 2, got ",
               batch, " and ", seq);
  MOELAB_CHECK(seq - 1 <= model.config().max_seq, "pretrain::validation_perplexity", "windows of ", seq,
               " tokens need max_seq >= ", seq - 1, ", the model has ", model.config().max_seq);
  const std::vector<std::vector<std::int32_t>> windows = pack_documents(documents, seq, tokenizer);
  const EvalModeGuard eval(model);
  NoGradGuard no_grad;
  double total_loss = 0.0;
  std::int64_t total_tokens = 0;
  std::size_t first = 0;
  while (first < windows.size()) {
    // At most `batch` windows of one length (only the last window may be shorter: its own batch).
    std::size_t end = first;
    while (end < windows.size() && end - first < static_cast<std::size_t>(batch) &&
           windows[end].size() == windows[first].size())
      ++end;
    const std::vector<std::vector<std::int32_t>> part(windows.begin() + static_cast<std::ptrdiff_t>(first),
                                                      windows.begin() + static_cast<std::ptrdiff_t>(end));
    const TokenBatch b = make_lm_batch(part, kPad);
    const Tensor loss = nn::cross_entropy(model.forward(b.inputs), b.targets).data();
    total_loss += loss.to(Device::cpu()).to(DType::Float64).item<double>() * static_cast<double>(b.counted_targets);
    total_tokens += b.counted_targets;
    first = end;
  }
  Perplexity p;
  p.tokens = total_tokens;
  p.mean_loss = total_tokens > 0 ? total_loss / static_cast<double>(total_tokens) : 0.0;
  p.perplexity = std::exp(p.mean_loss);
  return p;
}

}  // namespace moelab::pretrain
