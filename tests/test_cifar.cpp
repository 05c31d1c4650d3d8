// tests/test_cifar.cpp — the CIFAR-10/100 binary reader (tasks/softmoe_vit/cifar.h) on small files
// this test writes byte by byte in the published format (no CIFAR file is reachable here): the
// layout (label bytes, then red, green, blue planes, each row-major), both CIFAR-100 labels, the
// standard file names and folders, and the refusals, each naming the file.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "tasks/softmoe_vit/cifar.h"
#include "temp_dir.h"
#include "test_util.h"

using namespace moelab;

using moelab::testing::error_of;

namespace {

// A record written by hand: label byte(s), then pixel (ch, r, c) = (ch * 7 + r * 3 + c + seed) % 256.
std::vector<std::uint8_t> record(std::vector<std::uint8_t> labels, int seed) {
  std::vector<std::uint8_t> bytes = std::move(labels);
  for (int ch = 0; ch < 3; ++ch)
    for (int r = 0; r < 32; ++r)
      for (int c = 0; c < 32; ++c) bytes.push_back(static_cast<std::uint8_t>((ch * 7 + r * 3 + c + seed) % 256));
  return bytes;
}

void write_bytes(const std::filesystem::path& p, const std::vector<std::vector<std::uint8_t>>& records) {
  std::ofstream out(p, std::ios::binary);
  for (const auto& r : records) out.write(reinterpret_cast<const char*>(r.data()), static_cast<std::streamsize>(r.size()));
}

}  // namespace

TEST_CASE("cifar10: records of a label byte and three 32x32 planes, read in place") {
  testing::TempDir tmp;
  const auto file = tmp.path() / "data_batch_1.bin";
  write_bytes(file, {record({7}, 0), record({2}, 5)});
  const ImageDataset d = read_cifar_file(file.string(), "cifar10", false, "t");
  CHECK(d.size() == 2);
  CHECK(d.channels == 3);
  CHECK(d.rows == 32);
  CHECK(d.cols == 32);
  CHECK(d.classes == 10);
  CHECK(d.pixels() == 3072);
  CHECK(d.labels == std::vector<std::uint8_t>{7, 2});
  // Image 1, green (channel 1), row 2, column 5: byte 3072 + 1024 + 2 * 32 + 5.
  CHECK(d.images[3072 + 1024 + 2 * 32 + 5] == (1 * 7 + 2 * 3 + 5 + 5) % 256);
  CHECK(d.images[0] == 0);
  CHECK(d.images[3071] == (2 * 7 + 31 * 3 + 31) % 256);  // image 0, blue, the bottom-right pixel
  // The writer gives the same bytes back.
  const auto copy = tmp.path() / "copy.bin";
  write_cifar_file(copy.string(), "cifar10", d);
  CHECK(std::filesystem::file_size(copy) == 2 * 3073);
  CHECK(read_cifar_file(copy.string(), "cifar10", false, "t").images == d.images);
}

TEST_CASE("cifar100: a coarse and a fine label byte; fine by default, coarse on request") {
  testing::TempDir tmp;
  const auto file = tmp.path() / "train.bin";
  write_bytes(file, {record({3, 42}, 1), record({19, 99}, 2), record({0, 0}, 3)});
  const ImageDataset fine = read_cifar_file(file.string(), "cifar100", false, "t");
  CHECK(fine.classes == 100);
  CHECK(fine.labels == std::vector<std::uint8_t>{42, 99, 0});
  const ImageDataset coarse = read_cifar_file(file.string(), "cifar100", true, "t");
  CHECK(coarse.classes == 20);
  CHECK(coarse.labels == std::vector<std::uint8_t>{3, 19, 0});
  CHECK(coarse.images == fine.images);
  CHECK(fine.images[2 * 3072] == (0 + 3) % 256);  // the label bytes are not pixels
  const auto copy = tmp.path() / "copy.bin";
  write_cifar_file(copy.string(), "cifar100", fine, coarse.labels);
  CHECK(read_cifar_file(copy.string(), "cifar100", true, "t").labels == coarse.labels);
}

