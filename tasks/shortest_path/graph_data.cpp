// tasks/shortest_path/graph_data.cpp — see graph_data.h.
#include "tasks/shortest_path/graph_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "autograd/no_grad.h"
#include "core/error.h"
#include "core/factories.h"
#include "nn/generate.h"

namespace moelab::shortest_path {

namespace {

const char* const kSpecialNames[] = {"EDGE", "BOS", "EOS", "PAD", "SEP", "/"};

}  // namespace

std::string Vocab::decode(const std::vector<std::int32_t>& tokens) const {
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i) out += ' ';
    const std::int32_t t = tokens[i];
    if (is_vertex(t))
      out += std::to_string(t);
    else if (t >= n && t < size())
      out += kSpecialNames[t - n];
    else
      out += '?', out += std::to_string(t);
  }
  return out;
}

std::vector<std::int32_t> Vocab::encode(const std::string& text) const {
  std::istringstream in(text);
  std::vector<std::int32_t> tokens;
  for (std::string word; in >> word;) {
    std::int32_t t = -1;
    for (int k = 0; k < 6; ++k)
      if (word == kSpecialNames[k]) t = n + k;
    if (t < 0 && !word.empty() && std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        word.size() < 10) {
      const long v = std::stol(word);
      if (v < n) t = static_cast<std::int32_t>(v);
    }
    MOELAB_CHECK(t >= 0, "shortest_path::Vocab::encode", "unknown word '", word, "' for a vocabulary of ", n,
                 " vertices (words: 0 .. ", n - 1, ", EDGE, BOS, EOS, PAD, SEP, /)");
    tokens.push_back(t);
  }
  return tokens;
}

std::int64_t max_sequence_length(int n) {
  const auto m = static_cast<std::int64_t>(n);
  return 3 * m * (m - 1) + m + 6;
}

Example make_example(const Graph& g, int s, int d, const std::vector<std::pair<int, int>>& edge_order) {
  MOELAB_CHECK(s >= 0 && s < g.n && d >= 0 && d < g.n && s != d, "shortest_path::make_example", "query (", s,
               ", ", d, ") needs two different vertices of 0 .. ", g.n - 1);
  MOELAB_CHECK(static_cast<std::int64_t>(edge_order.size()) == g.num_edges(), "shortest_path::make_example",
               "edge_order has ", edge_order.size(), " edges but the graph has ", g.num_edges());
  std::vector<std::pair<int, int>> sorted = edge_order;
  std::sort(sorted.begin(), sorted.end());
  MOELAB_CHECK(sorted == g.edges(), "shortest_path::make_example",
               "edge_order must list each of the graph's edges exactly once");
  Example e;
  e.graph = g, e.s = s, e.d = d;
  e.path = smallest_shortest_path(g, s, d);
  MOELAB_CHECK(!e.path.empty(), "shortest_path::make_example", "vertex ", d, " is not reachable from ", s);
  const Vocab vocab{g.n};
  e.tokens.reserve(static_cast<std::size_t>(6 + 3 * edge_order.size() + e.path.size()));
  e.tokens.push_back(vocab.bos());
  for (const auto& [u, v] : edge_order) {
    e.tokens.push_back(vocab.vertex(u));
    e.tokens.push_back(vocab.edge());
    e.tokens.push_back(vocab.vertex(v));
  }
  e.tokens.insert(e.tokens.end(), {vocab.sep(), vocab.vertex(s), vocab.vertex(d), vocab.slash()});
  e.prompt_length = static_cast<std::int64_t>(e.tokens.size());
  for (int v : e.path) e.tokens.push_back(vocab.vertex(v));
  e.tokens.push_back(vocab.eos());
  e.loss_mask.assign(e.tokens.size(), 0);
  std::fill(e.loss_mask.begin() + static_cast<std::ptrdiff_t>(e.prompt_length), e.loss_mask.end(), 1);
  return e;
}

