#include "src/common/gnuplot.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace engram {

namespace {

// Writes all of `data` to `fd`; false if the reader went away (EPIPE) or on
// another error. SIGPIPE is blocked in this thread meanwhile, so a gnuplot
// that exits early cannot kill the caller; a SIGPIPE this raised is consumed.
bool WriteToChild(int fd, const std::string& data) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  size_t done = 0;
  bool ok = true;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (!ok && errno == EPIPE && !sigismember(&old, SIGPIPE)) {
    const timespec zero{};
    (void)sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

}  // namespace

Status RunGnuplot(const std::string& script, const std::vector<std::string>& args, const std::string& output) {
  if (args.size() > 9) return Status::InvalidArgument("gnuplot takes at most 9 script arguments");
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::FromErrno("run gnuplot: pipe", errno);
  std::vector<std::string> argv_strings{"gnuplot", "-c", "/dev/stdin"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], STDIN_FILENO);
  pid_t pid = -1;
  const int spawn_err = ::posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[0]);
  if (spawn_err != 0) {
    ::close(pipe_fds[1]);
    if (spawn_err == ENOENT) return Status::Unsupported("gnuplot is not installed");
    return Status::FromErrno("run gnuplot", spawn_err);
  }
  WriteToChild(pipe_fds[1], script);  // a failure shows in gnuplot's exit status
  ::close(pipe_fds[1]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return Status::FromErrno("wait for gnuplot", errno);
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    const std::string how = WIFEXITED(wstatus) ? "exit status " + std::to_string(WEXITSTATUS(wstatus))
                                               : "signal " + std::to_string(WTERMSIG(wstatus));
    return Status::IOError("gnuplot failed (" + how + ") drawing " + output);
  }
  struct stat st {};
  if (::stat(output.c_str(), &st) != 0 || st.st_size == 0) {
    return Status::IOError("gnuplot exited 0 but did not write " + output);
  }
  return Status::OK();
}

}  // namespace engram
