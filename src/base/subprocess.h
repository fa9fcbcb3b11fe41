// Subprocess: one child process (fork + execv) whose stdout is read through a
// pipe, so a caller can wait for a start-up line such as "ecoserve listening on
// http://127.0.0.1:PORT"; its stderr is inherited or redirected to a file.
// Used by tests and tools that drive the `ecoserve` binary (e.g. spawning
// `ecoserve serve --port 0`).
//
// Ownership: owns the child and the read end of its stdout pipe. The destructor
// SIGKILLs and reaps a child that is still running. Not thread-safe.
// Only the child's stdout lines read by wait_for_line() are consumed; a child
// that writes much more than a pipe's buffer to stdout afterwards will block.
// Header-only (POSIX).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ecoserve {

struct SubprocessOptions {
  std::string stderr_path;  // "" = inherit the parent's stderr; else truncate and write this file
};

class Subprocess {
 public:
  Subprocess() = default;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
  }

  // Starts argv[0] (a path, not searched in PATH) with `argv`.
  Status start(const std::vector<std::string>& argv, const SubprocessOptions& options = {}) {
    if (pid_ > 0) return failed_precondition_error("subprocess already started (pid {})", pid_);
    if (argv.empty()) return invalid_argument_error("subprocess: empty argv");
    std::vector<std::string> args = argv;
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    int err_fd = -1;
    if (!options.stderr_path.empty()) {
      err_fd = ::open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (err_fd < 0) return unavailable_error("subprocess: cannot open '{}' for stderr", options.stderr_path);
    }
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      if (err_fd >= 0) ::close(err_fd);
      return unavailable_error("subprocess: pipe failed");
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      if (err_fd >= 0) ::close(err_fd);
      return unavailable_error("subprocess: fork failed");
    }
    if (pid == 0) {  // child: async-signal-safe calls only
      ::dup2(fds[1], STDOUT_FILENO);
      if (err_fd >= 0) ::dup2(err_fd, STDERR_FILENO);
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    if (err_fd >= 0) ::close(err_fd);
    pid_ = pid;
    out_fd_ = fds[0];
    return ok_status();
  }

  // Reads the child's stdout until a line starting with `prefix` and returns the
  // rest of that line. UNAVAILABLE if the child closes stdout (exits) first,
  // DEADLINE_EXCEEDED after `timeout`.
  StatusOr<std::string> wait_for_line(std::string_view prefix, std::chrono::milliseconds timeout) {
    if (out_fd_ < 0) return failed_precondition_error("subprocess not started");
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string line;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char c;
      const ssize_t n = ::read(out_fd_, &c, 1);
      if (n <= 0) return unavailable_error("the child exited before printing a line starting with '{}'", prefix);
      if (c != '\n') {
        line += c;
        continue;
      }
      if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
      line.clear();
    }
    return deadline_exceeded_error("timed out waiting for a line starting with '{}'", prefix);
  }

  // Sends `sig` and waits for the child. Returns its exit code, 128 + the signal
  // number if a signal killed it, or -1 if there is no child.
  int stop(int sig = SIGTERM) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (out_fd_ >= 0) ::close(out_fd_);
    out_fd_ = -1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
  }

  // Waits for the child to exit by itself, reading the rest of its stdout into
  // `out` (if given; discarded otherwise) so it never blocks on a full pipe.
  // Returns the exit code as stop() does.
  int wait(std::string* out = nullptr) {
    if (pid_ <= 0) return -1;
    if (out_fd_ >= 0) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(out_fd_, buf, sizeof buf)) != 0) {
        if (n < 0) {
          if (errno == EINTR) continue;
          break;
        }
        if (out) out->append(buf, static_cast<size_t>(n));
      }
    }
    return stop(0);  // signal 0 only checks; the child has closed stdout
  }

  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
};

}  // namespace ecoserve
