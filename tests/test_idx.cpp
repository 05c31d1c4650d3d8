// tests/test_idx.cpp — the IDX reader and the MNIST file finder (tasks/softmoe_mnist/idx.h), on
// small files the test writes itself (nothing here reads data/mnist or any installed dataset):
// round trips plain and gzipped, byte-exact headers, and a clear error for every kind of bad file
// (wrong magic, another element type, bad dimension counts, zero sizes, truncated headers and
// payloads, trailing bytes, damaged gzip, a missing file), for mismatched image/label pairs, and
// for missing or half-present data directories.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <zlib.h>

#include "core/error.h"
#include "tasks/softmoe_mnist/idx.h"
#include "temp_dir.h"

using namespace moelab;
using moelab::testing::read_bytes;
using moelab::testing::TempDir;
using moelab::testing::write_bytes;

namespace {

using Bytes = std::vector<unsigned char>;

// An IDX header by hand: 00 00 type ndims, then big-endian sizes.
Bytes header(int type, const std::vector<std::uint32_t>& dims) {
  Bytes b = {0, 0, static_cast<unsigned char>(type), static_cast<unsigned char>(dims.size())};
  for (std::uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<unsigned char>((d >> shift) & 0xFF));
  return b;
}

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes iota_bytes(std::size_t n, int start = 0) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>((start + static_cast<int>(i)) % 256);
  return b;
}

// Writes `bytes` gzipped, through zlib, as a downloader would find them.
void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

IdxArray images_array(std::int64_t n, std::int64_t rows, std::int64_t cols, int start = 0) {
  IdxArray a;
  a.dims = {n, rows, cols};
  auto bytes = iota_bytes(static_cast<std::size_t>(n * rows * cols), start);
  a.data.assign(bytes.begin(), bytes.end());
  return a;
}

IdxArray labels_array(const std::vector<std::uint8_t>& labels) {
  IdxArray a;
  a.dims = {static_cast<std::int64_t>(labels.size())};
  a.data = labels;
  return a;
}

void write_split(const TempDir& dir, bool gzip, std::int64_t n_train, std::int64_t n_test) {
  const std::string gz = gzip ? ".gz" : "";
  write_idx(dir.file("train-images-idx3-ubyte" + gz), images_array(n_train, 4, 3), gzip);
  std::vector<std::uint8_t> train_labels, test_labels;
  for (std::int64_t i = 0; i < n_train; ++i) train_labels.push_back(static_cast<std::uint8_t>(i % 10));
  for (std::int64_t i = 0; i < n_test; ++i) test_labels.push_back(static_cast<std::uint8_t>(9 - i % 10));
  write_idx(dir.file("train-labels-idx1-ubyte" + gz), labels_array(train_labels), gzip);
  write_idx(dir.file("t10k-images-idx3-ubyte" + gz), images_array(n_test, 4, 3, 100), gzip);
  write_idx(dir.file("t10k-labels-idx1-ubyte" + gz), labels_array(test_labels), gzip);
}

}  // namespace

TEST_CASE("read_idx: a hand-written image file, plain and gzipped") {
  TempDir dir;
  // 2 images of 3 rows x 2 cols: magic 0x00000803, sizes 2 3 2, then 12 bytes row-major.
  const Bytes file = concat(header(0x08, {2, 3, 2}), iota_bytes(12, 200));
  write_bytes(dir.file("plain"), file);
  write_gz(dir.file("zipped.gz"), file);
  for (const char* name : {"plain", "zipped.gz"}) {
    CAPTURE(name);
    const IdxArray a = read_idx(dir.file(name));
    CHECK(a.dims == std::vector<std::int64_t>{2, 3, 2});
    REQUIRE(a.data.size() == 12);
    CHECK(a.data[0] == 200);
    CHECK(a.data[(1 * 3 + 2) * 2 + 1] == static_cast<std::uint8_t>((200 + 11) % 256));  // image 1, row 2, col 1
  }
  // Sizes above 255 use all four big-endian bytes: 258 = 0x00000102.
  write_bytes(dir.file("labels"), concat(header(0x08, {258}), iota_bytes(258)));
  const IdxArray labels = read_idx(dir.file("labels"));
  CHECK(labels.dims == std::vector<std::int64_t>{258});
  CHECK(labels.data[257] == 1);
}

