// tasks/softmoe_vit/cifar.h — reading the binary versions of CIFAR-10 and CIFAR-100 (Krizhevsky
// 2009, https://www.cs.toronto.edu/~kriz/cifar.html, "Binary version"), the data of the implicit-bias
// paper's Astroformer runs. moelab cannot download them (no network fetch exists here): a user who
// has the files names their folder.
//
// The format. A file is a run of fixed-size records, nothing else (no header):
//
//   CIFAR-10   <1 byte label 0..9><3072 bytes of pixels>                    3073 bytes a record
//   CIFAR-100  <1 byte coarse label 0..19><1 byte fine label 0..99><3072 bytes> 3074 bytes a record
//
// The 3072 pixel bytes are one 32x32 image, channel after channel: the 1024 red values row-major
// (the first 32 are the top row), then the 1024 green, then the 1024 blue. So pixel (row r, col c)
// of channel ch is byte ch*1024 + r*32 + c; ImageDataset keeps exactly this layout.
//
// The files, as the two archives unpack:
//   cifar-10-batches-bin/   data_batch_1.bin ... data_batch_5.bin (10,000 images each: the 50,000
//                           training images), test_batch.bin (10,000), batches.meta.txt (names)
//   cifar-100-binary/       train.bin (50,000), test.bin (10,000), coarse_label_names.txt,
//                           fine_label_names.txt
//
//   CifarSplit s = load_cifar("cifar10", "/data/cifar-10-batches-bin");
//   s.train.size() == 50000, s.train.channels == 3, s.train.classes == 10
//
// Checks, before anything is allocated: a missing file, a file whose size is not a whole number of
// records ("size 30729999 is not a whole number of 3073-byte CIFAR-10 records: truncated or another
// file?"), an empty one, and a label out of range are moelab::Errors naming the file. Files with
// another number of records than the standard ones are read (tests write small ones); the source
// sentence says how many images there were, so a report shows it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tasks/softmoe_mnist/idx.h"

namespace moelab {

// "cifar10" or "cifar100".
struct CifarFormat {
  std::string dataset;
  std::int64_t label_bytes = 1;  // 1 (CIFAR-10) or 2 (CIFAR-100: coarse, then fine)
  std::int64_t record_bytes() const { return label_bytes + 3 * 32 * 32; }
};
// moelab::Error for any other name than "cifar10" and "cifar100".
CifarFormat cifar_format(const std::string& dataset);

// The standard file names: training files first, then the test file.
//   cifar10:  data_batch_1.bin ... data_batch_5.bin, test_batch.bin
//   cifar100: train.bin, test.bin
std::vector<std::string> cifar_train_files(const std::string& dataset);
std::string cifar_test_file(const std::string& dataset);

// The folder an archive unpacks to (cifar-10-batches-bin, cifar-100-binary).
std::string cifar_folder_name(const std::string& dataset);

// Reads one binary file. CIFAR-100's label is the fine one (100 classes) unless `coarse` (20).
// moelab::Error naming the file for anything the header comment lists.
ImageDataset read_cifar_file(const std::string& path, const std::string& dataset, bool coarse,
                             const std::string& name);

// Writes `images` (3 x 32 x 32 each, labels < 10 for cifar10, < 100 for cifar100) as one binary
// file; for cifar100 the coarse labels are `coarse_labels` (one per image, < 20). For tests and
// tools: moelab::Error for a dataset of another shape.
void write_cifar_file(const std::string& path, const std::string& dataset, const ImageDataset& images,
                      const std::vector<std::uint8_t>& coarse_labels = {});

struct CifarSplit {
  ImageDataset train, test;
  std::string source;  // "cifar10 from DIR: 50000 train / 10000 test images of 3x32x32, 10 classes"
};

// Loads the training files (joined, in the standard order) and the test file from `dir`, or from
// dir/<cifar_folder_name> when `dir` holds that folder instead of the files. `dir` must be named:
// there is no default place and no download. moelab::Error listing the missing files and where
// the data comes from when they are not there.
CifarSplit load_cifar(const std::string& dataset, const std::string& dir, bool coarse = false);

}  // namespace moelab
