// tasks/softmoe_vit/cifar.cpp — the CIFAR binary reader and writer (see the header).
#include "tasks/softmoe_vit/cifar.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/error.h"

namespace moelab {

namespace {

constexpr std::int64_t kImageBytes = 3 * 32 * 32;

std::string dataset_label(const std::string& dataset) { return dataset == "cifar10" ? "CIFAR-10" : "CIFAR-100"; }

}  // namespace

CifarFormat cifar_format(const std::string& dataset) {
  if (dataset == "cifar10") return {dataset, 1};
  if (dataset == "cifar100") return {dataset, 2};
  fail("cifar", "unknown dataset '", dataset, "' (cifar10 or cifar100)");
}

std::vector<std::string> cifar_train_files(const std::string& dataset) {
  cifar_format(dataset);
  if (dataset == "cifar100") return {"train.bin"};
  std::vector<std::string> files;
  for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
  return files;
}

std::string cifar_test_file(const std::string& dataset) {
  cifar_format(dataset);
  return dataset == "cifar10" ? "test_batch.bin" : "test.bin";
}

std::string cifar_folder_name(const std::string& dataset) {
  cifar_format(dataset);
  return dataset == "cifar10" ? "cifar-10-batches-bin" : "cifar-100-binary";
}

ImageDataset read_cifar_file(const std::string& path, const std::string& dataset, bool coarse,
                             const std::string& name) {
  const CifarFormat format = cifar_format(dataset);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    fail("cifar", path, ": ", std::filesystem::exists(path, ec) ? "not a regular file" : "no such file");
  // The size first: nothing is allocated for a file that cannot be whole records.
  const auto size = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
  if (ec) fail("cifar", path, ": cannot read its size (", ec.message(), ")");
  const std::int64_t record = format.record_bytes();
  if (size == 0) fail("cifar", path, ": empty file (a ", dataset_label(dataset), " file holds ", record, "-byte records)");
  if (size % record != 0)
    fail("cifar", path, ": size ", size, " is not a whole number of ", record, "-byte ", dataset_label(dataset),
         " records: truncated, or another file (", size / record, " records and ", size % record, " bytes over)");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cifar", path, ": cannot open it for reading");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  if (in.gcount() != size) fail("cifar", path, ": read ", in.gcount(), " of its ", size, " bytes");

  const std::int64_t n = size / record;
  ImageDataset d;
  d.name = name;
  d.rows = 32, d.cols = 32, d.channels = 3;
  d.classes = dataset == "cifar10" ? 10 : coarse ? 20 : 100;
  d.images.resize(static_cast<std::size_t>(n * kImageBytes));
  d.labels.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t* r = bytes.data() + i * record;
    // CIFAR-100: byte 0 the coarse label, byte 1 the fine one.
    const std::uint8_t label = dataset == "cifar10" ? r[0] : coarse ? r[0] : r[1];
    if (label >= d.classes)
      fail("cifar", path, ": record ", i, " has label ", static_cast<int>(label), ", outside 0..", d.classes - 1,
           dataset == "cifar100" ? (coarse ? " (coarse)" : " (fine)") : "");
    if (dataset == "cifar100" && !coarse && r[0] >= 20)
      fail("cifar", path, ": record ", i, " has coarse label ", static_cast<int>(r[0]), ", outside 0..19");
    d.labels[static_cast<std::size_t>(i)] = label;
    std::copy(r + format.label_bytes, r + record, d.images.begin() + i * kImageBytes);
  }
  return d;
}

void write_cifar_file(const std::string& path, const std::string& dataset, const ImageDataset& images,
                      const std::vector<std::uint8_t>& coarse_labels) {
  const CifarFormat format = cifar_format(dataset);
  const std::int64_t n = images.size();
  MOELAB_CHECK(images.channels == 3 && images.rows == 32 && images.cols == 32 &&
                   static_cast<std::int64_t>(images.images.size()) == n * kImageBytes,
               "write_cifar_file", "CIFAR images are 3x32x32, got ", images.channels, "x", images.rows, "x",
               images.cols, " with ", images.images.size(), " bytes for ", n, " images");
  MOELAB_CHECK(dataset == "cifar10" || static_cast<std::int64_t>(coarse_labels.size()) == n, "write_cifar_file",
               "cifar100 needs one coarse label per image, got ", coarse_labels.size(), " for ", n);
  std::vector<std::uint8_t> bytes;
  bytes.reserve(static_cast<std::size_t>(n * format.record_bytes()));
  for (std::int64_t i = 0; i < n; ++i) {
    if (dataset == "cifar100") bytes.push_back(coarse_labels[static_cast<std::size_t>(i)]);
    bytes.push_back(images.labels[static_cast<std::size_t>(i)]);
    bytes.insert(bytes.end(), images.images.begin() + i * kImageBytes, images.images.begin() + (i + 1) * kImageBytes);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) fail("write_cifar_file", path, ": could not write it");
}

CifarSplit load_cifar(const std::string& dataset, const std::string& dir, bool coarse) {
  cifar_format(dataset);
  if (dir.empty())
    fail("cifar", "name the folder that holds the ", dataset_label(dataset), " binary files (", cifar_folder_name(dataset),
         " as the archive unpacks): moelab cannot download them (https://www.cs.toronto.edu/~kriz/cifar.html)");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) fail("cifar", dir, ": not a folder");
  std::vector<std::string> names = cifar_train_files(dataset);
  names.push_back(cifar_test_file(dataset));
  // The files in `dir` itself, or in the folder the archive unpacks to inside it.
  auto missing_in = [&](const std::filesystem::path& d) {
    std::vector<std::string> missing;
    for (const std::string& f : names)
      if (!std::filesystem::exists(d / f, ec)) missing.push_back(f);
    return missing;
  };
  std::filesystem::path where = dir;
  if (missing_in(where).size() == names.size() && std::filesystem::is_directory(where / cifar_folder_name(dataset), ec))
    where /= cifar_folder_name(dataset);
  const std::vector<std::string> missing = missing_in(where);
  if (!missing.empty()) {
    std::string list;
    for (const std::string& f : missing) list += (list.empty() ? "" : ", ") + f;
    fail("cifar", where.string(), ": missing ", list, " (the ", dataset_label(dataset),
         " binary version, https://www.cs.toronto.edu/~kriz/cifar.html; moelab cannot download it)");
  }
  CifarSplit s;
  s.train.name = dataset + " train";
  for (std::size_t i = 0; i + 1 < names.size(); ++i) {
    ImageDataset part = read_cifar_file((where / names[i]).string(), dataset, coarse, s.train.name);
    if (i == 0) {
      s.train = std::move(part);
      continue;
    }
    s.train.images.insert(s.train.images.end(), part.images.begin(), part.images.end());
    s.train.labels.insert(s.train.labels.end(), part.labels.begin(), part.labels.end());
  }
  s.test = read_cifar_file((where / names.back()).string(), dataset, coarse, dataset + " test");
  s.source = dataset + " from " + where.string() + ": " + std::to_string(s.train.size()) + " train / " +
             std::to_string(s.test.size()) + " test images of 3x32x32, " + std::to_string(s.train.classes) +
             " classes" + (dataset == "cifar100" ? (coarse ? " (coarse labels)" : " (fine labels)") : "");
  return s;
}

}  // namespace moelab