TEST_CASE("write_idx: the exact header bytes, and read_idx reads back what it wrote") {
  TempDir dir;
  const IdxArray a = images_array(3, 2, 2);
  write_idx(dir.file("a"), a, /*gzip=*/false);
  CHECK(read_bytes(dir.file("a")) == concat(header(0x08, {3, 2, 2}), iota_bytes(12)));
  write_idx(dir.file("a.gz"), a, /*gzip=*/true);
  const Bytes zipped = read_bytes(dir.file("a.gz"));
  REQUIRE(zipped.size() >= 2);
  CHECK(zipped[0] == 0x1F);  // the gzip magic
  CHECK(zipped[1] == 0x8B);
  for (const char* name : {"a", "a.gz"}) {
    const IdxArray b = read_idx(dir.file(name));
    CHECK(b.dims == a.dims);
    CHECK(b.data == a.data);
  }
  IdxArray bad = a;
  bad.data.pop_back();
  CHECK_THROWS_WITH_AS(write_idx(dir.file("bad"), bad, false), doctest::Contains("describe 12 elements but data has 11"), Error);
  bad.dims = {};
  CHECK_THROWS_WITH_AS(write_idx(dir.file("bad"), bad, false), doctest::Contains("0 dimensions"), Error);
  CHECK_THROWS_WITH_AS(write_idx(dir.path().string() + "/no/such/dir/x", a, false), doctest::Contains("cannot open for writing"),
                       Error);
}

TEST_CASE("read_idx: wrong magic, other element types and bad dimension counts are named") {
  TempDir dir;
  // A PNG signature, as when a web page or image was saved under the IDX name.
  write_bytes(dir.file("png"), {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A});
  CHECK_THROWS_WITH_AS(read_idx(dir.file("png")), doctest::Contains("wrong magic number: starts with bytes 0x89 0x50 0x4E 0x47"),
                       Error);
  // The path is in every message.
  CHECK_THROWS_WITH_AS(read_idx(dir.file("png")), doctest::Contains(dir.file("png").c_str()), Error);

  write_bytes(dir.file("float"), concat(header(0x0D, {2}), Bytes(8, 0)));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("float")), doctest::Contains("element type 0x0D (float32) is not supported"), Error);
  write_bytes(dir.file("int32"), concat(header(0x0C, {1}), Bytes(4, 0)));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("int32")), doctest::Contains("element type 0x0C (int32)"), Error);
  write_bytes(dir.file("bogus"), concat(header(0x42, {1}), Bytes(1, 0)));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("bogus")), doctest::Contains("0x42 (not an IDX type)"), Error);

  write_bytes(dir.file("zero-dims"), {0, 0, 0x08, 0});
  CHECK_THROWS_WITH_AS(read_idx(dir.file("zero-dims")), doctest::Contains("0 dimensions"), Error);
  write_bytes(dir.file("five-dims"), concat(header(0x08, {1, 1, 1, 1, 1}), Bytes(1, 0)));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("five-dims")), doctest::Contains("5 dimensions"), Error);
}

TEST_CASE("read_idx: a zero size and an absurd size are rejected before reading data") {
  TempDir dir;
  write_bytes(dir.file("zero"), header(0x08, {3, 0, 28}));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("zero")), doctest::Contains("dimension 1 has size 0"), Error);
  write_bytes(dir.file("huge"), concat(header(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu}), Bytes(16, 0)));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("huge")), doctest::Contains("the header is damaged"), Error);
}

