// runner/checked_file.h — writing a run folder's files so that no failed write goes unnoticed.
//
// A full disk, a quota or an I/O error shows up at write(2), or only at fsync(2) or close(2).
// An std::ofstream hides it unless its state is checked after every operation, and its message
// would not say why; a run that trained for an hour must not end with results.csv at 0 bytes and
// exit status 0. So the run folder's writers (run_dir.h's CsvFile and RunDir::write_text, plot.h's
// data and scripts) use these helpers, which call POSIX directly and throw moelab::Error
// naming the file and the system's reason:
//
//   cannot write 'runs/phonebook/demo/results.csv': No space left on device
//
//   write_file_atomic(path, text)   the whole file or no change: writes <path>.partial.<host>.<pid>
//                                   (created new, never through a link), fsyncs it, renames it over
//                                   path; on failure removes it again (several processes, on one
//                                   host or several, may write the same path at once: each file
//                                   lands whole; a link at path is replaced, its target untouched)
//   read_regular_file(path)         the whole file (a regular file; never through a link)
//   cut_file(path, bytes)           truncates a regular file (never through a link)
//   AppendFile f(path);             opens for appending (creating the file); a link, a FIFO or a
//                                   device there is refused (core/safe_file.h)
//   f.append(text);                 all of text, or the file is cut back to its length before
//                                   the call and an error is thrown (no half rows left behind)
//
// Fault injection, for tests: simulate_full_disk_after(n) makes every write through these helpers
// fail with ENOSPC ("No space left on device") once n more bytes have been written, as a disk that
// fills up during a run would; simulate_full_disk_after(-1) ends the simulation. Nothing else
// calls it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace moelab {

void write_file_atomic(const std::filesystem::path& path, const std::string& text);

// The whole of a regular file, read without following a link (core/safe_file.h); moelab::Error
// "cannot <what> '<path>': ..." for a link, a special file, or a read that fails.
std::string read_regular_file(const std::filesystem::path& path, const std::string& what = "read");

class AppendFile {
 public:
  explicit AppendFile(const std::filesystem::path& path);
  ~AppendFile();
  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void append(const std::string& text);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// Cuts the regular file `path` to `bytes` bytes; moelab::Error naming it for a link, a special file
// or a failure.
void cut_file(const std::filesystem::path& path, std::uintmax_t bytes);

// For tests: writes fail with ENOSPC after `bytes` more bytes (negative: never, the default).
void simulate_full_disk_after(std::int64_t bytes);

}  // namespace moelab
