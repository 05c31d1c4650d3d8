// autograd/graph_print.cpp — listing the graph behind a Variable (see graph_print.h).
//
// One walk builds the entries, then two writers format them. The walk is the engine's iterative
// depth-first search (autograd/engine.cpp) with the same post-order: an explicit stack of frames
// (node, next input), so a deep graph cannot overflow the call stack. A frame collects the
// numbers of its inputs as it goes; a finished child appends its number to its parent's frame
// (the parent is the frame below it, waiting on exactly that input).
#include "autograd/graph_print.h"

#include <sstream>
#include <unordered_map>
#include <utility>

#include "autograd/node.h"

namespace moelab {
namespace {

enum class Kind { Op, Leaf, Const };

struct Entry {
  Kind kind = Kind::Op;
  std::string name;         // the op ("matmul"), the leaf's label, or "const"
  Shape shape;
  DType dtype = DType::Float32;
  std::vector<int> inputs;  // entry numbers, one per input use
  bool retains_grad = false;
  std::size_t hooks = 0;
  bool freed = false;
};

Entry make_entry(Kind kind, std::string name, const Shape& shape, DType dtype) {
  Entry e;
  e.kind = kind;
  e.name = std::move(name);
  e.shape = shape;
  e.dtype = dtype;
  return e;
}

Entry const_entry(const Variable& v) { return make_entry(Kind::Const, "const", v.shape(), v.dtype()); }

std::vector<Entry> walk(const Variable& root, const GraphNames& names) {
  check_defined(root.data(), "graph_text", "the root Variable");
  std::unordered_map<const Node*, std::string> leaf_names;
  for (const auto& [name, v] : names)
    if (v.node() && v.node()->is_leaf) leaf_names.emplace(v.node().get(), name);

  std::vector<Entry> entries;
  if (!root.node()) {
    entries.push_back(const_entry(root));
    return entries;
  }
  struct Frame {
    const Node* node;
    Shape shape;
    DType dtype;
    std::size_t next_input = 0;
    std::vector<int> inputs{};
  };
  std::unordered_map<const Node*, int> number;
  std::vector<Frame> stack{{root.node().get(), root.shape(), root.dtype()}};
  while (!stack.empty()) {
    Frame& top = stack.back();
    if (top.next_input < top.node->inputs.size()) {
      const Variable& input = top.node->inputs[top.next_input++];
      if (!input.node()) {
        entries.push_back(const_entry(input));
        top.inputs.push_back(static_cast<int>(entries.size()) - 1);
      } else if (const auto found = number.find(input.node().get()); found != number.end()) {
        top.inputs.push_back(found->second);
      } else {
        // Not numbered yet, so not on the stack either (a node on the stack is an ancestor of
        // top, and a DAG has no path back to it): visit it. `top` is invalid from here.
        stack.push_back({input.node().get(), input.shape(), input.dtype()});
      }
      continue;
    }
    const Node& node = *top.node;
    Entry e = make_entry(node.is_leaf ? Kind::Leaf : Kind::Op,
                         node.detail.empty() ? node.name : node.name + "[" + node.detail + "]", top.shape, top.dtype);
    e.inputs = std::move(top.inputs);
    if (node.is_leaf) {
      const auto named = leaf_names.find(&node);
      e.name = named != leaf_names.end() ? named->second : "leaf";
    }
    e.retains_grad = node.retains_grad;
    e.hooks = node.hooks.size();
    e.freed = node.released;
    const int id = static_cast<int>(entries.size());
    entries.push_back(std::move(e));
    number.emplace(&node, id);
    stack.pop_back();
    if (!stack.empty()) stack.back().inputs.push_back(id);
  }
  return entries;
}

std::string marks(const Entry& e) {
  std::string out;
  if (e.retains_grad) out += " retain_grad";
  if (e.hooks > 0) out += " hooks=" + std::to_string(e.hooks);
  if (e.freed) out += " freed";
  return out;
}

// A dot string literal's content: backslashes and quotes escaped.
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string graph_text(const Variable& root, const GraphNames& names) {
  const std::vector<Entry> entries = walk(root, names);
  std::ostringstream out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    out << '%' << i << " = ";
    switch (e.kind) {
      case Kind::Const: out << "const"; break;
      case Kind::Leaf: out << (e.name == "leaf" ? "leaf" : "leaf " + e.name); break;
      case Kind::Op:
        out << e.name << '(';
        for (std::size_t k = 0; k < e.inputs.size(); ++k) out << (k ? ", %" : "%") << e.inputs[k];
        out << ')';
        break;
    }
    out << ' ' << e.shape << ' ' << e.dtype << marks(e) << '\n';
  }
  return out.str();
}

std::string graph_dot(const Variable& root, const GraphNames& names) {
  const std::vector<Entry> entries = walk(root, names);
  std::ostringstream out;
  out << "digraph autograd {\n  node [fontname=\"monospace\"];\n";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    // Two lines: the name, then shape, dtype and marks ("\\n" is dot's line break).
    out << "  n" << i << " [label=\"" << dot_escape(e.name) << "\\n" << e.shape << ' ' << e.dtype << marks(e) << "\", ";
    switch (e.kind) {
      case Kind::Op: out << "shape=ellipse"; break;
      case Kind::Leaf: out << "shape=box, style=filled, fillcolor=lightblue"; break;
      case Kind::Const: out << "shape=box, style=dashed"; break;
    }
    out << "];\n";
  }
  for (std::size_t i = 0; i < entries.size(); ++i)
    for (int input : entries[i].inputs) out << "  n" << input << " -> n" << i << ";\n";
  out << "}\n";
  return out.str();
}

}  // namespace moelab
