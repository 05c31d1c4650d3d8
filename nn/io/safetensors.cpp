// nn/io/safetensors.cpp — the safetensors writer (atomic: temp file, fsync, rename) and the
// validating reader. The format and the guarantees are described in nn/io/safetensors.h.
#include "nn/io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/safe_file.h"
#include "core/json_guard.h"

namespace moelab {

// The data section is copied byte for byte into and out of tensors, which is right only on a
// little-endian host (x86-64 and ARM64 Linux, the machines moelab targets).
static_assert(std::endian::native == std::endian::little, "moelab's safetensors I/O assumes a little-endian host");

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // safetensors' own limit (100 MB)

// ---------------------------------------------------------------- dtypes

struct FileDType {
  const char* name;
  std::size_t bytes;  // per element, in the file
  DType dtype;        // what moelab holds it as
};

constexpr FileDType kFileDTypes[] = {
    {"F32", 4, DType::Float32},
    {"F64", 8, DType::Float64},
    {"I32", 4, DType::Int32},
    {"BF16", 2, DType::BFloat16},  // the same 16 bits (bfloat16 has no other encoding)
    {"I64", 8, DType::Int32},  // narrowed on reading (moelab has no int64)
};

const FileDType* find_file_dtype(const std::string& name) {
  for (const auto& d : kFileDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

// ---------------------------------------------------------------- writing

// A failed step of writing `path` through `tmp`, with the OS's reason (errno), e.g.
//   "moelab::write_safetensors: cannot write 'run/ckpt.safetensors.tmp' (the temporary file for
//    'run/ckpt.safetensors', which is left as it was): No space left on device"
[[noreturn]] void fail_errno(const std::string& what, const std::string& tmp, const std::string& path) {
  const std::string reason = std::strerror(errno);
  fail("write_safetensors", what, " '", tmp, "' (the temporary file for '", path, "', which is left as it was): ", reason);
}

// Removes the temporary file after a failure, keeping the failure's errno for its message.
void remove_temporary(const std::string& tmp) {
  const int saved = errno;
  ::unlink(tmp.c_str());
  errno = saved;
}

void write_all(int fd, const void* data, std::size_t bytes, const std::string& tmp, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;  // write(2) returns 0 for a non-empty buffer only on odd devices
    if (n <= 0) fail_errno("cannot write", tmp, path);
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

// Makes the rename itself durable: fsync the directory that holds the file. Best effort (some
// file systems refuse to open or sync a directory); the file's own data was synced already.
void sync_directory_of(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string build_header(const std::vector<std::pair<std::string, Tensor>>& host,
                         const std::map<std::string, std::string>& metadata) {
  ordered_json header = ordered_json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : host) {
    ordered_json entry = ordered_json::object();
    entry["dtype"] = safetensors_dtype_name(t.dtype());
    entry["shape"] = t.shape().sizes();
    entry["data_offsets"] = {offset, offset + t.nbytes()};
    header[name] = std::move(entry);
    offset += t.nbytes();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // e.g. a name that is not valid UTF-8
    fail("write_safetensors", "cannot encode the header: ", e.what());
  }
  // Pad with spaces so that the data section starts on an 8-byte boundary, as safetensors does.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// ---------------------------------------------------------------- reading

// Everything a header entry promises, before it is checked against the others.
struct Entry {
  std::string name;
  const FileDType* dtype;
  Shape shape;
  std::uint64_t begin, end;
};

// Parses the header text, rejecting duplicate names (a JSON library would silently keep one).
ordered_json parse_header(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> keys;  // the keys seen in each open object
  std::string duplicate;
  auto watch = [&](int, ordered_json::parse_event_t event, ordered_json& parsed) {
    if (event == ordered_json::parse_event_t::object_start) keys.emplace_back();
    if (event == ordered_json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == ordered_json::parse_event_t::key && !keys.empty() && duplicate.empty() &&
        !keys.back().insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  check_json_depth(text, "read_safetensors: '" + path + "': the header");  // before any DOM (core/json_guard.h)
  ordered_json header;
  try {
    header = ordered_json::parse(text, watch);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
    fail("read_safetensors", "'", path, "': the header is not valid JSON (", e.what(), ")");
  }
  MOELAB_CHECK(duplicate.empty(), "read_safetensors", "'", path, "': the header has the key '", duplicate,
               "' twice in one object (a repeated tensor name or field)");
  MOELAB_CHECK(header.is_object(), "read_safetensors", "'", path, "': the header must be a JSON object, got ",
               header.type_name());
  return header;
}

std::uint64_t get_offset(const ordered_json& v, const std::string& path, const std::string& name) {
  MOELAB_CHECK(v.is_number_unsigned() && v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX),
               "read_safetensors", "'", path, "': tensor '", name,
               "': data_offsets must hold non-negative integers, got ", json_summary(v));
  return v.get<std::uint64_t>();
}

Entry parse_entry(const std::string& name, const ordered_json& v, std::uint64_t data_bytes, const std::string& path) {
  const char* op = "read_safetensors";
  MOELAB_CHECK(!name.empty(), op, "'", path, "': a tensor has an empty name");
  MOELAB_CHECK(v.is_object(), op, "'", path, "': tensor '", name, "': expected an object, got ", json_summary(v));
  for (const auto& [key, value] : v.items())
    MOELAB_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", op, "'", path, "': tensor '", name,
                 "': unexpected field '", key, "'");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    MOELAB_CHECK(v.contains(key), op, "'", path, "': tensor '", name, "': missing field '", key, "'");

  Entry e{name, nullptr, {}, 0, 0};
  const auto& dtype = v["dtype"];
  MOELAB_CHECK(dtype.is_string(), op, "'", path, "': tensor '", name, "': dtype must be a string, got ", json_summary(dtype));
  e.dtype = find_file_dtype(dtype.get<std::string>());
  MOELAB_CHECK(e.dtype != nullptr, op, "'", path, "': tensor '", name, "': unknown dtype '", dtype.get<std::string>(),
               "' (moelab reads F32, F64, BF16, I32 and I64)");

  const auto& shape = v["shape"];
  MOELAB_CHECK(shape.is_array(), op, "'", path, "': tensor '", name, "': shape must be an array, got ", json_summary(shape));
  std::vector<std::int64_t> sizes;
  std::uint64_t bytes = e.dtype->bytes;  // numel * element size, checked against overflow
  bool overflow = false;
  for (const auto& s : shape) {
    MOELAB_CHECK(s.is_number_unsigned() && s.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX), op, "'",
                 path, "': tensor '", name, "': shape must hold non-negative integers, got ", json_summary(shape));
    sizes.push_back(s.get<std::int64_t>());
    overflow = overflow || __builtin_mul_overflow(bytes, s.get<std::uint64_t>(), &bytes);
  }
  e.shape = Shape(std::move(sizes));

  const auto& offsets = v["data_offsets"];
  MOELAB_CHECK(offsets.is_array() && offsets.size() == 2, op, "'", path, "': tensor '", name,
               "': data_offsets must be [begin, end], got ", json_summary(offsets));
  e.begin = get_offset(offsets[0], path, name);
  e.end = get_offset(offsets[1], path, name);
  MOELAB_CHECK(e.begin <= e.end, op, "'", path, "': tensor '", name, "': data_offsets [", e.begin, ", ", e.end,
               "] end before they begin");
  MOELAB_CHECK(!overflow, op, "'", path, "': tensor '", name, "': shape ", e.shape,
               " is too large (its byte count overflows 64 bits)");
  MOELAB_CHECK(e.end - e.begin == bytes, op, "'", path, "': tensor '", name, "': shape ", e.shape, " of ",
               e.dtype->name, " needs ", bytes, " bytes but data_offsets [", e.begin, ", ", e.end, "] hold ",
               e.end - e.begin);
  MOELAB_CHECK(e.end <= data_bytes, op, "'", path, "': tensor '", name, "': data_offsets [", e.begin, ", ", e.end,
               "] are out of bounds: the data section has ", data_bytes, " bytes");
  return e;
}

std::map<std::string, std::string> parse_metadata(const ordered_json& v, const std::string& path) {
  MOELAB_CHECK(v.is_object(), "read_safetensors", "'", path, "': __metadata__ must be an object of strings, got ",
               json_summary(v));
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    MOELAB_CHECK(value.is_string(), "read_safetensors", "'", path, "': __metadata__ '", key,
                 "' must be a string, got ", json_summary(value));
    out[key] = value.get<std::string>();
  }
  return out;
}

// Sorted by position, the tensors must tile [0, data_bytes) exactly: no overlap, no gap.
void check_tiling(std::vector<Entry>& entries, std::uint64_t data_bytes, const std::string& path) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t at = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    MOELAB_CHECK(e.begin >= at, "read_safetensors", "'", path, "': tensors '", previous ? previous->name : "",
                 "' [", previous ? previous->begin : 0, ", ", at, ") and '", e.name, "' [", e.begin, ", ", e.end,
                 ") overlap");
    MOELAB_CHECK(e.begin == at, "read_safetensors", "'", path, "': bytes [", at, ", ", e.begin,
                 ") of the data section belong to no tensor (before '", e.name, "')");
    at = e.end;
    previous = &e;
  }
  MOELAB_CHECK(at == data_bytes, "read_safetensors", "'", path, "': the data section has ", data_bytes,
               " bytes but the tensors end at byte ", at, " (", data_bytes - at, " trailing bytes)");
}

void read_exactly(std::ifstream& in, void* dst, std::uint64_t bytes, const std::string& path, const std::string& what) {
  if (bytes == 0) return;
  in.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes));
  MOELAB_CHECK(in && static_cast<std::uint64_t>(in.gcount()) == bytes, "read_safetensors", "'", path,
               "': the file ended while reading ", what);
}

