// tasks/softmoe_mnist/gzip_reader.h — reading a file that may be gzipped, and being strict about
// where the gzip data ends.
//
// Datasets ship gzipped (train-images-idx3-ubyte.gz) or plain. GzipReader opens either: a file
// whose first two bytes are the gzip magic 0x1f 0x8b is decompressed, any other file is read as
// it is. (A plain IDX file starts with 0x00 0x00, so the two never mix up.)
//
// Why not zlib's gzread, which does the same? Because after the end of a gzip stream gzread
// silently ignores whatever follows when it does not look like gzip: a file with bytes appended
// (a half-finished download glued to another, a tar block's padding) would load as if it were
// fine. GzipReader runs zlib's inflate itself and decides, as gzip's RFC 1952 does:
//
//   - A gzip file is a series of members, each a complete gzip stream (header, deflate data,
//     CRC-32 and length). Concatenated members are one valid file whose content is the members'
//     contents one after the other — `cat a.gz b.gz > c.gz` is what `gunzip`, `zcat` and
//     Python's gzip module read as the concatenation, so GzipReader reads it so too.
//   - Anything after the last member that is not the start of another member (0x1f 0x8b) is an
//     error: "N bytes after the end of the gzip data". Zero padding is such bytes too (gunzip
//     warns about it and Python skips it; no dataset this reads is padded, so here it is an error).
//   - A file that ends inside a member is cut short: read() returns what was decoded and
//     ended_early() says so; a member whose data or CRC/length check is damaged is an error
//     naming zlib's reason ("damaged gzip stream: incorrect data check").
//
// Every error is a moelab::Error for `op` naming the path. Memory is bounded (one 128 KiB input
// buffer), whatever the file claims.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace moelab {

class GzipReader {
 public:
  // Opens `path`; moelab::Error (for `op`) when it is missing, a directory or unreadable.
  GzipReader(const std::string& path, const char* op);
  ~GzipReader();
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  // Whether the file is gzip (starts with 0x1f 0x8b).
  bool gzipped() const { return gzip_; }
  // Reads up to n bytes of the content (decompressed when gzipped) into out; returns how many,
  // fewer than n only at the end of the content. Throws on a damaged gzip stream or on bytes
  // after the last gzip member.
  std::int64_t read(std::uint8_t* out, std::int64_t n);
  // True once the content has ended because the file ended inside a gzip member.
  bool ended_early() const { return ended_early_; }

 private:
  // Moves the unread input to the front of the buffer and appends what the file has next;
  // false when the file has no more.
  bool fill();
  std::int64_t read_plain(std::uint8_t* out, std::int64_t n);
  std::int64_t read_gzip(std::uint8_t* out, std::int64_t n);
  // Between two members: true when another member starts, false at the clean end of the file;
  // throws when other bytes follow.
  bool next_member();
  [[noreturn]] void fail_damaged(const std::string& why) const;

  std::string path_;
  const char* op_;
  std::FILE* file_ = nullptr;
  std::vector<std::uint8_t> buffer_;  // input; the unread part is [next, next + avail) of z_
  std::uint64_t file_read_ = 0;       // bytes taken from the file so far
  z_stream z_{};
  bool gzip_ = false;
  bool inflate_ready_ = false;  // inflateInit2 succeeded (inflateEnd is due)
  bool in_member_ = false;      // inside a gzip member
  bool done_ = false;           // the content has ended
  bool ended_early_ = false;
};

}  // namespace moelab
