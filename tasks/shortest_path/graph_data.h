// tasks/shortest_path/graph_data.h — the shortest-path task of Mixture of Parrots (Section 4,
// Figure 2): token sequences, training batches, the held-out test set and exact-match evaluation.
// Graphs, BFS and the choice of p are in graph.h.
//
// Tokens (Vocab, n + 6 of them, as in the paper):
//   vertex v -> v (0 .. n-1),  EDGE = n,  BOS = n+1,  EOS = n+2,  PAD = n+3,  SEP = n+4,  "/" = n+5
// One example is a graph G(n, p), a query (s, d) drawn uniformly among its reachable pairs with
// s != d (graph.h), and the answer: the lexicographically smallest shortest path s -> d, s and d
// included. The sequence lists every edge as "u EDGE v", in a random order, then the query, then
// the answer:
//   BOS  u1 EDGE v1  u2 EDGE v2 ...  SEP s d /  s ... d  EOS
// Worked example, n = 4 (EDGE 4, BOS 5, EOS 6, PAD 7, SEP 8, "/" 9), edges 2->3 0->1 1->3 0->2
// (in the order drawn), query 0 -> 3; the shortest paths are 0 1 3 and 0 2 3, the answer 0 1 3:
//   decode: BOS 2 EDGE 3 0 EDGE 1 1 EDGE 3 0 EDGE 2 SEP 0 3 / 0 1 3 EOS
//   ids:    5   2 4    3 0 4    1 1 4    3 0 4    2 8   0 3 9 0 1 3 6
//   prompt = everything up to and including "/" (17 tokens here); the model writes the rest.
// A sequence has 1 + 3 m + 4 + (path vertices) + 1 tokens for m edges; at most
// max_sequence_length(n) = 3 n (n - 1) + n + 6.
//
// Training (training_batch). Every call draws fresh examples (no fixed training set; the paper's
// 1e6 examples are as good as fresh for these graph counts) and turns them into a next-token
// batch (tasks/common/batch.h): inputs, targets int32 [B, L-1] with L the longest sequence, padded
// with PAD. Only the answer counts: the targets are the path tokens after "/" and the EOS (the
// first answer target, s, is predicted at the "/" position); every other target, the graph, the
// query and the padding, is kIgnoreTarget (the paper's "mask on the input instance").
//   Held-out graphs: pass the TestSet as `exclude` and any drawn example whose graph (edge set,
// whatever its query) is a test graph is rejected and redrawn, so no test graph is ever trained on.
// (For the graph sizes of the paper that almost never happens; for tiny n it does, and the rule
// keeps the test set honest.)
//
// Evaluation (evaluate). For each test example the model gets the prompt and decodes greedily
// (nn/generate.h); prompts differ in length (graphs differ in edge count), so the examples are
// grouped by prompt length and each group decoded `batch` rows at a time ([b, P] -> [b, N] with
// N = min(n + 1, max_seq - P): a shortest path has at most n vertices, plus the EOS). The answer is
// the generated tokens before the first EOS (none: the answer is wrong). Two scores:
//   exact_match     the answer equals the lexicographically smallest shortest path (the paper's
//                   exact accuracy, its ground truth being this canonical path);
//   valid_shortest  the answer is any shortest path: starts at s, ends at d, every step is an edge
//                   of the graph, and it has dist(s, d) edges.
// The model is run under NoGradGuard in eval mode and put back in the mode it was in.
//   One run's graphs (run_graphs): the p of a run, given or calibrated (graph.h), and its held-out
// test set, both drawn from the run seed alone, so every process of a jobs run, and every
// experiment that asks for the same n and run seed (`moelab shortest-path`, `moelab routers`),
// gets the same p and the same test graphs.
//   A trivial baseline (direct_edge_baseline): the share of test queries whose answer is the single
// edge s -> d; a model that always answers "s d" scores exactly that, so a model that learned
// anything beyond copying the query must beat it.
//
//   Generator cal(0);
//   const double p = calibrate_p(30, 3.5, cal).p;
//   TestSet test = make_test_set(30, p, 1000, /*seed=*/1234);
//   Generator data(1);
//   TokenBatch b = training_batch(30, p, 32, data, &test);   // b.inputs, b.targets: [32, L-1]
//   ... train a Decoder (vocab Vocab{30}.size(), max_seq >= max_sequence_length(30)) ...
//   PathResult r = evaluate(model, test, 64);               // r.exact_match, r.valid_shortest
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/random.h"
#include "nn/decoder.h"
#include "tasks/common/batch.h"
#include "tasks/shortest_path/graph.h"

namespace moelab::shortest_path {

struct Vocab {
  int n = 0;  // vertices