Tensor read_tensor(std::ifstream& in, const Entry& e, const std::string& path) {
  Tensor t = Tensor::empty(e.shape, e.dtype->dtype);
  if (std::string(e.dtype->name) != "I64") {
    read_exactly(in, t.raw(), e.end - e.begin, path, "tensor '" + e.name + "'");
    return t;
  }
  std::vector<std::int64_t> wide(static_cast<std::size_t>(t.numel()));
  read_exactly(in, wide.data(), e.end - e.begin, path, "tensor '" + e.name + "'");
  std::int32_t* out = t.data<std::int32_t>();
  for (std::size_t i = 0; i < wide.size(); ++i) {
    MOELAB_CHECK(wide[i] >= INT32_MIN && wide[i] <= INT32_MAX, "read_safetensors", "'", path, "': I64 tensor '",
                 e.name, "' element ", i, " = ", wide[i], " does not fit int32 (moelab reads I64 as int32)");
    out[i] = static_cast<std::int32_t>(wide[i]);
  }
  return t;
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int32: return "I32";
    case DType::BFloat16: return "BF16";
  }
  fail("safetensors_dtype_name", "no safetensors name for dtype ", static_cast<int>(dtype));
}

bool SafetensorsFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& nt) { return nt.first == name; });
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  fail("SafetensorsFile::at", "'", path, "' has no tensor named '", name, "'");
}