TEST_CASE("read_idx: truncated files and trailing bytes, plain and gzipped") {
  TempDir dir;
  const Bytes good = concat(header(0x08, {2, 3, 2}), iota_bytes(12));

  // Cut inside the payload: 16-byte header + 7 of the 12 data bytes.
  const Bytes cut(good.begin(), good.begin() + 16 + 7);
  write_bytes(dir.file("cut"), cut);
  write_gz(dir.file("cut.gz"), cut);
  for (const char* name : {"cut", "cut.gz"}) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(read_idx(dir.file(name)), doctest::Contains("truncated: expected 12 bytes of data for sizes [2, 3, 2], found 7"),
                         Error);
  }
  // Cut inside the header: 3 bytes of magic; the magic and 5 of the 12 bytes of sizes; empty.
  write_bytes(dir.file("cut-magic"), Bytes(good.begin(), good.begin() + 3));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("cut-magic")), doctest::Contains("truncated: expected a 4-byte magic number, found 3"), Error);
  write_bytes(dir.file("cut-sizes"), Bytes(good.begin(), good.begin() + 9));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("cut-sizes")), doctest::Contains("expected 12 bytes of sizes for 3 dimensions, found 5"), Error);
  write_bytes(dir.file("empty"), {});
  CHECK_THROWS_WITH_AS(read_idx(dir.file("empty")), doctest::Contains("found 0 bytes"), Error);

  // Two bytes too many.
  const Bytes longer = concat(good, {7, 7});
  write_bytes(dir.file("long"), longer);
  write_gz(dir.file("long.gz"), longer);
  for (const char* name : {"long", "long.gz"}) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(read_idx(dir.file(name)), doctest::Contains("2 trailing bytes after the 12 bytes of data"), Error);
  }

  // A gzip file cut short: the compressed stream ends before its data does.
  write_gz(dir.file("whole.gz"), concat(header(0x08, {4096}), iota_bytes(4096)));
  const Bytes zipped = read_bytes(dir.file("whole.gz"));
  REQUIRE(zipped.size() > 40);
  write_bytes(dir.file("half.gz"), Bytes(zipped.begin(), zipped.begin() + static_cast<std::ptrdiff_t>(zipped.size() / 2)));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("half.gz")), doctest::Contains("truncated"), Error);
  // Only the 8-byte gzip trailer (CRC and length) missing: all data is there, but the file is damaged.
  write_bytes(dir.file("no-trailer.gz"), Bytes(zipped.begin(), zipped.end() - 8));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("no-trailer.gz")), doctest::Contains("damaged gzip stream"), Error);
}

TEST_CASE("read_idx: bytes after the end of the gzip stream are an error; concatenated gzip members are one file") {
  TempDir dir;
  const Bytes good = concat(header(0x08, {2, 3, 2}), iota_bytes(12));
  write_gz(dir.file("good.gz"), good);
  const Bytes zipped = read_bytes(dir.file("good.gz"));
  REQUIRE(read_idx(dir.file("good.gz")).data == Bytes(good.begin() + 16, good.end()));

  // Anything appended after the gzip stream: text, zero padding, one byte, a lone 0x1f.
  const std::vector<std::pair<std::string, Bytes>> appended = {
      {"text", {'j', 'u', 'n', 'k'}}, {"zeros", Bytes(512, 0)}, {"one byte", {0}}, {"0x1f", {0x1f}}};
  for (const auto& [what, extra] : appended) {
    CAPTURE(what);
    const std::string path = dir.file("appended.gz");
    write_bytes(path, concat(zipped, extra));
    const std::string expected = path + ": " + std::to_string(extra.size()) + " bytes after the end of the gzip data (from byte " +
                                 std::to_string(zipped.size()) + " on)";
    CHECK_THROWS_WITH_AS(read_idx(path), doctest::Contains(expected.c_str()), Error);
  }
  // The same bytes after a plain file are trailing bytes of the IDX data.
  write_bytes(dir.file("appended"), concat(good, {'j', 'u', 'n', 'k'}));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("appended")), doctest::Contains("4 trailing bytes after the 12 bytes"), Error);

  // Two members (as `cat a.gz b.gz` makes) are one file: the IDX bytes split across them load.
  write_gz(dir.file("head.gz"), Bytes(good.begin(), good.begin() + 10));
  write_gz(dir.file("tail.gz"), Bytes(good.begin() + 10, good.end()));
  write_bytes(dir.file("joined.gz"), concat(read_bytes(dir.file("head.gz")), read_bytes(dir.file("tail.gz"))));
  const IdxArray joined = read_idx(dir.file("joined.gz"));
  CHECK(joined.dims == std::vector<std::int64_t>{2, 3, 2});
  CHECK(joined.data == Bytes(good.begin() + 16, good.end()));
  // ... and so are an empty member and a member of the wrong content in the joined contents.
  write_gz(dir.file("empty.gz"), {});
  write_bytes(dir.file("with-empty.gz"), concat(zipped, read_bytes(dir.file("empty.gz"))));
  CHECK(read_idx(dir.file("with-empty.gz")).data == joined.data);
  write_bytes(dir.file("twice.gz"), concat(zipped, zipped));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("twice.gz")), doctest::Contains("28 trailing bytes after the 12 bytes of data"), Error);
  // A second member that is damaged, or cut off, is a damaged stream.
  Bytes bad_second = concat(zipped, zipped);
  bad_second[zipped.size() + 12] ^= 0x55;  // inside the second member's deflate data
  write_bytes(dir.file("bad-second.gz"), bad_second);
  CHECK_THROWS_WITH_AS(read_idx(dir.file("bad-second.gz")), doctest::Contains("damaged gzip stream"), Error);
  write_bytes(dir.file("cut-second.gz"), concat(zipped, Bytes(zipped.begin(), zipped.begin() + 2)));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("cut-second.gz")), doctest::Contains("damaged gzip stream"), Error);
}