TEST_CASE("cifar: refusals name the file and what is wrong, before anything is allocated") {
  testing::TempDir tmp;
  const auto file = tmp.path() / "test_batch.bin";
  const std::string path = file.string();
  CHECK(error_of([&] { read_cifar_file(path, "cifar10", false, "t"); }).find("no such file") != std::string::npos);
  write_bytes(file, {});
  CHECK(error_of([&] { read_cifar_file(path, "cifar10", false, "t"); }).find("empty file") != std::string::npos);
  // A CIFAR-10 file read as CIFAR-100: 3073 bytes is no whole number of 3074-byte records.
  write_bytes(file, {record({1}, 0)});
  const std::string wrong = error_of([&] { read_cifar_file(path, "cifar100", false, "t"); });
  CHECK(wrong.find(path) != std::string::npos);
  CHECK(wrong.find("size 3073 is not a whole number of 3074-byte CIFAR-100 records") != std::string::npos);
  // Cut short by one byte.
  std::filesystem::resize_file(file, 3072);
  CHECK(error_of([&] { read_cifar_file(path, "cifar10", false, "t"); }).find("truncated") != std::string::npos);
  // A label out of range.
  write_bytes(file, {record({10}, 0)});
  CHECK(error_of([&] { read_cifar_file(path, "cifar10", false, "t"); }).find("label 10, outside 0..9") !=
        std::string::npos);
  write_bytes(file, {record({25, 3}, 0)});
  CHECK(error_of([&] { read_cifar_file(path, "cifar100", false, "t"); }).find("coarse label 25") != std::string::npos);
  CHECK(error_of([&] { read_cifar_file(path, "cifar100", true, "t"); }).find("label 25, outside 0..19") !=
        std::string::npos);
  CHECK(error_of([&] { read_cifar_file(tmp.path().string(), "cifar10", false, "t"); }).find("not a regular file") !=
        std::string::npos);
  CHECK(error_of([&] { cifar_format("cifar1000"); }).find("cifar10 or cifar100") != std::string::npos);
}

TEST_CASE("load_cifar: the standard files of a named folder (or of the folder the archive unpacks to)") {
  testing::TempDir tmp;
  // CIFAR-10 as the archive unpacks: <dir>/cifar-10-batches-bin/data_batch_{1..5}.bin, test_batch.bin.
  const auto folder = tmp.path() / cifar_folder_name("cifar10");
  std::filesystem::create_directories(folder);
  for (int i = 1; i <= 5; ++i)
    write_bytes(folder / ("data_batch_" + std::to_string(i) + ".bin"), {record({static_cast<std::uint8_t>(i)}, i)});
  write_bytes(folder / "test_batch.bin", {record({9}, 9), record({8}, 8)});
  const CifarSplit s = load_cifar("cifar10", tmp.path().string());
  CHECK(s.train.size() == 5);
  CHECK(s.train.labels == std::vector<std::uint8_t>{1, 2, 3, 4, 5});  // the batches in order
  CHECK(s.test.size() == 2);
  CHECK(s.source.find("5 train / 2 test images of 3x32x32, 10 classes") != std::string::npos);
  CHECK(load_cifar("cifar10", folder.string()).train.size() == 5);  // the folder itself
  // A missing file is named, with where the data comes from; no folder named: no default place.
  std::filesystem::remove(folder / "data_batch_3.bin");
  const std::string missing = error_of([&] { load_cifar("cifar10", folder.string()); });
  CHECK(missing.find("missing data_batch_3.bin") != std::string::npos);
  CHECK(missing.find("cannot download") != std::string::npos);
  CHECK(error_of([&] { load_cifar("cifar10", ""); }).find("name the folder") != std::string::npos);
  CHECK(error_of([&] { load_cifar("cifar100", (tmp.path() / "nowhere").string()); }).find("not a folder") !=
        std::string::npos);
  // CIFAR-100: train.bin and test.bin.
  const auto hundred = tmp.path() / "c100";
  std::filesystem::create_directories(hundred);
  write_bytes(hundred / "train.bin", {record({1, 11}, 0), record({2, 22}, 1)});
  write_bytes(hundred / "test.bin", {record({3, 33}, 2)});
  const CifarSplit h = load_cifar("cifar100", hundred.string(), /*coarse=*/true);
  CHECK(h.train.labels == std::vector<std::uint8_t>{1, 2});
  CHECK(h.source.find("20 classes (coarse labels)") != std::string::npos);
}