  std::int32_t vertex(int v) const { return v; }
  std::int32_t edge() const { return n; }
  std::int32_t bos() const { return n + 1; }
  std::int32_t eos() const { return n + 2; }
  std::int32_t pad() const { return n + 3; }
  std::int32_t sep() const { return n + 4; }
  std::int32_t slash() const { return n + 5; }
  std::int32_t size() const { return n + 6; }
  bool is_vertex(std::int32_t t) const { return t >= 0 && t < n; }

  // Space-separated words: vertices as numbers, then EDGE BOS EOS PAD SEP and "/"; a token outside
  // the vocabulary as "?<id>".
  std::string decode(const std::vector<std::int32_t>& tokens) const;
  // The inverse of decode (for vocabulary tokens); an unknown word throws moelab::Error.
  std::vector<std::int32_t> encode(const std::string& text) const;
};

// The longest sequence any example on n vertices can have (a complete graph and a path of n).
std::int64_t max_sequence_length(int n);

struct Example {
  Graph graph;
  int s = 0, d = 0;
  std::vector<int> path;                         // smallest shortest path s .. d (>= 2 vertices)
  std::vector<std::int32_t> tokens;              // the whole sequence, BOS .. EOS
  std::vector<std::uint8_t> loss_mask;           // [tokens.size()]: 1 on the answer (path + EOS)
  std::int64_t prompt_length = 0;                // tokens up to and including "/"

  int distance() const { return static_cast<int>(path.size()) - 1; }
  std::vector<std::int32_t> prompt() const {
    return {tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(prompt_length)};
  }
};

// The sequence for a given graph, query and edge order (edge_order: the graph's edges, each once,
// in the order they are written). The query must be reachable with s != d.
Example make_example(const Graph& g, int s, int d, const std::vector<std::pair<int, int>>& edge_order);

// One random example: draws G(n, p) until it has a reachable pair, a uniform reachable query, and
// a uniformly shuffled edge order (Fisher-Yates), all from gen.
Example random_example(int n, double p, Generator& gen);

// The held-out examples, drawn from their own seed.
struct TestSet {
  int n = 0;
  double p = 0;
  std::vector<Example> examples;
  std::unordered_set<std::string> graph_keys;  // Graph::key() of every test graph

  bool contains_graph(const Graph& g) const { return graph_keys.count(g.key()) != 0; }
};
TestSet make_test_set(int n, double p, std::int64_t count = 1000, std::uint64_t seed = 0x5e57);

// `count` fresh examples whose graphs are not in `exclude` (null: no exclusion). `rejected`
// (optional) is increased by the number of drawn examples thrown away for that reason. Throws
// moelab::Error when the test set leaves almost nothing to draw (over 1,000 rejections per kept
// example).
std::vector<Example> training_examples(int n, double p, std::int64_t count, Generator& gen,
                                       const TestSet* exclude = nullptr, std::int64_t* rejected = nullptr);

// The next-token batch of some examples: inputs, targets [B, L-1], padded with PAD, targets
// counted only on the answer tokens.
TokenBatch make_batch(const std::vector<Example>& examples);

// make_batch(training_examples(n, p, batch, gen, exclude)).
TokenBatch training_batch(int n, double p, std::int64_t batch, Generator& gen, const TestSet* exclude = nullptr);

struct PathResult {
  double exact_match = 0;     // share of answers equal to the smallest shortest path
  double valid_shortest = 0;  // share of answers that are some shortest path s -> d
  std::int64_t tested = 0;
};

// How one generated answer scores: `generated` are the tokens the model wrote after the prompt
// (cut at the first EOS; no EOS means wrong).
struct AnswerCheck {
  bool exact = false;
  bool valid_shortest = false;
};
AnswerCheck check_answer(const Example& example, const std::vector<std::int32_t>& generated);

// Greedy decoding of every test example (see the header comment); batch >= 1 rows at a time.
// The model's vocabulary must be Vocab{test.n}.size() and its max_seq at least the longest prompt
// + 1.
PathResult evaluate(Decoder& model, const TestSet& test, std::int64_t batch = 64);

// The share of test queries whose answer is the single edge s -> d.
double direct_edge_baseline(const TestSet& test);

// One run's graphs (see the header comment).
struct RunGraphs {
  Calibration cal;      // the p used (given: cal.p with its mean length measured; else calibrated)
  TestSet test;         // test_examples held-out graphs
  double baseline = 0;  // direct_edge_baseline(test)
};
// p > 0: that p; p = 0: calibrate_p(n, target_length) from Generator(run_seed + 77). The test set:
// make_test_set(n, p, test_examples, 0x5e57 + run_seed). Prints the calibration on stdout.
RunGraphs run_graphs(int n, double p, double target_length, std::int64_t test_examples, std::uint64_t run_seed);

}  // namespace moelab::shortest_path
