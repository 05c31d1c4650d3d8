// core/error.h — the one exception type moelab throws, and the check macro every op uses.
//
// Every public function checks its arguments (shapes, dtypes, devices, index ranges) and throws
// moelab::Error whose message starts with the op's name, e.g.
//   "moelab::matmul: inner dimensions differ: a [2, 3] @ b [4, 5]"
// so that a user sees which call went wrong and with what, never a segfault.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace moelab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Builds "moelab::<op>: <parts...>" from anything that has operator<<, and throws it.
template <class... Parts>
[[noreturn]] void fail(const char* op, Parts&&... parts) {
  std::ostringstream message;
  message << "moelab::" << op << ": ";
  (message << ... << std::forward<Parts>(parts));
  throw Error(message.str());
}

}  // namespace moelab

// MOELAB_CHECK(condition, "op", message parts...): throws moelab::Error when condition is false.
#define MOELAB_CHECK(condition, op, ...)                  \
  do {                                                    \
    if (!(condition)) ::moelab::fail(op, __VA_ARGS__);    \
  } while (0)
