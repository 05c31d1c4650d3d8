// tests/test_safetensors.cpp — the safetensors reader and writer (nn/io/safetensors.h): round
// trips of every dtype (0-d, empty and special float values included, compared bitwise), the
// metadata, the exact bytes on disk checked by hand, files written the way PyTorch writes them
// (I64, another order, no padding), atomic writes, and every kind of corrupt or truncated file
// giving a moelab::Error that names the file and the problem.
#include <doctest/doctest.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/factories.h"
#include "nn/io/safetensors.h"
#include "file_size_limit.h"
#include "temp_dir.h"

using namespace moelab;
using moelab::testing::read_bytes;
using moelab::testing::TempDir;
using moelab::testing::write_bytes;

namespace {

using Bytes = std::vector<unsigned char>;

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// A file from a header text and a data section, as another tool might write it.
Bytes make_file(const std::string& header, const Bytes& data) {
  Bytes out;
  out.reserve(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(static_cast<std::uint64_t>(header.size()) >> (8 * i)));
  for (char c : header) out.push_back(static_cast<unsigned char>(c));
  for (unsigned char c : data) out.push_back(c);
  return out;
}

template <class T>
void append(Bytes& out, T value) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &value, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

bool has(const std::string& message, const std::string& part) { return message.find(part) != std::string::npos; }

// Reading `path` must throw a moelab::Error that mentions the file and `problem`.
void check_rejected(const std::string& path, const std::string& problem) {
  CAPTURE(problem);
  try {
    (void)read_safetensors(path);
    FAIL("read_safetensors accepted a bad file, expected: ", problem);
  } catch (const Error& e) {
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(message.find("read_safetensors") != std::string::npos);
    CHECK(message.find(path) != std::string::npos);
    CHECK(message.find(problem) != std::string::npos);
  }
}

void check_rejected(const TempDir& dir, const Bytes& bytes, const std::string& problem) {
  const std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  check_rejected(path, problem);
}

}  // namespace

TEST_CASE("every dtype, a 0-d tensor and empty tensors round-trip bitwise, in order") {
  TempDir dir;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", from_vector(std::vector<float>{1.5f, -0.0f, nan, inf, -inf, 1e-45f}, {2, 3})},
      {"f64", from_vector(std::vector<double>{3.141592653589793, -1e300, 5e-324}, {3})},
      {"i32", from_vector(std::vector<std::int32_t>{0, -1, INT32_MAX, INT32_MIN, 42, 7}, {3, 1, 2})},
      {"scalar", from_vector(std::vector<float>{2.5f}, Shape{})},
      {"empty", Tensor::empty({0, 5}, DType::Float32)},
      {"empty_i32", Tensor::empty({0}, DType::Int32)},
      {"layers.0.attn.q.weight", full({4, 2}, 0.25, DType::Float64)},
      {"after.a.slice", arange(0, 12, 1, DType::Int32).reshape({4, 3}).slice(1, 2)},  // a view with an offset
  };
  const std::string path = dir.file("all.safetensors");
  write_safetensors(path, tensors, {});
  const SafetensorsFile file = read_safetensors(path);
  CHECK(file.path == path);
  CHECK(file.metadata.empty());
  REQUIRE(file.tensors.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    CAPTURE(tensors[i].first);
    CHECK(file.tensors[i].first == tensors[i].first);
    CHECK(file.tensors[i].second.device() == Device::cpu());
    CHECK(same_bytes(file.tensors[i].second, tensors[i].second));
  }
  CHECK(file.at("scalar").rank() == 0);
  CHECK(file.at("scalar").item<float>() == 2.5f);
  CHECK(file.at("after.a.slice").to_vector<std::int32_t>() == std::vector<std::int32_t>{3, 4, 5, 6, 7, 8});
  CHECK(file.contains("empty"));
  CHECK_FALSE(file.contains("nope"));
  CHECK_THROWS_AS((void)file.at("nope"), Error);
}