Example random_example(int n, double p, Generator& gen) {
  MOELAB_CHECK(p > 0.0, "shortest_path::random_example", "p must be > 0 (p = 0 has no reachable query), got ", p);
  for (;;) {
    const Graph g = random_graph(n, p, gen);
    const std::vector<ReachablePair> pairs = reachable_pairs(g);
    if (pairs.empty()) continue;
    const ReachablePair q = pairs[gen.next_below(static_cast<std::uint32_t>(pairs.size()))];
    std::vector<std::pair<int, int>> order = g.edges();
    for (std::size_t i = order.size(); i > 1; --i)  // Fisher-Yates
      std::swap(order[i - 1], order[gen.next_below(static_cast<std::uint32_t>(i))]);
    return make_example(g, q.s, q.d, order);
  }
}

TestSet make_test_set(int n, double p, std::int64_t count, std::uint64_t seed) {
  MOELAB_CHECK(count >= 1, "shortest_path::make_test_set", "count must be >= 1, got ", count);
  TestSet t;
  t.n = n, t.p = p;
  Generator gen(seed);
  t.examples.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    t.examples.push_back(random_example(n, p, gen));
    t.graph_keys.insert(t.examples.back().graph.key());
  }
  return t;
}

std::vector<Example> training_examples(int n, double p, std::int64_t count, Generator& gen, const TestSet* exclude,
                                       std::int64_t* rejected) {
  MOELAB_CHECK(count >= 1, "shortest_path::training_examples", "count must be >= 1, got ", count);
  MOELAB_CHECK(!exclude || exclude->n == n, "shortest_path::training_examples", "the excluded test set has n = ",
               exclude ? exclude->n : 0, ", the training data n = ", n);
  std::vector<Example> out;
  out.reserve(static_cast<std::size_t>(count));
  std::int64_t thrown = 0;
  while (static_cast<std::int64_t>(out.size()) < count) {
    Example e = random_example(n, p, gen);
    if (exclude && exclude->contains_graph(e.graph)) {
      ++thrown;
      MOELAB_CHECK(thrown <= 1000 * count, "shortest_path::training_examples", thrown,
                   " drawn graphs were all test graphs: the test set covers nearly every graph of G(", n, ", ", p,
                   "); use a larger n or a smaller test set");
      continue;
    }
    out.push_back(std::move(e));
  }
  if (rejected) *rejected += thrown;
  return out;
}

TokenBatch make_batch(const std::vector<Example>& examples) {
  MOELAB_CHECK(!examples.empty(), "shortest_path::make_batch", "needs at least one example");
  std::vector<std::vector<std::int32_t>> seqs;
  std::vector<std::vector<std::uint8_t>> masks;
  seqs.reserve(examples.size());
  masks.reserve(examples.size());
  for (const Example& e : examples) {
    MOELAB_CHECK(e.graph.n == examples[0].graph.n, "shortest_path::make_batch", "examples mix n = ", e.graph.n,
                 " and n = ", examples[0].graph.n);
    seqs.push_back(e.tokens);
    masks.push_back(e.loss_mask);
  }
  return make_lm_batch(seqs, Vocab{examples[0].graph.n}.pad(), &masks);
}

TokenBatch training_batch(int n, double p, std::int64_t batch, Generator& gen, const TestSet* exclude) {
  return make_batch(training_examples(n, p, batch, gen, exclude));
}

AnswerCheck check_answer(const Example& e, const std::vector<std::int32_t>& generated) {
  const Vocab vocab{e.graph.n};
  const auto eos = std::find(generated.begin(), generated.end(), vocab.eos());
  AnswerCheck r;
  if (eos == generated.end()) return r;
  const std::vector<std::int32_t> answer(generated.begin(), eos);
  if (answer.size() < 2 || answer.front() != e.s || answer.back() != e.d) return r;
  if (!std::all_of(answer.begin(), answer.end(), [&](std::int32_t t) { return vocab.is_vertex(t); })) return r;
  for (std::size_t i = 0; i + 1 < answer.size(); ++i)
    if (!e.graph.has_edge(answer[i], answer[i + 1])) return r;
  r.valid_shortest = static_cast<int>(answer.size()) - 1 == e.distance();
  r.exact = r.valid_shortest && std::equal(answer.begin(), answer.end(), e.path.begin(), e.path.end());
  return r;
}

