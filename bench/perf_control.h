// bench/perf_control.h — lets `perf record` sample only the part of a benchmark that is measured.
//
// A sampling profiler started with a program samples all of it: building the model, the first
// touch of every page of its tensors (the kernel's clear_page in perf's report), the warm-up steps.
// In train_step_bench's 100-step profiles those samples counted as "not GEMM": the GEMM share read
// 0.5-1.5 points lower than over the timed steps alone (2026-12-02, Zen 5, runs in turn: dense
// 75.0 and 74.6% against 75.5 and 76.0%, MoE 64 experts 56.4 and 57.1% against 57.9 and 58.0%),
// and the ceiling computed from it with it. perf (5.9 and later) can start with its events
// disabled and take "enable" / "disable" commands from a FIFO:
//
//   mkfifo ctl ack
//   perf record -D -1 --control fifo:ctl,ack -- train_step_bench --perf-control ctl,ack ...
//
// and the program writes "enable" before its timed steps and "disable" after them, waiting for
// perf's "ack" on the second FIFO (when given) so that sampling has started before the first timed
// step runs. Both paths must be FIFOs themselves, not links to them (checked): the program never
// writes to a regular file or through a link here.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/safe_file.h"

namespace moelab::bench {

class PerfControl {
 public:
  PerfControl() = default;  // controls nothing until open()
  // spec: "CTL" or "CTL,ACK", the FIFOs given to perf's --control fifo:. Throws std::runtime_error
  // naming the path when one cannot be opened or is not a FIFO.
  void open(const std::string& spec) {
    const std::size_t comma = spec.find(',');
    ctl_ = open_fifo(spec.substr(0, comma), O_WRONLY);
    if (comma != std::string::npos) ack_ = open_fifo(spec.substr(comma + 1), O_RDONLY);
  }
  ~PerfControl() {
    if (ctl_ >= 0) ::close(ctl_);
    if (ack_ >= 0) ::close(ack_);
  }
  PerfControl(const PerfControl&) = delete;
  PerfControl& operator=(const PerfControl&) = delete;

  // Each returns false (and the profile then covers more or less than the timed steps) when perf
  // could not be told or did not answer.
  bool enable() { return command("enable\n"); }
  bool disable() { return command("disable\n"); }

 private:
  // Opens path, which must be a FIFO itself: O_NOFOLLOW refuses a symbolic link (a name in a
  // folder someone else handed over could point anywhere), fstat anything else. Nothing is ever
  // written but the commands, and only once the descriptor is known to be a FIFO. A FIFO's open
  // blocks until the other end is open; perf opens both at its start.
  static int open_fifo(const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      const int error = errno;
      throw std::runtime_error("cannot open '" + path + "': " +
                               (error == ELOOP ? "it is " + file_kind(path) : std::string(std::strerror(error))));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
      ::close(fd);
      throw std::runtime_error("'" + path + "' is " + file_kind(path) +
                               ", not a FIFO (make one with mkfifo and give it to perf's --control fifo:)");
    }
    return fd;
  }
  bool command(const char* text) {
    if (ctl_ < 0) return true;
    const std::size_t length = std::strlen(text);
    if (::write(ctl_, text, length) != static_cast<ssize_t>(length)) return false;
    if (ack_ < 0) return true;
    char reply[16];
    return ::read(ack_, reply, sizeof(reply)) > 0;  // "ack\n"
  }

  int ctl_ = -1, ack_ = -1;
};

}  // namespace moelab::bench
