// runner/run_lock.cpp — see run_lock.h.
#include "runner/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/safe_file.h"
#include "runner/settings.h"

namespace moelab {

namespace {

// The lock file, created if need be: a regular file, never a link (a `.lock` linked to ~/victim
// would otherwise get the holder's note written into ~/victim), a FIFO or a device.
int open_lock_file(const std::filesystem::path& path) {
  try {
    return open_regular_file(path.string(), O_RDWR | O_CREAT, "open the lock file");
  } catch (const Error& err) {
    throw UsageError(std::string(err.what()) + " (is the run folder writable?)");
  }
}

// Tries the lock without waiting; true when taken.
bool try_lock(int fd, int operation) {
  int rc;
  do rc = ::flock(fd, operation | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  return rc == 0;
}

// Replaces the file's text with "pid N: command" (who holds it, for the message of whoever is refused).
void write_holder(int fd, const std::string& what, const std::string& command) {
  const std::string text = "pid " + std::to_string(::getpid()) + " (" + what + "): " + command + "\n";
  if (::ftruncate(fd, 0) != 0) return;  // the lock holds without the note; the note is for messages
  [[maybe_unused]] const ssize_t n = ::pwrite(fd, text.data(), text.size(), 0);
}

// The holder's note in a lock file, or a generic phrase.
std::string holder_of(const std::filesystem::path& path) {
  char buffer[1024] = {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "another moelab process";
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  ::close(fd);
  std::string text(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "another moelab process" : text;
}

// The running jobs of the folder: the point lock files someone holds now.
std::string running_points(const RunDir& dir) {
  std::string out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file(".locks"), ec)) {
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    const bool free = try_lock(fd, LOCK_SH);
    ::close(fd);
    if (!free) out += (out.empty() ? "" : "; ") + holder_of(entry.path());
  }
  return out;
}

}  // namespace

RunLock::RunLock(RunLock&& other) noexcept : fds_(std::move(other.fds_)) { other.fds_.clear(); }

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    for (int fd : fds_) ::close(fd);
    fds_ = std::move(other.fds_);
    other.fds_.clear();
  }
  return *this;
}

RunLock::~RunLock() {
  for (int fd : fds_) ::close(fd);
}

RunLock lock_run_folder(const RunDir& dir, const std::string& mode, const std::string& point,
                        const std::string& command) {
  const bool shares = mode == "point" || mode == "list";
  const std::filesystem::path folder_lock = dir.file(".lock");
  RunLock lock;
  const int fd = open_lock_file(folder_lock);
  lock.hold(fd);
  if (!try_lock(fd, shares ? LOCK_SH : LOCK_EX)) {
    const std::string points = shares ? std::string() : running_points(dir);
    throw UsageError("--out '" + dir.path().string() + "' is in use by " +
                     (points.empty() ? holder_of(folder_lock) : "jobs of its grid: " + points) +
                     ". One run writes a folder at a time (jobs with --set mode=point of one grid may run together); "
                     "wait for it to end, or use another --out folder");
  }
  if (!shares) write_holder(fd, "mode=" + (mode.empty() ? std::string("all") : mode), command);
  if (mode == "point" && !point.empty()) {
    dir.subfolder(".locks");  // a real folder, not a link that would put the lock files elsewhere
    const std::filesystem::path point_lock = dir.file(".locks") / point;
    const int pfd = open_lock_file(point_lock);
    lock.hold(pfd);
    if (!try_lock(pfd, LOCK_EX))
      throw UsageError("point '" + point + "' of --out '" + dir.path().string() + "' is being run by " +
                       holder_of(point_lock) + ": a point runs once at a time");
    write_holder(pfd, "point " + point, command);
  }
  return lock;
}

RunLock lock_run_config(const RunDir& dir) {
  RunLock lock;
  const int fd = open_lock_file(dir.file(".config.lock"));
  lock.hold(fd);
  int rc;
  do rc = ::flock(fd, LOCK_EX);
  while (rc != 0 && errno == EINTR);
  if (rc != 0)
    throw UsageError("cannot lock '" + dir.file(".config.lock").string() + "': " + std::strerror(errno));
  return lock;
}

}  // namespace moelab
