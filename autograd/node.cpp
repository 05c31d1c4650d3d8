// autograd/node.cpp — iterative destruction of a graph's nodes (see node.h).
//
// When a Node dies it owns references to its inputs' Nodes. If it is the last owner of one, that
// input would die inside this destructor, and its inputs inside that one, and so on: one stack
// frame per link. Instead we move every input Node pointer onto a local vector; for each pointer
// that we alone own we first move *its* inputs onto the vector, so that when the pointer is
// dropped the Node it frees has no inputs left to recurse into. Nodes still shared elsewhere
// (another Variable, another branch of the graph) are simply released, not emptied.
#include "autograd/node.h"

#include <utility>

namespace moelab {

Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending;
  auto take_inputs = [&pending](std::vector<Variable>& list) {
    for (Variable& input : list)
      if (input.node_) pending.push_back(std::move(input.node_));
    list.clear();
  };
  take_inputs(inputs);
  while (!pending.empty()) {
    std::shared_ptr<Node> node = std::move(pending.back());
    pending.pop_back();
    if (node.use_count() == 1) {
      take_inputs(node->inputs);
      node->grad_fn = nullptr;  // a grad_fn holds only Tensors, but drop it here all the same
    }
    // `node` goes out of scope here; if it was the last owner, the Node it frees is already empty.
  }
}

}  // namespace moelab