TEST_CASE("metadata round-trips, including characters JSON must escape") {
  TempDir dir;
  const std::map<std::string, std::string> metadata = {
      {"step", "123"}, {"empty", ""}, {"quote\"and\\slash", "line\nbreak\ttab"}, {"unicode", "héllo ✓"},
      {"config", R"({"d": 32, "heads": 4})"}};
  const std::string path = dir.file("meta.safetensors");
  write_safetensors(path, {{"x", ones({2})}}, metadata);
  CHECK(read_safetensors(path).metadata == metadata);
  // A file with no tensors at all is valid too.
  write_safetensors(path, {}, metadata);
  const auto file = read_safetensors(path);
  CHECK(file.tensors.empty());
  CHECK(file.metadata == metadata);
}

TEST_CASE("the bytes on disk are the documented layout") {
  TempDir dir;
  const std::string path = dir.file("layout.safetensors");
  write_safetensors(path,
                    {{"a", from_vector(std::vector<float>{1.0f, -2.0f}, {2})},
                     {"b", from_vector(std::vector<std::int32_t>{7}, Shape{})},
                     {"c", from_vector(std::vector<double>{0.5}, {1, 1})}},
                    {{"k", "v"}});
  const Bytes bytes = read_bytes(path);
  REQUIRE(bytes.size() >= 8);
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
  CHECK((8 + n) % 8 == 0);  // the data section starts 8-byte aligned
  REQUIRE(bytes.size() == 8 + n + 8 + 4 + 8);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  const std::string json =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I32","shape":[],"data_offsets":[8,12]},)"
      R"("c":{"dtype":"F64","shape":[1,1],"data_offsets":[12,20]},)"
      R"("__metadata__":{"k":"v"}})";
  CHECK(header.substr(0, json.size()) == json);
  CHECK(header.find_first_not_of(' ', json.size()) == std::string::npos);  // padding is spaces
  const Bytes data(bytes.begin() + 8 + static_cast<long>(n), bytes.end());
  const Bytes want = {0x00, 0x00, 0x80, 0x3f,  0x00, 0x00, 0x00, 0xc0,                     // 1.0f, -2.0f
                      0x07, 0x00, 0x00, 0x00,                                              // 7
                      0x00, 0x00, 0x00, 0x00,  0x00, 0x00, 0xe0, 0x3f};                    // 0.5
  CHECK(data == want);
}

TEST_CASE("files written by other tools: I64, any header order, no padding") {
  TempDir dir;
  // Like safetensors.torch.save_file({"ids": torch.tensor([[1, -2], [3, 2**31 - 1]]), "w": torch.ones(1)}):
  // header keys in another order than the data, I64 token ids, no __metadata__, no padding.
  Bytes data;
  append<float>(data, 1.0f);
  for (std::int64_t v : {1, -2, 3, 2147483647}) append<std::int64_t>(data, v);
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"ids":{"dtype":"I64","shape":[2,2],"data_offsets":[4,36]}})";
  const std::string path = dir.file("torch.safetensors");
  write_bytes(path, make_file(header, data));
  const SafetensorsFile file = read_safetensors(path);
  REQUIRE(file.tensors.size() == 2);
  CHECK(file.tensors[0].first == "w");
  CHECK(file.at("ids").dtype() == DType::Int32);
  CHECK(file.at("ids").shape() == Shape{2, 2});
  CHECK(file.at("ids").to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -2, 3, 2147483647});

  // Sorted by offset when the header lists them out of order.
  const std::string reversed =
      R"({"ids":{"dtype":"I64","shape":[2,2],"data_offsets":[4,36]},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  write_bytes(path, make_file(reversed, data));
  CHECK(read_safetensors(path).tensors[0].first == "w");

  // An I64 value that does not fit int32 is an error, not a silent wrap.
  Bytes big;
  append<std::int64_t>(big, std::int64_t{1} << 40);
  check_rejected(dir, make_file(R"({"t":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", big), "does not fit int32");
}

TEST_CASE("writes are atomic: no temporary file is left behind, and a failed write leaves nothing") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  write_safetensors(path, {{"x", ones({3})}});
  write_safetensors(path, {{"x", zeros({5})}});  // replaces the old file
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors"});
  CHECK(read_safetensors(path).at("x").shape() == Shape{5});

  CHECK_THROWS_AS(write_safetensors(dir.file("no/such/dir/x.safetensors"), {{"x", ones({1})}}), Error);
  CHECK_THROWS_AS(write_safetensors(path, {{"x", ones({1})}, {"x", ones({1})}}), Error);  // duplicate name
  CHECK_THROWS_AS(write_safetensors(path, {{"__metadata__", ones({1})}}), Error);
  CHECK_THROWS_AS(write_safetensors(path, {{"", ones({1})}}), Error);
  CHECK_THROWS_AS(write_safetensors(path, {{"undefined", Tensor()}}), Error);
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors"});
  CHECK(read_safetensors(path).at("x").shape() == Shape{5});  // untouched by the failed writes
}

