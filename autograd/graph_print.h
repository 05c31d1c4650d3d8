// autograd/graph_print.h — the autograd graph behind a Variable, as text or as Graphviz dot.
//
// What backward() would walk from `root`: every graph Node (op outputs and leaves that require a
// gradient) plus every constant input (a Variable without a gradient: data, targets, masks). Each
// gets a number %i; every entry comes after its inputs (a topological order: the order in which
// the forward pass could have computed them), the root last. One line per entry:
//   %0 = const [4, 3] float32                    an input that needs no gradient (one entry per use)
//   %1 = leaf fc1.weight [5, 3] float32          a leaf that requires grad, with its name if given
//   %2 = matmul[b^T](%0, %1) [4, 5] float32      an op: its inputs, then its output's shape and dtype;
//                                                in brackets what else decides it (Node::detail:
//                                                the transposes of matmul and grouped_matmul)
// and, where they apply, the marks  retain_grad  hooks=N  freed  (freed: backward() already ran
// through this op and dropped its inputs; print before backward() to see the graph).
// A Variable used twice appears once, and its number twice among its users' inputs (x * x is
// mul(%0, %0)). Shapes are read from the Variables that refer to each Node, so printing reads no
// tensor data and costs no device transfer.
//
// graph_dot writes the same entries as a Graphviz digraph, one node per entry (ops as ellipses,
// leaves as filled boxes, constants as dashed boxes, labelled with the name, shape and dtype) and
// one edge per input use, from the input to its user (the direction data flows in the forward):
//   dot -Tsvg graph.dot -o graph.svg
//
// names: labels for leaves, e.g. a module's named_parameters(); a leaf not in it is just "leaf".
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace moelab {

using GraphNames = std::vector<std::pair<std::string, Variable>>;

std::string graph_text(const Variable& root, const GraphNames& names = {});
std::string graph_dot(const Variable& root, const GraphNames& names = {});

}  // namespace moelab
