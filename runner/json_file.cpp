// runner/json_file.cpp — see json_file.h.
#include "runner/json_file.h"

#include <fstream>
#include <iterator>
#include <system_error>

#include "core/error.h"
#include "core/json_guard.h"

namespace moelab {

nlohmann::ordered_json read_json_file(const std::filesystem::path& path, const std::string& what,
                                      const std::string& advice) {
  const std::string name = what + " '" + path.string() + "'";
  auto fail = [&](const std::string& why) { throw Error(name + " " + why + ": " + advice); };
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) fail("does not exist");
  if (std::filesystem::is_directory(st)) fail("is a folder, not a file");
  if (!std::filesystem::is_regular_file(st)) fail("is not a regular file (a FIFO, a device or a socket)");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) fail("cannot be sized (" + ec.message() + ")");
  if (size > kMaxJsonFileBytes)
    fail("holds " + std::to_string(size) + " bytes, more than any file moelab writes (" +
         std::to_string(kMaxJsonFileBytes) + ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot be opened");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) fail("cannot be read");
  try {
    check_json_depth(text, name);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + ": " + advice);
  }
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("cannot be read: it is not valid JSON (") + e.what() + ")");
  }
  return {};  // not reached
}

}  // namespace moelab