// "<path>.partial.<host>.<pid>" (core/safe_file.h): unique per process and per machine sharing
// the folder.
std::string temporary_path(const std::string& path) { return temporary_name(path); }

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  std::vector<std::pair<std::string, Tensor>> host;
  for (const auto& [name, t] : tensors) {
    MOELAB_CHECK(!name.empty() && name != "__metadata__", "write_safetensors", "'", path, "': invalid tensor name '",
                 name, "'");
    MOELAB_CHECK(seen.insert(name).second, "write_safetensors", "'", path, "': the name '", name, "' is given twice");
    check_defined(t, "write_safetensors", ("tensor '" + name + "'").c_str());
    host.emplace_back(name, t.to(Device::cpu()));
  }
  std::string header = build_header(host, metadata);

  // Every step is checked; on any failure the temporary file is removed and `path` keeps
  // whatever it held before (a full disk fails in write or, on some file systems, only in fsync
  // or close, which is why both are checked too).
  // One temporary name per process: two processes saving the same path at once each write their
  // own file, and the last rename wins whole (one shared "<path>.tmp" made 237 of 600 concurrent
  // saves fail).
  const std::string tmp = temporary_path(path);
  // Created new (never an existing file, never through a link); the rename then replaces whatever
  // is at `path`, a link included, without touching a link's target.
  const int fd = create_new_file(tmp);
  if (fd < 0) fail_errno("cannot create", tmp, path);
  try {
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
    write_all(fd, length, 8, tmp, path);
    write_all(fd, header.data(), header.size(), tmp, path);
    for (const auto& [name, t] : host) write_all(fd, t.raw(), t.nbytes(), tmp, path);
    if (::fsync(fd) != 0) fail_errno("cannot flush", tmp, path);
  } catch (...) {
    remove_temporary(tmp);
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) {
    remove_temporary(tmp);
    fail_errno("cannot close", tmp, path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    remove_temporary(tmp);
    fail_errno("cannot rename", tmp, path);
  }
  sync_directory_of(path);
}

SafetensorsFile read_safetensors(const std::string& path) {
  const char* op = "read_safetensors";
  std::error_code ec;
  MOELAB_CHECK(std::filesystem::is_regular_file(path, ec), op, "'", path, "' is not a readable file");
  const std::uint64_t file_bytes = std::filesystem::file_size(path, ec);
  MOELAB_CHECK(!ec, op, "cannot get the size of '", path, "': ", ec.message());
  std::ifstream in(path, std::ios::binary);
  MOELAB_CHECK(in.is_open(), op, "cannot open '", path, "': ", std::strerror(errno));

  MOELAB_CHECK(file_bytes >= 8, op, "'", path, "' is ", file_bytes,
               " bytes long, shorter than the 8-byte header length (truncated?)");
  unsigned char length[8];
  read_exactly(in, length, 8, path, "the header length");
  std::uint64_t header_bytes = 0;
  for (int i = 0; i < 8; ++i) header_bytes |= static_cast<std::uint64_t>(length[i]) << (8 * i);
  MOELAB_CHECK(header_bytes <= file_bytes - 8, op, "'", path, "': the header length ", header_bytes,
               " is larger than the rest of the file (", file_bytes - 8, " bytes; truncated or not safetensors?)");
  MOELAB_CHECK(header_bytes <= kMaxHeaderBytes, op, "'", path, "': the header length ", header_bytes,
               " exceeds the safetensors limit of ", kMaxHeaderBytes, " bytes");

  std::string text(header_bytes, '\0');
  read_exactly(in, text.data(), header_bytes, path, "the header");
  const ordered_json header = parse_header(text, path);

  const std::uint64_t data_bytes = file_bytes - 8 - header_bytes;
  SafetensorsFile file;
  file.path = path;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") file.metadata = parse_metadata(value, path);
    else entries.push_back(parse_entry(name, value, data_bytes, path));
  }
  check_tiling(entries, data_bytes, path);
  for (const Entry& e : entries) file.tensors.emplace_back(e.name, read_tensor(in, e, path));
  return file;
}

}  // namespace moelab