TEST_CASE("a failed write (full disk, rename refused) throws naming the file and the OS reason, and keeps the old file") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  write_safetensors(path, {{"x", arange(0, 4)}}, {{"step", "1"}});
  const Bytes old_bytes = read_bytes(path);
  const auto old_file_intact = [&] {
    CHECK(read_bytes(path) == old_bytes);
    CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors"});  // the temporary file is gone
  };

  // A full disk, without root: a file size limit (tests/file_size_limit.h) makes the kernel refuse
  // the writes past 1000 bytes (EFBIG). Small and large tensors (the latter fail in the middle of
  // the data; the former only once the file is longer than the limit).
  for (const std::int64_t n : {std::int64_t{300}, std::int64_t{1} << 20}) {
    CAPTURE(n);
    try {
      testing::FileSizeLimit limit(1000);
      write_safetensors(path, {{"x", zeros({n})}});
      FAIL("write_safetensors reported success past the file size limit");
    } catch (const Error& e) {
      const std::string message = e.what();
      CAPTURE(message);
      CHECK(has(message, "write_safetensors: cannot write '" + temporary_path(path) + "'"));
      CHECK(has(message, "the temporary file for '" + path + "'"));
      CHECK(has(message, std::strerror(EFBIG)));
    }
    old_file_intact();
  }

  // A link at the temporary name (a leftover, or put there by someone) is removed and never
  // written through: the save succeeds and the link's target is untouched.
  const std::string victim = dir.file("victim.txt");
  { std::ofstream(victim) << "mine"; }
  std::filesystem::create_symlink(victim, temporary_path(path));
  write_safetensors(path, {{"x", arange(0, 4)}}, {{"step", "2"}});
  CHECK(read_bytes(victim) == std::vector<unsigned char>{'m', 'i', 'n', 'e'});
  CHECK(read_safetensors(path).metadata.at("step") == "2");
  std::filesystem::remove(victim);
  write_safetensors(path, {{"x", arange(0, 4)}}, {{"step", "1"}});
  CHECK(read_bytes(path) == old_bytes);

  // The rename refused: `path` is a non-empty directory (EISDIR).
  const std::string dir_path = dir.file("occupied");
  std::filesystem::create_directories(dir_path + "/inside");
  try {
    write_safetensors(dir_path, {{"x", ones({2})}});
    FAIL("write_safetensors renamed over a directory");
  } catch (const Error& e) {
    const std::string message = e.what();
    CAPTURE(message);
    CHECK(has(message, "cannot rename '" + temporary_path(dir_path) + "'"));
    CHECK(has(message, std::strerror(EISDIR)));
  }
  CHECK(std::filesystem::is_directory(dir_path + "/inside"));
  std::filesystem::remove_all(dir_path);
  old_file_intact();
}

TEST_CASE("a file truncated anywhere is rejected with a clear error") {
  TempDir dir;
  const std::string good = dir.file("good.safetensors");
  write_safetensors(good, {{"a", ones({3, 2})}, {"b", arange(0, 5)}}, {{"step", "9"}});
  const Bytes bytes = read_bytes(good);
  // Every possible truncation throws (none crashes or reads past the end).
  for (std::size_t keep = 0; keep < bytes.size(); ++keep) {
    CAPTURE(keep);
    const std::string path = dir.file("cut.safetensors");
    write_bytes(path, Bytes(bytes.begin(), bytes.begin() + static_cast<long>(keep)));
    CHECK_THROWS_AS((void)read_safetensors(path), Error);
  }
  // And each kind of truncation says what is wrong.
  check_rejected(dir, Bytes(bytes.begin(), bytes.begin() + 5), "shorter than the 8-byte header length");
  check_rejected(dir, Bytes(bytes.begin(), bytes.begin() + 8), "larger than the rest of the file");
  check_rejected(dir, Bytes(bytes.begin(), bytes.begin() + 30), "larger than the rest of the file");
  check_rejected(dir, Bytes(bytes.begin(), bytes.end() - 1), "out of bounds");
  check_rejected(dir, Bytes(bytes.begin(), bytes.end() - 20), "out of bounds");
  Bytes longer = bytes;
  longer.push_back(0);
  check_rejected(dir, longer, "1 trailing bytes");
  check_rejected(dir.file("missing.safetensors"), "is not a readable file");
}

