// core/json_guard.h — reading JSON that someone else wrote: a depth bound checked on the text
// before any DOM is built, and descriptions of values that stay short whatever the value is.
//
// nlohmann::json parses without recursion, but copying, comparing, printing and destroying a value
// recurse once per nesting level: a 200 KB file of 100,000 nested '[' crashed moelab's checkpoint
// loader and its config.json reader with a stack overflow. moelab's own files are at most 3 levels
// deep, so every reader first calls check_json_depth on the raw text (one pass over the bytes,
// strings and escapes skipped) and refuses anything deeper than kMaxJsonDepth with an Error naming
// the file. Error messages then describe an unexpected value with json_summary: its type and a
// bounded prefix ("an array of 5000000 elements: [1,2,3,...]"), never the whole value (a
// 5,000,000-element array once made a 10 MB message).
//
//   check_json_depth(text, "'" + path + "'");          // throws moelab::Error when too deep
//   const auto j = nlohmann::ordered_json::parse(text);
//   MOELAB_CHECK(j.is_object(), "load", "expected an object, got ", json_summary(j));
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/error.h"

namespace moelab {

// Deeper than any file moelab writes (3 levels), shallow enough for any stack.
constexpr int kMaxJsonDepth = 32;

// The deepest nesting of '[' and '{' in `text`, outside strings; stops counting (and returns a
// value above max_depth) as soon as max_depth is exceeded, so a huge input costs one partial pass.
inline int json_nesting_depth(std::string_view text, int max_depth = kMaxJsonDepth) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > max_depth) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// Throws moelab::Error("<what>: JSON nested deeper than N levels ...") when text is too deep.
inline void check_json_depth(std::string_view text, const std::string& what, int max_depth = kMaxJsonDepth) {
  if (json_nesting_depth(text, max_depth) > max_depth)
    throw Error(what + ": JSON nested deeper than " + std::to_string(max_depth) +
                " levels (moelab's files are at most 3 deep): refused before parsing, as a damaged or hostile file");
}

// A short description of a JSON value for an error message: scalars as JSON text (strings cut at
// max_chars), arrays and objects by their size ("an array of 5000000 elements"), with their text
// when they hold at most 8 numbers, booleans or nulls. Never longer than about 2 * max_chars.
template <class Json>
std::string json_summary(const Json& v, std::size_t max_chars = 60) {
  auto cut = [&](std::string s) {
    if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
    return s;
  };
  if (v.is_array() || v.is_object()) {
    std::string text = std::string(v.is_array() ? "an array of " : "an object with ") + std::to_string(v.size()) +
                       (v.is_array() ? " elements" : " keys");
    // Printed only when small and flat: at most 8 numbers, booleans or nulls (a bounded dump).
    bool flat = v.size() <= 8;
    for (auto it = v.begin(); flat && it != v.end(); ++it) flat = it->is_number() || it->is_boolean() || it->is_null();
    if (flat) text += ": " + cut(v.dump());
    return text;
  }
  if (v.is_string()) return "\"" + cut(v.template get<std::string>()) + "\"";
  return cut(v.dump());
}

}  // namespace moelab