PathResult evaluate(Decoder& model, const TestSet& test, std::int64_t batch) {
  MOELAB_CHECK(batch >= 1, "shortest_path::evaluate", "batch must be >= 1, got ", batch);
  MOELAB_CHECK(!test.examples.empty(), "shortest_path::evaluate", "the test set is empty");
  const Vocab vocab{test.n};
  MOELAB_CHECK(model.config().vocab == vocab.size(), "shortest_path::evaluate", "the model's vocabulary is ",
               model.config().vocab, " but n = ", test.n, " needs ", vocab.size());
  std::map<std::int64_t, std::vector<std::size_t>> by_length;  // prompt length -> example indices
  for (std::size_t i = 0; i < test.examples.size(); ++i) by_length[test.examples[i].prompt_length].push_back(i);
  MOELAB_CHECK(by_length.rbegin()->first < model.config().max_seq, "shortest_path::evaluate",
               "the longest prompt has ", by_length.rbegin()->first, " tokens; the model's max_seq ",
               model.config().max_seq, " leaves no room for an answer");

  NoGradGuard no_grad;
  const EvalModeGuard eval(model);  // the model's own mode comes back, also if generation throws
  std::int64_t exact = 0, valid = 0;
  for (const auto& [P, indices] : by_length) {
    const std::int64_t N = std::min<std::int64_t>(test.n + 1, model.config().max_seq - P);
    for (std::size_t start = 0; start < indices.size(); start += static_cast<std::size_t>(batch)) {
      const std::size_t rows = std::min(indices.size() - start, static_cast<std::size_t>(batch));
      std::vector<std::int32_t> prompts;
      prompts.reserve(rows * static_cast<std::size_t>(P));
      for (std::size_t r = 0; r < rows; ++r) {
        const Example& e = test.examples[indices[start + r]];
        prompts.insert(prompts.end(), e.tokens.begin(), e.tokens.begin() + static_cast<std::ptrdiff_t>(P));
      }
      const std::vector<std::int32_t> out =
          generate_greedy(model, from_vector(prompts, {static_cast<std::int64_t>(rows), P}), N)
              .tokens.to_vector<std::int32_t>();  // [rows, N]
      for (std::size_t r = 0; r < rows; ++r) {
        const auto row = out.begin() + static_cast<std::ptrdiff_t>(r * static_cast<std::size_t>(N));
        const AnswerCheck c = check_answer(test.examples[indices[start + r]], {row, row + N});
        exact += c.exact, valid += c.valid_shortest;
      }
    }
  }
  PathResult result;
  result.tested = static_cast<std::int64_t>(test.examples.size());
  result.exact_match = static_cast<double>(exact) / static_cast<double>(result.tested);
  result.valid_shortest = static_cast<double>(valid) / static_cast<double>(result.tested);
  return result;
}

double direct_edge_baseline(const TestSet& test) {
  MOELAB_CHECK(!test.examples.empty(), "shortest_path::direct_edge_baseline", "the test set is empty");
  std::int64_t direct = 0;
  for (const Example& e : test.examples) direct += e.distance() == 1;
  return static_cast<double>(direct) / static_cast<double>(test.examples.size());
}

RunGraphs run_graphs(int n, double p, double target_length, std::int64_t test_examples, std::uint64_t run_seed) {
  RunGraphs g;
  Generator gen(run_seed + 77);
  if (p > 0) {
    g.cal.p = p;
    g.cal.mean_length = mean_query_length(n, p, 2000, gen);
    g.cal.reached_target = std::fabs(g.cal.mean_length - target_length) < 0.1;
  } else {
    std::printf("calibrating p for n = %d (target mean path length %.2f) ...\n", n, target_length);
    g.cal = calibrate_p(n, target_length, gen);
  }
  std::printf("n = %d, p = %.4f: mean shortest-path length %.3f (%s)\n", n, g.cal.p, g.cal.mean_length,
              g.cal.reached_target ? "the target" : "the largest reachable; the target is not");
  g.test = make_test_set(n, g.cal.p, test_examples, 0x5e57 + run_seed);
  g.baseline = direct_edge_baseline(g.test);
  return g;
}

}  // namespace moelab::shortest_path
