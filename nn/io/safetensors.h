// nn/io/safetensors.h — reading and writing tensors in the safetensors file format.
//
// safetensors (https://github.com/huggingface/safetensors) is the plain, mmap-friendly tensor
// file that PyTorch, NumPy, JAX and Hugging Face all read. A file is three parts:
//
//   bytes [0, 8)        N, the header length: an unsigned 64-bit little-endian integer
//   bytes [8, 8 + N)    the header: UTF-8 JSON, one entry per tensor plus optional metadata
//                         {"embed.weight": {"dtype": "F32", "shape": [16, 32], "data_offsets": [0, 2048]},
//                          ...,
//                          "__metadata__": {"step": "100"}}
//                       (padded with spaces so the data starts on an 8-byte boundary)
//   bytes [8 + N, end)  the data section: each tensor's elements, row-major and little-endian,
//                       at [begin, end) relative to the data section's start
//
// The tensors tile the data section exactly: sorted by begin, each starts where the previous one
// ends, the first at 0, and the last ends at the end of the file. `__metadata__` maps strings to
// strings only (numbers are written as decimal strings).
//
// dtypes: moelab's float32, float64, bfloat16 and int32 are written as F32, F64, BF16 and I32
// (BF16's bytes are the bfloat16 bits, little-endian, as PyTorch's torch.bfloat16 writes them).
// Reading also accepts I64 (PyTorch's default integer type, e.g. token ids saved by a reference
// script): moelab has no int64, so an I64 tensor is read as int32 and must fit (an error says
// which element does not). Every other safetensors dtype (F16, BOOL, U8, ...) is an error.
//
// Guarantees:
//   - write_safetensors writes `path + ".partial.<host>.<pid>"` (temporary_path: one name per
//     process and machine, so processes saving one path at once never share a temporary file; it
//     is created new, never through a link, core/safe_file.h), flushes it to disk (fsync) and renames it over
//     `path`, so a crash leaves either the old file or the new one, never half a file. Every
//     write, the fsync, the close and the rename are checked: when one fails (a full disk, a
//     quota, an I/O error) the temporary file is removed, `path` keeps what it held, and the
//     moelab::Error names both files and the OS's reason ("No space left on device").
//   - read_safetensors checks everything before trusting it, and throws moelab::Error naming the
//     file and the exact problem: a file shorter than 8 bytes, a header length past the end of
//     the file, invalid JSON, a duplicate name, a malformed entry, an unknown dtype, a shape that
//     does not match its byte range, offsets out of bounds, overlapping or leaving a gap, a data
//     section longer than the tensors. No input makes it crash or allocate unbounded memory.
//   - Files moelab writes load with `safetensors.numpy.load_file` / `safetensors.torch.load_file`,
//     and moelab reads the files those write (in the dtypes above).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace moelab {

// Everything in one safetensors file, tensors in file order (by data offset, which for files
// moelab writes is the order they were given in).
struct SafetensorsFile {
  std::string path;
  std::vector<std::pair<std::string, Tensor>> tensors;  // host tensors
  std::map<std::string, std::string> metadata;          // "__metadata__"; empty when absent

  bool contains(const std::string& name) const;
  // The tensor with this name; throws moelab::Error naming the file if there is none.
  const Tensor& at(const std::string& name) const;
};

// The temporary file write_safetensors writes before renaming it to `path`:
// "<path>.partial.<host>.<pid>".
std::string temporary_path(const std::string& path);

// Writes the tensors (copied to the host; any device) in the given order, and the metadata,
// atomically to `path` (through temporary_path(path)). Names must be non-empty, unique and not
// "__metadata__"; tensors must be defined.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads and validates a whole file; tensors come back on the CPU.
SafetensorsFile read_safetensors(const std::string& path);

// The safetensors dtype string of a moelab dtype ("F32", "F64", "I32").
const char* safetensors_dtype_name(DType dtype);

}  // namespace moelab
