// tasks/softmoe_mnist/gzip_reader.cpp — see gzip_reader.h: plain reads, or zlib's inflate run
// member by member with a strict look at what follows each member.
#include "tasks/softmoe_mnist/gzip_reader.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace moelab {

namespace {

constexpr std::size_t kBufferBytes = std::size_t{1} << 17;
constexpr int kGzipOnly = 16 + MAX_WBITS;  // inflateInit2: a gzip header and trailer, 32 KiB window

}  // namespace

GzipReader::GzipReader(const std::string& path, const char* op) : path_(path), op_(op), buffer_(kBufferBytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(op_, path, ": no such file");
  if (std::filesystem::is_directory(path, ec)) fail(op_, path, ": is a directory, not an IDX file");
  // A FIFO or a device would block or never end: only regular files are read.
  if (!std::filesystem::is_regular_file(path, ec)) fail(op_, path, ": is not a regular file (a FIFO, a device?)");
  errno = 0;
  file_ = std::fopen(path.c_str(), "rb");
  if (file_ == nullptr) fail(op_, path, ": cannot open: ", errno ? std::strerror(errno) : "unknown reason");
  z_.next_in = buffer_.data();
  z_.avail_in = 0;
  // Two bytes decide: gzip or plain.
  while (z_.avail_in < 2 && fill()) {
  }
  gzip_ = z_.avail_in >= 2 && z_.next_in[0] == 0x1f && z_.next_in[1] == 0x8b;
  if (!gzip_) return;
  const int r = inflateInit2(&z_, kGzipOnly);
  if (r != Z_OK) {
    std::fclose(file_);
    fail(op_, path, ": cannot start decompressing: ", r == Z_MEM_ERROR ? "out of memory" : "zlib error");
  }
  inflate_ready_ = true;
  in_member_ = true;
}

GzipReader::~GzipReader() {
  if (inflate_ready_) inflateEnd(&z_);
  if (file_ != nullptr) std::fclose(file_);
}

bool GzipReader::fill() {
  const std::size_t unread = z_.avail_in;
  if (unread > 0 && z_.next_in != buffer_.data()) std::memmove(buffer_.data(), z_.next_in, unread);
  z_.next_in = buffer_.data();
  const std::size_t got = std::fread(buffer_.data() + unread, 1, buffer_.size() - unread, file_);
  if (got == 0 && std::ferror(file_)) fail(op_, path_, ": read error: ", std::strerror(errno));
  z_.avail_in = static_cast<uInt>(unread + got);
  file_read_ += got;
  return got > 0;
}

std::int64_t GzipReader::read(std::uint8_t* out, std::int64_t n) {
  if (n <= 0 || done_) return 0;
  return gzip_ ? read_gzip(out, n) : read_plain(out, n);
}

std::int64_t GzipReader::read_plain(std::uint8_t* out, std::int64_t n) {
  std::int64_t got = 0;
  while (got < n) {
    if (z_.avail_in == 0 && !fill()) {
      done_ = true;
      break;
    }
    const auto take = static_cast<uInt>(std::min<std::int64_t>(n - got, z_.avail_in));
    std::memcpy(out + got, z_.next_in, take);
    z_.next_in += take;
    z_.avail_in -= take;
    got += take;
  }
  return got;
}

std::int64_t GzipReader::read_gzip(std::uint8_t* out, std::int64_t n) {
  std::int64_t got = 0;
  while (got < n) {
    if (!in_member_ && !next_member()) {
      done_ = true;
      break;
    }
    if (z_.avail_in == 0 && !fill()) {  // the file ends inside a member
      ended_early_ = true;
      done_ = true;
      break;
    }
    z_.next_out = out + got;
    z_.avail_out = static_cast<uInt>(std::min<std::int64_t>(n - got, UINT_MAX));
    const int r = inflate(&z_, Z_NO_FLUSH);
    got = z_.next_out - out;
    if (r == Z_STREAM_END) {
      in_member_ = false;  // the CRC-32 and length matched; see what follows
      if (inflateReset(&z_) != Z_OK) fail_damaged("cannot reset the decompressor");
    } else if (r == Z_MEM_ERROR) {
      fail(op_, path_, ": out of memory while decompressing");
    } else if (r != Z_OK && r != Z_BUF_ERROR) {  // Z_DATA_ERROR (Z_NEED_DICT cannot occur in gzip)
      fail_damaged(z_.msg != nullptr ? z_.msg : "zlib error " + std::to_string(r));
    }
    // Z_OK: progress was made. Z_BUF_ERROR: none was possible, which with output room left can
    // only mean the input ran out (refilled at the top of the loop).
    if (r == Z_BUF_ERROR && z_.avail_in > 0 && z_.avail_out > 0) fail_damaged("zlib made no progress");
  }
  return got;
}

bool GzipReader::next_member() {
  while (z_.avail_in < 2 && fill()) {
  }
  if (z_.avail_in == 0) return false;
  if (z_.avail_in >= 2 && z_.next_in[0] == 0x1f && z_.next_in[1] == 0x8b) {
    in_member_ = true;
    return true;
  }
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path_, ec);
  const std::uint64_t at = file_read_ - z_.avail_in;  // where the stray bytes start
  fail(op_, path_, ": ", ec || size < at ? std::string("some") : std::to_string(size - at),
       " bytes after the end of the gzip data (from byte ", at,
       " on), and they do not start another gzip member: the file has something appended or is damaged");
}

void GzipReader::fail_damaged(const std::string& why) const { fail(op_, path_, ": damaged gzip stream: ", why); }

}  // namespace moelab
