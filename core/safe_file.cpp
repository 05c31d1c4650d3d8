// core/safe_file.cpp — see safe_file.h.
#include "core/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "core/error.h"

namespace moelab {

namespace {

std::string kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

}  // namespace

std::string host_name_for_files() {
  char buffer[HOST_NAME_MAX + 1] = {};
  std::string host;
  if (::gethostname(buffer, sizeof buffer - 1) == 0)
    for (const char* c = buffer; *c != '\0' && host.size() < 64; ++c)
      if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '.')
        host += *c;
  return host.empty() ? std::string("host") : host;
}

std::string temporary_name(const std::string& path, const std::string& tag) {
  static const std::string host = host_name_for_files();
  return path + "." + tag + "." + host + "." + std::to_string(::getpid());
}

int create_new_file(const std::string& path) {
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0 && errno == EEXIST) {
    // A leftover of a crashed process that had this pid on this host (or a link put there):
    // remove the entry itself and create the file afresh. Still O_EXCL: never an existing file.
    if (::unlink(path.c_str()) == 0) fd = ::open(path.c_str(), flags, 0644);
    else errno = EEXIST;
  }
  return fd;
}

int open_regular_file(const std::string& path, int flags, const std::string& what) {
  // O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader for ever; it is
  // cleared again below once the file is known to be a regular file.
  const int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) {
    const int error = errno;
    // ELOOP (a link, refused by O_NOFOLLOW), ENXIO (a FIFO with no reader), ENODEV, EISDIR...:
    // say what the entry is, not only errno's word for it.
    const std::string kind = file_kind(path);
    if (kind != "a regular file" && kind != "nothing")
      throw Error("cannot " + what + " '" + path + "': it is " + kind +
                  ", where moelab keeps a regular file of its own (moelab never writes through links or into "
                  "special files): remove it, or use another folder");
    throw Error("cannot " + what + " '" + path + "': " + std::strerror(error));
  }
  struct stat st {};
  const bool known = ::fstat(fd, &st) == 0;
  if (!known || !S_ISREG(st.st_mode)) {
    const std::string kind = known ? kind_of_mode(st.st_mode) : "unreadable";
    ::close(fd);
    throw Error("cannot " + what + " '" + path + "': it is " + kind +
                ", where moelab keeps a regular file of its own: remove it, or use another folder");
  }
  const int status = ::fcntl(fd, F_GETFL);
  if (status >= 0) ::fcntl(fd, F_SETFL, status & ~O_NONBLOCK);
  return fd;
}

std::string file_kind(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return errno == ENOENT || errno == ENOTDIR ? std::string("nothing") : "unreadable (" + std::string(std::strerror(errno)) + ")";
  if (!S_ISLNK(st.st_mode)) return kind_of_mode(st.st_mode);
  char target[PATH_MAX] = {};
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  return n > 0 ? "a symbolic link to '" + std::string(target, static_cast<std::size_t>(n)) + "'" : "a symbolic link";
}

bool entry_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace moelab
