// runner/subprocess.cpp — see subprocess.h.
#include "runner/subprocess.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace moelab {

namespace {

bool executable_file(const std::filesystem::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// In the child: report which step failed through the pipe, then exit 127.
[[noreturn]] void child_fail(int fd, char step) {
  const int err = errno;
  char msg[1 + sizeof err];
  msg[0] = step;
  std::memcpy(msg + 1, &err, sizeof err);
  [[maybe_unused]] const ssize_t n = ::write(fd, msg, sizeof msg);
  ::_exit(127);
}

// The output file, never through a link (O_NOFOLLOW: a link there fails with ELOOP instead of
// emptying its target).
int open_output(const std::filesystem::path& p) {
  return p.empty() ? ::open("/dev/null", O_WRONLY | O_CLOEXEC)
                   : ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
}

}  // namespace

std::string ProgramResult::describe() const {
  if (!started) return "could not start: " + error;
  if (exited) return "exit status " + std::to_string(exit_status);
  return "killed by signal " + std::to_string(signal);
}

std::optional<std::filesystem::path> find_program(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (executable_file(name)) return std::filesystem::path(name);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::stringstream folders(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string folder;
  while (std::getline(folders, folder, ':')) {
    const std::filesystem::path candidate = std::filesystem::path(folder.empty() ? "." : folder) / name;
    if (executable_file(candidate)) return candidate;
  }
  return std::nullopt;
}

ProgramResult run_program(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                          const std::filesystem::path& stderr_file, const std::filesystem::path& stdout_file) {
  ProgramResult r;
  if (argv.empty()) {
    r.error = "no program given";
    return r;
  }
  // Everything the child needs is made before fork: it may only call async-signal-safe functions.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::filesystem::path err_path = stderr_file.empty() || stderr_file.is_absolute() || cwd.empty()
                                             ? stderr_file
                                             : cwd / stderr_file;
  const std::filesystem::path out_path = stdout_file.empty() || stdout_file.is_absolute() || cwd.empty()
                                             ? stdout_file
                                             : cwd / stdout_file;
  const int err_fd = open_output(err_path);
  if (err_fd < 0) {
    r.error = "cannot open '" + err_path.string() + "': " + std::strerror(errno);
    return r;
  }
  const int out_fd = open_output(out_path);
  if (out_fd < 0) {
    r.error = "cannot open '" + out_path.string() + "': " + std::strerror(errno);
    ::close(err_fd);
    return r;
  }
  int report[2];  // the child writes why it failed before exec; exec closes it (O_CLOEXEC)
  if (::pipe2(report, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    ::close(err_fd), ::close(out_fd);
    return r;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + std::strerror(errno);
    ::close(err_fd), ::close(out_fd), ::close(report[0]), ::close(report[1]);
    return r;
  }
  if (pid == 0) {  // the child
    ::close(report[0]);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) child_fail(report[1], 'c');
    if (::dup2(out_fd, STDOUT_FILENO) < 0 || ::dup2(err_fd, STDERR_FILENO) < 0) child_fail(report[1], 'd');
    ::execv(args[0], args.data());
    child_fail(report[1], 'e');
  }
  ::close(report[1]), ::close(err_fd), ::close(out_fd);
  char msg[1 + sizeof(int)];
  ssize_t got;
  do got = ::read(report[0], msg, sizeof msg);
  while (got < 0 && errno == EINTR);
  ::close(report[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got == static_cast<ssize_t>(sizeof msg)) {
    int err;
    std::memcpy(&err, msg + 1, sizeof err);
    const char* step = msg[0] == 'c' ? "cannot enter the folder '" : msg[0] == 'd' ? "cannot redirect output for '"
                                                                                  : "cannot run '";
    r.error = step + (msg[0] == 'c' ? cwd.string() : argv[0]) + "': " + std::strerror(err);
    return r;
  }
  r.started = true;
  r.exited = WIFEXITED(status);
  r.exit_status = r.exited ? WEXITSTATUS(status) : -1;
  r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return r;
}

}  // namespace moelab