TEST_CASE("corrupt headers are rejected, each with its own message") {
  TempDir dir;
  const Bytes eight(8, 0);
  auto file = [&](const std::string& header, const Bytes& data) { return make_file(header, data); };

  Bytes huge = file("{}", {});
  for (int i = 0; i < 8; ++i) huge[i] = 0xff;  // a header length of 2^64 - 1
  check_rejected(dir, huge, "header length 18446744073709551615 is larger than the rest of the file");
  huge[7] = 0x00;
  check_rejected(dir, huge, "is larger than the rest of the file");

  check_rejected(dir, file("{not json at all", {}), "not valid JSON");
  check_rejected(dir, file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})", eight), "not valid JSON");
  check_rejected(dir, file("[1, 2]", {}), "must be a JSON object");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,8]}})", eight), "not valid JSON");
  check_rejected(dir, file(R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", eight), "unknown dtype 'F16'");
  check_rejected(dir, file(R"({"a":{"dtype":"float32","shape":[2],"data_offsets":[0,8]}})", eight),
                 "unknown dtype 'float32'");
  check_rejected(dir, file(R"({"a":{"dtype":3,"shape":[2],"data_offsets":[0,8]}})", eight), "dtype must be a string");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
                 "needs 12 bytes but data_offsets [0, 8] hold 8");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", eight),
                 "out of bounds");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[1000,1008]}})", eight), "out of bounds");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight), "end before they begin");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,-8]}})", eight),
                 "data_offsets must hold non-negative integers");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", eight), "must be [begin, end]");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
                 "shape must hold non-negative integers");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight),
                 "overflows 64 bits");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
                 "overlap");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight), "belong to no tensor");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight), "4 trailing bytes");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
                 "the key 'a' twice");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", Bytes(4, 0)),
                 "the key 'dtype' twice");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[2]}})", eight), "missing field 'data_offsets'");
  check_rejected(dir, file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", eight),
                 "unexpected field 'x'");
  check_rejected(dir, file(R"({"a":[0,8]})", eight), "expected an object");
  check_rejected(dir, file(R"({"__metadata__":{"step":9}})", {}), "__metadata__ 'step' must be a string");
  check_rejected(dir, file(R"({"__metadata__":[]})", {}), "__metadata__ must be an object");
  check_rejected(dir, file("{\"\xff\":1}", {}), "not valid JSON");  // not UTF-8

  // Nested 100,000 deep (200 KB): a stack overflow in the DOM before; refused before parsing now.
  check_rejected(dir, file("{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}", {}),
                 "nested deeper than 32 levels");
  check_rejected(dir, file("{\"__metadata__\": {\"x\": " + std::string(50, '{') + std::string(50, '}') + "}}", {}),
                 "nested deeper than");
  // Brackets inside strings are text, not nesting.
  check_rejected(dir, file("{\"__metadata__\": {\"x\": \"" + std::string(1000, '[') + "\\\"\"}, \"a\": 1}", {}),
                 "expected an object");
  // A huge value is described by its size, not printed: 5,000,000 elements gave a 10 MB message.
  std::string values;
  for (int i = 0; i < 5000000; ++i) values += i ? ",-1" : "-1";
  try {
    write_bytes(dir.file("huge.safetensors"),
                file("{\"a\":{\"dtype\":\"F32\",\"shape\":[" + values + "],\"data_offsets\":[0,8]}}", eight));
    (void)read_safetensors(dir.file("huge.safetensors"));
    FAIL("a shape of 5,000,000 negative sizes was accepted");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(has(message, "an array of 5000000 elements"));
    CHECK(message.size() < 1000);
  }
}
