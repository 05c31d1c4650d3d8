// tasks/shortest_path/graph.h — random directed graphs, their shortest paths, and the choice of the
// edge probability p for the shortest-path task of Mixture of Parrots (Section 4, Figures 2 and 4b).
//
// Graphs. A directed Erdos-Renyi graph G(n, p) has vertices 0 .. n-1, and each of the n (n - 1)
// ordered pairs (u, v), u != v, is an edge with probability p, independently (no self-loops). Its
// mean out-degree is c = (n - 1) p. One draw reads the pairs in row-major order (u, then v) and
// keeps (u, v) when gen.next_uniform() < p: the same generator state gives the same graph, and the
// same draws with a larger p give a superset of the edges (used by calibration, below).
//
// Shortest paths. distances_from(g, s) is a breadth-first search: dist[v] = the fewest edges on a
// path s -> v, or kUnreachable. Among all shortest paths s -> d the task's answer is the
// lexicographically smallest vertex sequence. It is found greedily: a backward BFS from d (over
// reversed edges) gives to_d[v] = dist(v, d); starting at s, step to the smallest out-neighbour w
// with to_d[w] = to_d[current] - 1 until d is reached. Every shortest path has the same length and
// every vertex the greedy step can choose still lies on a shortest path, so choosing the smallest
// vertex at each position gives the smallest sequence. Example (n = 4, edges 0->1 0->2 1->3 2->3):
// the shortest paths 0 -> 3 are 0 1 3 and 0 2 3; the answer is 0 1 3.
//
// Queries. The task asks for a path between a query pair (s, d) drawn uniformly among the pairs
// with s != d and d reachable from s; a graph without any such pair is redrawn. "Length" below
// means the number of edges of the shortest path (dist(s, d) >= 1).
//
// The mean query length as a function of p. Given a graph, the expected length of a uniform
// reachable query is the mean distance over its reachable pairs, so mean_query_length averages that
// exact per-graph mean over `samples` graphs (a lower-variance estimate of the same number as
// drawing one query per graph). It rises with p and then falls: for small p the graph is a scatter
// of short chains and the few reachable pairs are mostly single edges; at large p almost every pair
// is an edge (p = 1 gives length 1). The peak sits near a mean out-degree c of 2 and grows slowly
// with n. calibrate_p(n, 3.5, Generator(0), 4000 graphs) gives:
//     n     6     8    10    12    16    20    25    28    30    40    50
//   peak  1.65  1.90  2.13  2.34  2.70  3.02  3.36  3.53  3.64  4.15  4.60   (at c = 1.7 .. 2.0)
// so 3.5 is first reachable at n = 28; for n = 28, 30, 40, 50 it is reached at c = 2.00, 2.21,
// 2.67, 2.95 (p = 0.0740, 0.0761, 0.0684, 0.0601), and below that n the peak is used.
//
// Calibration (calibrate_p). The paper sets p so that the mean length is 3.5 (n = 25 .. 55). For
// small n no p reaches 3.5, so: if the peak reaches the target, return the p with mean length =
// target; otherwise return the p at the peak, with reached_target = false (report which!).
//   The curve crosses the target twice when the peak exceeds it, once on each side of the peak. We
// take the crossing ABOVE the peak (the denser graphs, c > 2), because
//   - that is where the task is a shortest-path task: the graph has a giant strongly connected
//     part and many queries have several shortest paths, so the model must find the shortest one
//     and break ties. Below the peak the graph is near the percolation threshold (c ~ 1), a
//     scatter of thin chains where the path of a reachable pair is nearly always the only path:
//     a path-following task. Measured at n = 50: 65% of queries have a unique shortest path at the
//     upper crossing (c = 2.95) against 96% at the lower one (c = 1.11); at n = 30, 77% against 90%;
//   - more of the queries need reasoning: the share of one-edge answers (which the model can copy
//     from the query) is 6.5% at the upper crossing against 20% at the lower one (n = 50).
// The price is longer sequences (more edges): at n = 50 about 147 edges (452 tokens) instead of 56.
//   The rule: scan c = (n - 1) p over the grid 0.5, 0.6, ..., 6 (all with the same random draws,
// "common random numbers", so the estimates along p share their noise and the curve is smooth),
// take the grid maximum as the peak; if it is below the target, return it; else bisect on
// [p_peak, 1] (the curve decreases there, from >= target to 1) for the p with mean length =
// target. Deterministic: the draws come from a seed taken from `gen` (two words).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/random.h"

namespace moelab::shortest_path {

constexpr int kUnreachable = -1;

struct Graph {
  int n = 0;
  std::vector<std::uint8_t> adjacency;          // [n * n]: adjacency[u * n + v] = 1 iff edge u -> v
  std::vector<std::vector<int>> out;            // out[u]: u's out-neighbours, ascending
  std::vector<std::vector<int>> in;             // in[v]: v's in-neighbours, ascending

  bool has_edge(int u, int v) const { return adjacency[static_cast<std::size_t>(u) * n + v] != 0; }
  std::int64_t num_edges() const;
  // The edges (u, v) sorted by u, then v.
  std::vector<std::pair<int, int>> edges() const;
  // A compact exact identity of the edge set (bit-packed adjacency), for comparing graphs.
  std::string key() const;
};

// A graph from an explicit edge list (duplicates and self-loops are errors); n >= 1.
Graph make_graph(int n, const std::vector<std::pair<int, int>>& edges);

// One draw of G(n, p): n >= 2, p in [0, 1]. Uses n (n - 1) uniforms from gen.
Graph random_graph(int n, double p, Generator& gen);

// Breadth-first distances from s (forward edges), or to d (backward over reversed edges):
// [n] ints, kUnreachable where there is no path. dist[s] = 0.
std::vector<int> distances_from(const Graph& g, int s);
std::vector<int> distances_to(const Graph& g, int d);

// The lexicographically smallest shortest path s -> d, both included ({s} when s == d); empty when
// d is unreachable from s.
std::vector<int> smallest_shortest_path(const Graph& g, int s, int d);

// Every pair (s, d), s != d, with d reachable from s, in order of s then d; dist(s, d) alongside.
struct ReachablePair {
  int s, d, distance;
};
std::vector<ReachablePair> reachable_pairs(const Graph& g);

// Mean shortest-path length (edges) of a uniform reachable query on G(n, p), averaged over
// `samples` graphs that have at least one reachable pair (graphs without one are redrawn).
double mean_query_length(int n, double p, std::int64_t samples, Generator& gen);

struct Calibration {
  double p = 0;               // the edge probability to use
  double mean_length = 0;     // mean_query_length at that p (the calibration's estimate)
  bool reached_target = false;  // true: mean_length ~= target; false: the peak, below the target
  double peak_p = 0;          // the p of the grid maximum, and that maximum
  double peak_length = 0;
};

// See the header comment: target >= 1, samples >= 1 graphs per estimate, n >= 2.
Calibration calibrate_p(int n, double target, Generator& gen, std::int64_t samples = 2000);

}  // namespace moelab::shortest_path