TEST_CASE("read_idx: a missing file and a directory name the path") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(read_idx(dir.file("nothing-here")), doctest::Contains((dir.file("nothing-here") + ": no such file").c_str()), Error);
  CHECK_THROWS_WITH_AS(read_idx(dir.path().string()), doctest::Contains("is a directory"), Error);
}

TEST_CASE("read_idx: a FIFO is refused at once (it would block forever), and a lying gzip header before inflating") {
  TempDir dir;
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0644) == 0);
  CHECK_THROWS_WITH_AS(read_idx(dir.file("fifo")), doctest::Contains("is not a regular file"), Error);
  // A few hundred bytes of gzip whose header promises 1000 x 1000 x 1000 bytes: deflate cannot
  // hold that much in so few bytes, so the header is refused before any data is inflated (a
  // 4.2 MB file that did hold 2^32 zeros once cost 125 s and 4.2 GB).
  write_gz(dir.file("bomb.gz"), concat(header(0x08, {1000, 1000, 1000}), Bytes(4096, 0)));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("bomb.gz")), doctest::Contains("more than a gzip file of"), Error);
  // A plain file shorter than its header says: refused from its length, before reading.
  write_bytes(dir.file("short"), concat(header(0x08, {1000, 1000}), Bytes(10, 0)));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("short")), doctest::Contains("truncated: expected 1000000 bytes"), Error);
  // More than 2^30 elements: damaged, whatever the file holds.
  write_bytes(dir.file("huge2"), header(0x08, {65536, 256, 256}));
  CHECK_THROWS_WITH_AS(read_idx(dir.file("huge2")), doctest::Contains("the header is damaged"), Error);
}

TEST_CASE("load_idx_dataset: images [N, rows, cols] with N labels in 0..9") {
  TempDir dir;
  write_idx(dir.file("images"), images_array(3, 4, 2), false);
  write_idx(dir.file("labels.gz"), labels_array({7, 0, 9}), true);
  const ImageDataset d = load_idx_dataset(dir.file("images"), dir.file("labels.gz"), "toy");
  CHECK(d.name == "toy");
  CHECK(d.size() == 3);
  CHECK(d.rows == 4);
  CHECK(d.cols == 2);
  CHECK(d.images.size() == 24);
  CHECK(d.images[8] == 8);  // image 1 starts at 1 * 4 * 2
  CHECK(d.labels == std::vector<std::uint8_t>{7, 0, 9});

  write_idx(dir.file("four-labels"), labels_array({1, 2, 3, 4}), false);
  CHECK_THROWS_WITH_AS(load_idx_dataset(dir.file("images"), dir.file("four-labels"), "toy"),
                       doctest::Contains("count mismatch"), Error);
  CHECK_THROWS_WITH_AS(load_idx_dataset(dir.file("images"), dir.file("four-labels"), "toy"),
                       doctest::Contains("has 3 images but"), Error);
  write_idx(dir.file("label-ten"), labels_array({1, 10, 3}), false);
  CHECK_THROWS_WITH_AS(load_idx_dataset(dir.file("images"), dir.file("label-ten"), "toy"),
                       doctest::Contains("label 10 at index 1 is not a class 0..9"), Error);
  // The headers are compared before any data is read: an image file whose header promises 300
  // images of 4x4 over only 16 bytes of data, beside a label file of 4 labels, is refused for the
  // counts, not for its cut data (the audit's 1 MB .gz promising a gigabyte cost 1.07 GB and 13 s
  // before the counts were compared).
  Bytes promise = {0, 0, 8, 3, 0, 0, 0x01, 0x2C, 0, 0, 0, 4, 0, 0, 0, 4};
  promise.resize(promise.size() + 16, 0);
  write_gz(dir.file("promise.gz"), promise);
  CHECK_THROWS_WITH_AS(load_idx_dataset(dir.file("promise.gz"), dir.file("four-labels"), "toy"),
                       doctest::Contains("has 300 images but"), Error);
  CHECK_THROWS_WITH_AS(load_idx_dataset(dir.file("promise.gz"), dir.file("four-labels"), "toy"),
                       doctest::Contains("read from the headers; no data was read"), Error);
  // Images and labels swapped.
  CHECK_THROWS_WITH_AS(load_idx_dataset(dir.file("labels.gz"), dir.file("images"), "toy"),
                       doctest::Contains("an image file has 3 dimensions"), Error);
  CHECK_THROWS_WITH_AS(load_idx_dataset(dir.file("images"), dir.file("images"), "toy"),
                       doctest::Contains("a label file has 1 dimension"), Error);
}

