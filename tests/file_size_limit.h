// tests/file_size_limit.h — a real write error from the kernel, without privileges and without links.
//
// Tests of "the disk is full" need write(2) to fail for real. They once linked the file being
// written to /dev/full; moelab now refuses to write through links (core/safe_file.h), so that trick
// is gone. RLIMIT_FSIZE gives the same kind of failure: while the limit holds, a write past `bytes`
// bytes into a regular file is cut short and the next one fails with EFBIG ("File too large"), a
// real error that moelab's writers must report exactly as they report ENOSPC. SIGXFSZ, which the
// kernel sends too, is ignored meanwhile (an ignored signal stays ignored across exec, so a child
// program such as gnuplot gets the error as well instead of being killed). Pipes and terminals are
// not limited, so the test's own output is not.
//
//   { FileSizeLimit limit(1000); CHECK_THROWS(write_big_file()); }   // the old limit is back
#pragma once

#include <signal.h>
#include <sys/resource.h>

#include <stdexcept>

namespace moelab::testing {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    if (::getrlimit(RLIMIT_FSIZE, &old_) != 0) throw std::runtime_error("getrlimit(RLIMIT_FSIZE) failed");
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit now = old_;
    now.rlim_cur = bytes;
    if (::setrlimit(RLIMIT_FSIZE, &now) != 0) throw std::runtime_error("setrlimit(RLIMIT_FSIZE) failed");
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
};

}  // namespace moelab::testing
