// tests/test_graph_print.cpp — graph_text and graph_dot (autograd/graph_print.h).
//
// The text of small graphs is compared with the exact expected lines; the dot output is read back
// by a small parser (a digraph whose statements are node definitions `nK [attributes]` and edges
// `nA -> nB` between defined nodes) and its node and edge counts compared with the graph's.
#include <doctest/doctest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "autograd/graph_print.h"
#include "autograd/ops.h"
#include "autograd/ops_unary.h"
#include "core/factories.h"

using namespace moelab;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& shape) { return from_vector(v, shape); }

struct DotGraph {
  std::size_t nodes = 0, edges = 0;
};

// Parses the subset of the dot language graph_dot writes; fails the test on anything else.
DotGraph parse_dot(const std::string& dot) {
  DotGraph g;
  const std::string head = "digraph autograd {\n";
  REQUIRE(dot.rfind(head, 0) == 0);
  REQUIRE(dot.size() >= head.size() + 2);
  REQUIRE(dot.substr(dot.size() - 2) == "}\n");
  const std::string body = dot.substr(head.size(), dot.size() - head.size() - 2);
  const std::regex node_re(R"(\s*n(\d+) \[label="([^"\\]|\\.)*"(, [a-z]+=[a-z]+)*\])");
  const std::regex edge_re(R"(\s*n(\d+) -> n(\d+))");
  const std::regex default_re(R"(\s*node \[fontname="monospace"\])");
  std::set<std::string> defined;
  std::size_t start = 0;
  while (start < body.size()) {
    const std::size_t end = body.find(";\n", start);
    REQUIRE_MESSAGE(end != std::string::npos, "statement without ';': ", body.substr(start));
    const std::string statement = body.substr(start, end - start);
    start = end + 2;
    std::smatch m;
    if (std::regex_match(statement, m, node_re)) {
      CHECK_MESSAGE(defined.insert(m[1]).second, "node n", m[1], " defined twice");
      ++g.nodes;
    } else if (std::regex_match(statement, m, edge_re)) {
      CHECK_MESSAGE(defined.count(m[1]) == 1, "edge from undefined node n", m[1]);
      CHECK_MESSAGE(defined.count(m[2]) == 1, "edge to undefined node n", m[2]);
      ++g.edges;
    } else {
      CHECK_MESSAGE(std::regex_match(statement, default_re), "not a dot statement: ", statement);
    }
  }
  return g;
}

}  // namespace

TEST_CASE("graph_text of a tiny known graph, line for line") {
  const Variable x(f64({1.0, 2.0}, {2}));
  Variable w(f64({0.5, -0.5}, {2}), true);
  const Variable loss = sum(x * w);
  CHECK(graph_text(loss, {{"w", w}}) ==
        "%0 = const [2] float64\n"
        "%1 = leaf w [2] float64\n"
        "%2 = mul(%0, %1) [2] float64\n"
        "%3 = sum(%2) [] float64\n");
  // Unnamed leaves are "leaf"; a Variable used twice is listed once and named twice.
  Variable a(f64({1.0, 2.0, 3.0, 4.0}, {2, 2}), true);
  Variable h = a * a;
  h.retain_grad();
  h.register_hook([](const Tensor&) { return Tensor(); });
  const Variable out = mean(matmul(h, a, false, true));
  CHECK(graph_text(out) ==
        "%0 = leaf [2, 2] float64\n"
        "%1 = mul(%0, %0) [2, 2] float64 retain_grad hooks=1\n"
        "%2 = matmul[b^T](%1, %0) [2, 2] float64\n"
        "%3 = mean(%2) [] float64\n");
  // After backward() the graph is freed: only the root is left, marked.
  out.backward();
  CHECK(graph_text(out) == "%0 = mean() [] float64 freed\n");
  // A Variable with no graph is one constant.
  CHECK(graph_text(Variable(f64({1.0}, {1}))) == "%0 = const [1] float64\n");
  CHECK_THROWS_AS(graph_text(Variable()), Error);
}

TEST_CASE("graph_dot is a digraph with one node per entry and one edge per input use") {
  Generator gen(5);
  const Variable x(normal({4, 3}, 0.0, 1.0, gen));
  Variable w1(normal({3, 5}, 0.0, 1.0, gen), true), b1(zeros({5}), true), w2(normal({5, 2}, 0.0, 1.0, gen), true);
  const Tensor targets = from_vector(std::vector<std::int32_t>{0, 1, 1, 0}, {4});
  const Variable hidden = relu(matmul(x, w1) + b1);
  const Variable loss = cross_entropy(matmul(hidden, w2), targets);
  const GraphNames names{{"fc1.weight", w1}, {"fc1.bias", b1}, {"fc2.weight", w2}};
  // x, w1, matmul, b1, add, relu, w2, matmul, cross_entropy: 9 entries; 2 + 2 + 1 + 2 + 1 edges.
  const std::string text = graph_text(loss, names);
  CHECK(std::count(text.begin(), text.end(), '\n') == 9);
  const std::string dot = graph_dot(loss, names);
  const DotGraph g = parse_dot(dot);
  CHECK(g.nodes == 9);
  CHECK(g.edges == 8);
  CHECK(dot.find("n1 [label=\"fc1.weight\\n[3, 5] float32\"") != std::string::npos);
  CHECK(dot.find("n0 -> n2;") != std::string::npos);  // data flows from x into the first matmul
  // Quotes and backslashes in a name are escaped.
  const std::string odd = graph_dot(sum(w1), {{"a \"q\" \\ b", w1}});
  CHECK(odd.find(R"(label="a \"q\" \\ b\n[3, 5] float32")") != std::string::npos);
  CHECK(parse_dot(odd).nodes == 2);
}
