// tasks/shortest_path/graph.cpp — see graph.h.
#include "tasks/shortest_path/graph.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/error.h"

namespace moelab::shortest_path {

std::int64_t Graph::num_edges() const {
  std::int64_t m = 0;
  for (const auto& o : out) m += static_cast<std::int64_t>(o.size());
  return m;
}

std::vector<std::pair<int, int>> Graph::edges() const {
  std::vector<std::pair<int, int>> e;
  for (int u = 0; u < n; ++u)
    for (int v : out[static_cast<std::size_t>(u)]) e.emplace_back(u, v);
  return e;
}

std::string Graph::key() const {
  std::string k(static_cast<std::size_t>((n * n + 7) / 8) + 2, '\0');
  k[0] = static_cast<char>(n & 0xff), k[1] = static_cast<char>((n >> 8) & 0xff);
  for (std::size_t i = 0; i < adjacency.size(); ++i)
    if (adjacency[i]) k[2 + i / 8] = static_cast<char>(k[2 + i / 8] | (1 << (i % 8)));
  return k;
}

namespace {

// Fills out/in from adjacency (ascending, since both loops run in vertex order).
void build_lists(Graph& g) {
  const auto n = static_cast<std::size_t>(g.n);
  g.out.assign(n, {});
  g.in.assign(n, {});
  for (std::size_t u = 0; u < n; ++u)
    for (std::size_t v = 0; v < n; ++v)
      if (g.adjacency[u * n + v]) {
        g.out[u].push_back(static_cast<int>(v));
        g.in[v].push_back(static_cast<int>(u));
      }
}

// BFS over `next` (out for forward distances, in for backward ones) into dist, using queue as
// scratch ([n]); both are resized by the caller.
void bfs(const std::vector<std::vector<int>>& next, int source, std::vector<int>& dist, std::vector<int>& queue) {
  std::fill(dist.begin(), dist.end(), kUnreachable);
  dist[static_cast<std::size_t>(source)] = 0;
  std::size_t head = 0, tail = 0;
  queue[tail++] = source;
  while (head < tail) {
    const int u = queue[head++];
    for (int v : next[static_cast<std::size_t>(u)])
      if (dist[static_cast<std::size_t>(v)] == kUnreachable) {
        dist[static_cast<std::size_t>(v)] = dist[static_cast<std::size_t>(u)] + 1;
        queue[tail++] = v;
      }
  }
}

void check_vertex(const Graph& g, int v, const char* op) {
  MOELAB_CHECK(v >= 0 && v < g.n, op, "vertex ", v, " is out of range for a graph of ", g.n, " vertices");
}

}  // namespace

Graph make_graph(int n, const std::vector<std::pair<int, int>>& edges) {
  MOELAB_CHECK(n >= 1, "shortest_path::make_graph", "n must be >= 1, got ", n);
  Graph g;
  g.n = n;
  g.adjacency.assign(static_cast<std::size_t>(n) * n, 0);
  for (const auto& [u, v] : edges) {
    MOELAB_CHECK(u >= 0 && u < n && v >= 0 && v < n, "shortest_path::make_graph", "edge (", u, ", ", v,
                 ") is out of range for ", n, " vertices");
    MOELAB_CHECK(u != v, "shortest_path::make_graph", "self-loop (", u, ", ", v, ")");
    auto& a = g.adjacency[static_cast<std::size_t>(u) * n + v];
    MOELAB_CHECK(!a, "shortest_path::make_graph", "duplicate edge (", u, ", ", v, ")");
    a = 1;
  }
  build_lists(g);
  return g;
}

Graph random_graph(int n, double p, Generator& gen) {
  MOELAB_CHECK(n >= 2, "shortest_path::random_graph", "n must be >= 2, got ", n);
  MOELAB_CHECK(p >= 0.0 && p <= 1.0, "shortest_path::random_graph", "p must be in [0, 1], got ", p);
  Graph g;
  g.n = n;
  g.adjacency.assign(static_cast<std::size_t>(n) * n, 0);
  for (int u = 0; u < n; ++u)
    for (int v = 0; v < n; ++v)
      if (u != v && gen.next_uniform() < p) g.adjacency[static_cast<std::size_t>(u) * n + v] = 1;
  build_lists(g);
  return g;
}

std::vector<int> distances_from(const Graph& g, int s) {
  check_vertex(g, s, "shortest_path::distances_from");
  std::vector<int> dist(static_cast<std::size_t>(g.n)), queue(static_cast<std::size_t>(g.n));
  bfs(g.out, s, dist, queue);
  return dist;
}

std::vector<int> distances_to(const Graph& g, int d) {
  check_vertex(g, d, "shortest_path::distances_to");
  std::vector<int> dist(static_cast<std::size_t>(g.n)), queue(static_cast<std::size_t>(g.n));
  bfs(g.in, d, dist, queue);
  return dist;
}

std::vector<int> smallest_shortest_path(const Graph& g, int s, int d) {
  check_vertex(g, s, "shortest_path::smallest_shortest_path");
  check_vertex(g, d, "shortest_path::smallest_shortest_path");
  const std::vector<int> to_d = distances_to(g, d);
  if (to_d[static_cast<std::size_t>(s)] == kUnreachable) return {};
  std::vector<int> path = {s};
  for (int cur = s; cur != d;) {
    const int want = to_d[static_cast<std::size_t>(cur)] - 1;
    for (int w : g.out[static_cast<std::size_t>(cur)])  // ascending: the first match is the smallest
      if (to_d[static_cast<std::size_t>(w)] == want) {
        cur = w;
        break;
      }
    path.push_back(cur);
  }
  return path;
}

std::vector<ReachablePair> reachable_pairs(const Graph& g) {
  std::vector<ReachablePair> pairs;
  std::vector<int> dist(static_cast<std::size_t>(g.n)), queue(static_cast<std::size_t>(g.n));
  for (int s = 0; s < g.n; ++s) {
    bfs(g.out, s, dist, queue);
    for (int d = 0; d < g.n; ++d)
      if (d != s && dist[static_cast<std::size_t>(d)] != kUnreachable)
        pairs.push_back({s, d, dist[static_cast<std::size_t>(d)]});
  }
  return pairs;
}

namespace {

// Sum of distances and count of reachable pairs (s != d) of one graph given as bitset rows
// (rows[u] bit v: edge u -> v; n <= 64): a BFS per source that expands a whole level at once.
void distance_sums(const std::uint64_t* rows, int n, std::int64_t& pairs, std::int64_t& length) {
  for (int s = 0; s < n; ++s) {
    std::uint64_t visited = std::uint64_t{1} << s, frontier = visited;
    for (int level = 1; frontier; ++level) {
      std::uint64_t next = 0;
      for (std::uint64_t f = frontier; f; f &= f - 1) next |= rows[std::countr_zero(f)];
      frontier = next & ~visited;
      visited |= frontier;
      const int reached = std::popcount(frontier);
      pairs += reached, length += static_cast<std::int64_t>(reached) * level;
    }
  }
}

}  // namespace

double mean_query_length(int n, double p, std::int64_t samples, Generator& gen) {
  MOELAB_CHECK(n >= 2, "shortest_path::mean_query_length", "n must be >= 2, got ", n);
  MOELAB_CHECK(samples >= 1, "shortest_path::mean_query_length", "samples must be >= 1, got ", samples);
  MOELAB_CHECK(p > 0.0 && p <= 1.0, "shortest_path::mean_query_length", "p must be in (0, 1], got ", p,
               " (p = 0 gives no reachable pair at all)");
  double total = 0;
  std::vector<std::uint64_t> rows(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < samples;) {
    std::int64_t pairs = 0, length = 0;
    if (n <= 64) {  // the fast path: the same draws as random_graph, straight into bitset rows
      for (int u = 0; u < n; ++u) {
        std::uint64_t row = 0;
        for (int v = 0; v < n; ++v)
          if (u != v && gen.next_uniform() < p) row |= std::uint64_t{1} << v;
        rows[static_cast<std::size_t>(u)] = row;
      }
      distance_sums(rows.data(), n, pairs, length);
    } else {
      for (const ReachablePair& q : reachable_pairs(random_graph(n, p, gen))) ++pairs, length += q.distance;
    }
    if (pairs == 0) continue;  // no query possible: redraw (the task conditions on a query existing)
    total += static_cast<double>(length) / static_cast<double>(pairs);
    ++i;
  }
  return total / static_cast<double>(samples);
}

Calibration calibrate_p(int n, double target, Generator& gen, std::int64_t samples) {
  MOELAB_CHECK(n >= 2, "shortest_path::calibrate_p", "n must be >= 2, got ", n);
  MOELAB_CHECK(target >= 1.0, "shortest_path::calibrate_p", "target must be >= 1 edge, got ", target);
  MOELAB_CHECK(samples >= 1, "shortest_path::calibrate_p", "samples must be >= 1, got ", samples);
  const std::uint64_t seed = (static_cast<std::uint64_t>(gen.next_u32()) << 32) | gen.next_u32();
  // Every estimate replays the same stream: common random numbers along p.
  const auto length_at = [&](double p) {
    Generator g(seed);
    return mean_query_length(n, p, samples, g);
  };
  const double degrees = static_cast<double>(n - 1);
  Calibration c;
  c.peak_length = -1;
  for (int step = 0; step <= 55; ++step) {  // c = 0.5, 0.6, ..., 6
    const double p = std::min(1.0, (0.5 + 0.1 * step) / degrees);
    const double length = length_at(p);
    if (length > c.peak_length) c.peak_length = length, c.peak_p = p;
    if (p >= 1.0) break;
  }
  if (c.peak_length < target) {
    c.p = c.peak_p, c.mean_length = c.peak_length, c.reached_target = false;
    return c;
  }
  // length(lo) >= target > length(hi) on the falling side; length(1) = 1.
  double lo = c.peak_p, hi = 1.0, lo_length = c.peak_length;
  for (int it = 0; it < 40 && hi - lo > 1e-7; ++it) {
    const double mid = 0.5 * (lo + hi);
    const double length = length_at(mid);
    if (length >= target)
      lo = mid, lo_length = length;
    else
      hi = mid;
  }
  const double hi_length = length_at(hi);
  // The grid point nearer the target of the final bracket.
  if (std::abs(hi_length - target) < std::abs(lo_length - target))
    c.p = hi, c.mean_length = hi_length;
  else
    c.p = lo, c.mean_length = lo_length;
  c.reached_target = true;
  return c;
}

}  // namespace moelab::shortest_path
