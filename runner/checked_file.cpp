// runner/checked_file.cpp — see checked_file.h.
#include "runner/checked_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/safe_file.h"

namespace moelab {

namespace {

std::int64_t simulated_room = -1;  // bytes left before the simulated full disk; negative: no simulation

[[noreturn]] void fail_io(const std::string& what, const std::filesystem::path& path, int error) {
  throw Error(what + " '" + path.string() + "': " + std::strerror(error));
}

// Writes all bytes, retrying short writes and EINTR; throws naming the file on any failure.
void write_all(int fd, const char* data, std::size_t bytes, const std::filesystem::path& path) {
  while (bytes > 0) {
    std::size_t chunk = bytes;
    if (simulated_room >= 0) {
      if (simulated_room == 0) fail_io("cannot write", path, ENOSPC);
      chunk = std::min<std::size_t>(chunk, static_cast<std::size_t>(simulated_room));
    }
    const ssize_t n = ::write(fd, data, chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_io("cannot write", path, errno);
    if (n == 0) fail_io("cannot write", path, EIO);
    if (simulated_room >= 0) simulated_room -= n;
    data += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

}  // namespace

void simulate_full_disk_after(std::int64_t bytes) { simulated_room = bytes < 0 ? -1 : bytes; }

std::string read_regular_file(const std::filesystem::path& path, const std::string& what) {
  const int fd = open_regular_file(path.string(), O_RDONLY, what);
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      fail_io("cannot read", path, error);
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

void write_file_atomic(const std::filesystem::path& path, const std::string& text) {
  // One temporary name per process and host: jobs of one grid started together (mode=point under
  // GNU parallel or a job array, on one machine or several sharing the folder) may write the same
  // file (config.json) at the same moment, and a shared "<path>.partial" would let one rename the
  // other's file away. The last rename wins, whole. The temporary file is created new (never an
  // existing file, never through a link: core/safe_file.h), and rename(2) replaces a link at
  // `path` by the file instead of writing into the link's target.
  const std::filesystem::path temp = temporary_name(path.string());
  const int fd = create_new_file(temp.string());
  if (fd < 0) fail_io("cannot create", temp, errno);
  try {
    write_all(fd, text.data(), text.size(), temp);
    // A delayed allocation can still fail here; EINVAL: the file cannot be synced (not a disk file).
    if (::fsync(fd) != 0 && errno != EINVAL) fail_io("cannot write", temp, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    fail_io("cannot write", temp, error);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    fail_io("cannot rename '" + temp.string() + "' to", path, error);
  }
}

AppendFile::AppendFile(const std::filesystem::path& path) : path_(path) {
  // A regular file or none: a link (which would append to its target), a FIFO or a device is refused.
  fd_ = open_regular_file(path.string(), O_WRONLY | O_APPEND | O_CREAT, "open for writing");
}

void cut_file(const std::filesystem::path& path, std::uintmax_t bytes) {
  const int fd = open_regular_file(path.string(), O_WRONLY, "cut");
  const int rc = ::ftruncate(fd, static_cast<off_t>(bytes));
  const int error = errno;
  ::close(fd);
  if (rc != 0) fail_io("cannot cut", path, error);
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

AppendFile::AppendFile(AppendFile&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) { other.fd_ = -1; }

AppendFile& AppendFile::operator=(AppendFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void AppendFile::append(const std::string& text) {
  if (fd_ < 0) throw Error("AppendFile '" + path_.string() + "': append after a move");
  struct stat before {};
  const bool regular = ::fstat(fd_, &before) == 0 && S_ISREG(before.st_mode);
  try {
    write_all(fd_, text.data(), text.size(), path_);
  } catch (...) {
    // Cut off what part of the text did get written, so the file ends where it ended before.
    if (regular && ::ftruncate(fd_, before.st_size) != 0) {
      // Nothing more to do: the reader drops an unterminated last line (run_dir.h).
    }
    throw;
  }
}

}  // namespace moelab
