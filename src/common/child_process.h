// ChildProcess: a real process started with fork/exec, its stdin and stdout
// on pipes, for tests and benchmarks of multi-process behaviour (the node
// service and its clients). Killed with SIGKILL when destroyed if still
// running.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace engram {

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& o) noexcept { *this = std::move(o); }
  ChildProcess& operator=(ChildProcess&& o) noexcept {
    std::swap(pid_, o.pid_);
    std::swap(out_, o.out_);
    std::swap(in_, o.in_);
    std::swap(buffer_, o.buffer_);
    std::swap(status_, o.status_);
    return *this;
  }
  ~ChildProcess() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
    if (out_ >= 0) ::close(out_);
    if (in_ >= 0) ::close(in_);
  }

  // Starts argv[0] (a path) with its stdin and stdout on pipes; stderr is
  // inherited, or goes to the stdout pipe too (`merge_stderr`: for reading
  // what a process logs).
  static ChildProcess Start(const std::vector<std::string>& argv, bool merge_stderr = false) {
    int fds[2], in[2];
    ChildProcess c;
    if (::pipe2(fds, O_CLOEXEC) != 0) return c;
    if (::pipe2(in, O_CLOEXEC) != 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      return c;
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      // Dies with its parent, however the parent ends: a test that crashes
      // must not leave a service running (holding the test runner's pipes).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent ended before the prctl
      ::dup2(fds[1], STDOUT_FILENO);
      if (merge_stderr) ::dup2(fds[1], STDERR_FILENO);
      ::dup2(in[0], STDIN_FILENO);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    ::close(in[0]);
    c.pid_ = pid;
    c.out_ = fds[0];
    c.in_ = in[1];
    return c;
  }

  // Writes a line to the child's stdin.
  bool WriteLine(const std::string& line) {
    const std::string l = line + "\n";
    return in_ >= 0 && ::write(in_, l.data(), l.size()) == ssize_t(l.size());
  }

  pid_t pid() const { return pid_; }

  // Waits until the child has printed a line starting with `prefix`; returns
  // that line, or nothing at the deadline or the end of its output.
  std::optional<std::string> WaitForLine(const std::string& prefix, std::chrono::milliseconds timeout) {
    return WaitForLineWhere([&prefix](const std::string& line) { return line.rfind(prefix, 0) == 0; }, timeout);
  }
  // The same for a line holding `needle` anywhere (a log line, after its
  // time stamp).
  std::optional<std::string> WaitForLineContaining(const std::string& needle, std::chrono::milliseconds timeout) {
    return WaitForLineWhere([&needle](const std::string& line) { return line.find(needle) != std::string::npos; },
                            timeout);
  }

  template <typename Match>
  std::optional<std::string> WaitForLineWhere(const Match& match, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        if (match(line)) return line;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      const ssize_t n = ::read(out_, chunk, sizeof(chunk));
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  void Kill(int sig) {
    if (pid_ > 0 && !status_) ::kill(pid_, sig);
  }

  // The exit status (waitpid's), or nothing if it has not ended by the deadline.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    if (status_) return status_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = st;
        return status_;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      ::usleep(2000);
    }
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int in_ = -1;
  std::string buffer_;
  std::optional<int> status_;
};

// Stops the process (SIGSTOP) and returns once every thread of it is
// stopped: a signal is delivered when its target next runs, and a test
// that acts at once may find it still running. False if it did not stop
// within the timeout.
inline bool StopProcess(pid_t pid, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  if (::kill(pid, SIGSTOP) != 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  while (std::chrono::steady_clock::now() < deadline) {
    bool all_stopped = true, any = false;
    if (DIR* d = ::opendir(tasks.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        char buf[512] = {};
        FILE* f = std::fopen((tasks + "/" + e->d_name + "/stat").c_str(), "r");
        if (f == nullptr) continue;
        const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
        std::fclose(f);
        const char* close = std::strrchr(buf, ')');
        if (n == 0 || close == nullptr || close[1] == 0 || close[2] == 0) continue;
        any = true;
        if (close[2] != 'T' && close[2] != 't') all_stopped = false;
      }
      ::closedir(d);
    }
    if (any && all_stopped) return true;
    ::usleep(1000);
  }
  return false;
}

// Descriptors, threads and memory of a process, from /proc: resident, and
// proportional (PSS: each shared page divided among the processes mapping it).
struct ProcessFootprint {
  size_t fds = 0;
  size_t threads = 0;
  size_t rss_kib = 0;
  size_t pss_kib = 0;
};

inline ProcessFootprint FootprintOf(pid_t pid) {
  ProcessFootprint f;
  const std::string dir = "/proc/" + std::to_string(pid);
  if (DIR* d = ::opendir((dir + "/fd").c_str())) {
    while (dirent* e = ::readdir(d)) f.fds += e->d_name[0] != '.';
    ::closedir(d);
  }
  if (FILE* s = std::fopen((dir + "/status").c_str(), "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), s)) {
      if (std::strncmp(line, "Threads:", 8) == 0) f.threads = std::strtoul(line + 8, nullptr, 10);
      if (std::strncmp(line, "VmRSS:", 6) == 0) f.rss_kib = std::strtoul(line + 6, nullptr, 10);
    }
    std::fclose(s);
  }
  if (FILE* s = std::fopen((dir + "/smaps_rollup").c_str(), "r")) {
    char line[256];
    while (std::fgets(line, sizeof(line), s)) {
      if (std::strncmp(line, "Pss:", 4) == 0) f.pss_kib = std::strtoul(line + 4, nullptr, 10);
    }
    std::fclose(s);
  }
  return f;
}

}  // namespace engram