TEST_CASE("find_mnist_in: the first directory with all four files, plain or gzipped; clear errors otherwise") {
  TempDir empty, plain, zipped, half;
  write_split(plain, /*gzip=*/false, 12, 5);
  write_split(zipped, /*gzip=*/true, 20, 10);
  write_bytes(plain.file("SOURCE"), {'t', 'o', 'y', ' ', 'd', 'a', 't', 'a', '\n'});

  const MnistSplit a = find_mnist_in("mnist", {empty.path().string(), plain.path().string(), zipped.path().string()});
  CHECK(a.train.size() == 12);
  CHECK(a.test.size() == 5);
  CHECK(a.train.rows == 4);
  CHECK(a.train.cols == 3);
  CHECK(a.test.labels[0] == 9);
  CHECK(a.source == "mnist from " + plain.path().string() + ": 12 train / 5 test images of 4x3; toy data");

  const MnistSplit b = find_mnist_in("fashion-mnist", {zipped.path().string()});
  CHECK(b.train.size() == 20);
  CHECK(b.test.size() == 10);
  CHECK(b.train.name == "fashion-mnist train");
  CHECK(b.source == "fashion-mnist from " + zipped.path().string() + ": 20 train / 10 test images of 4x3");

  // Three of four files: an error naming the missing one, not a silent fall-through.
  write_split(half, false, 3, 3);
  std::filesystem::remove(half.file("t10k-labels-idx1-ubyte"));
  CHECK_THROWS_WITH_AS(find_mnist_in("mnist", {half.path().string(), plain.path().string()}),
                       doctest::Contains("holds only some of the four IDX files; missing (plain or .gz): t10k-labels-idx1-ubyte"), Error);

  // Nothing anywhere: what was looked for, where, and how to get it.
  CHECK_THROWS_WITH_AS(find_mnist_in("mnist", {empty.path().string()}), doctest::Contains("no mnist data found"), Error);
  CHECK_THROWS_WITH_AS(find_mnist_in("mnist", {empty.path().string()}), doctest::Contains("t10k-labels-idx1-ubyte (each also with .gz)"),
                       Error);
  CHECK_THROWS_WITH_AS(find_mnist_in("mnist", {empty.path().string()}), doctest::Contains(("in: " + empty.path().string()).c_str()), Error);
  CHECK_THROWS_WITH_AS(find_mnist_in("mnist", {empty.path().string()}), doctest::Contains("scripts/get-mnist.sh"), Error);
  CHECK_THROWS_WITH_AS(find_mnist_in("fashion-mnist", {empty.path().string()}),
                       doctest::Contains("apt-get install dataset-fashion-mnist"), Error);
  CHECK_THROWS_WITH_AS(find_mnist_in("cifar", {plain.path().string()}), doctest::Contains("unknown dataset 'cifar'"), Error);
}

TEST_CASE("mnist_search_dirs: the named directory alone, else the dataset's default place") {
  CHECK(mnist_search_dirs("mnist", "") == std::vector<std::string>{"data/mnist"});
  CHECK(mnist_search_dirs("mnist", "/x") == std::vector<std::string>{"/x"});  // no quiet fall-back
  CHECK_THROWS_WITH_AS(locate_mnist("mnist", "/nonexistent"), doctest::Contains("/nonexistent does not exist"), Error);
  CHECK(mnist_search_dirs("fashion-mnist", "") == std::vector<std::string>{"/usr/share/datasets/fashion-mnist"});
  CHECK_THROWS_WITH_AS(mnist_search_dirs("mnist-10k", ""), doctest::Contains("expected mnist or fashion-mnist"), Error);
  CHECK(mnist_file_names().size() == 4);
}
