#include "storage/input_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <vector>

#include "storage/file_util.h"
#include "storage/mutex.h"

namespace engram {
namespace {

// The most files recorded for the rest of the process at once; beyond it
// the oldest record goes (protection lost for it, never a file refused that
// should not be): each holds a descriptor.
constexpr size_t kMaxProcessRecords = 64;

struct InputRecord {
  uint64_t id = 0;  // 0: for the rest of the process
  dev_t dev = 0;
  ino_t ino = 0;
  std::string path;      // as the reader named it, for messages
  std::string absolute;  // re-stat()ed to tell whether the record still counts
  std::string what;
  // A record for the rest of the process keeps its file open (a duplicate
  // of the reader's descriptor) until it is dropped: while a file is open
  // its inode number cannot go to another, so a new file made at the same
  // path never matches the old record. (A held record's file is kept open,
  // or in use, by its holder.)
  int kept_fd = -1;
};

// Whether `r`'s own path still names the file it recorded.
bool StillNamesTheFile(const InputRecord& r) {
  struct stat st {};
  return ::stat(r.absolute.c_str(), &st) == 0 && st.st_dev == r.dev && st.st_ino == r.ino;
}

class InputRegistry {
 public:
  static InputRegistry& Get() {
    static InputRegistry* registry = new InputRegistry();  // never destroyed: holds may outlive statics
    return *registry;
  }

  uint64_t Add(int fd, const struct stat& st, const std::string& path, std::string what, bool held) {
    InputRecord r;
    r.dev = st.st_dev;
    r.ino = st.st_ino;
    r.path = path;
    std::error_code ec;
    r.absolute = std::filesystem::absolute(path, ec).string();
    if (ec) r.absolute = path;
    r.what = std::move(what);
    MutexLock lock(&mu_);
    if (held) {
      r.id = next_id_++;
      records_.push_back(std::move(r));
      return records_.back().id;
    }
    // Each file once, and at most kMaxProcessRecords, the oldest dropped.
    DropStaleLocked();
    for (const InputRecord& e : records_) {
      if (e.id == 0 && e.dev == r.dev && e.ino == r.ino && e.absolute == r.absolute) return 0;
    }
    if (std::count_if(records_.begin(), records_.end(), [](const InputRecord& e) { return e.id == 0; }) >=
        static_cast<std::ptrdiff_t>(kMaxProcessRecords)) {
      auto oldest = std::find_if(records_.begin(), records_.end(), [](const InputRecord& e) { return e.id == 0; });
      ::close(oldest->kept_fd);
      records_.erase(oldest);
    }
    r.kept_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (r.kept_fd < 0) return 0;  // out of descriptors: not recorded
    records_.push_back(std::move(r));
    return 0;
  }

  void Remove(uint64_t id) {
    MutexLock lock(&mu_);
    std::erase_if(records_, [id](const InputRecord& e) { return e.id == id; });
  }

  // The records of the file with this identity.
  std::vector<InputRecord> Find(dev_t dev, ino_t ino) {
    MutexLock lock(&mu_);
    DropStaleLocked();
    std::vector<InputRecord> found;
    for (const InputRecord& e : records_) {
      if (e.dev == dev && e.ino == ino) found.push_back(e);
    }
    return found;
  }

 private:
  // Records for the process whose path no longer names their file: dropped,
  // and their file closed (a deleted one's space is freed, and its inode
  // number may go to another file).
  void DropStaleLocked() REQUIRES(mu_) {
    std::erase_if(records_, [](const InputRecord& e) {
      if (e.id != 0 || StillNamesTheFile(e)) return false;
      ::close(e.kept_fd);
      return true;
    });
  }

  Mutex mu_;
  std::vector<InputRecord> records_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
};

}  // namespace

InputFileHold& InputFileHold::operator=(InputFileHold&& other) noexcept {
  if (this != &other) {
    if (id_ != 0) InputRegistry::Get().Remove(id_);
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

InputFileHold::~InputFileHold() {
  if (id_ != 0) InputRegistry::Get().Remove(id_);
}

InputFileHold HoldInputFile(int fd, const std::string& path, std::string what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return InputFileHold();
  return InputFileHold(InputRegistry::Get().Add(fd, st, path, std::move(what), /*held=*/true));
}

InputFileHold HoldInputPath(const std::string& path, std::string what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return InputFileHold();
  return InputFileHold(InputRegistry::Get().Add(-1, st, path, std::move(what), /*held=*/true));
}

void RecordInputFile(int fd, const std::string& path, std::string what) {
  struct stat st {};
  if (::fstat(fd, &st) == 0) InputRegistry::Get().Add(fd, st, path, std::move(what), /*held=*/false);
}

Status CheckNotAnInput(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::OK();  // nothing there to replace
  for (const InputRecord& r : InputRegistry::Get().Find(st.st_dev, st.st_ino)) {
    if (!StillNamesTheFile(r)) continue;
    return Status::InvalidArgument(std::string(what) + " " + path + " is the same file as " + r.path + " (" + r.what +
                                   ", which this process reads): writing it would replace that file");
  }
  return Status::OK();
}

Status CheckOutputPath(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::OK();  // a new file; the writer reports other errors
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(std::string(what) + " " + path + " is " + fileutil::FileTypeName(st.st_mode) +
                                   ", not a regular file: it is never replaced");
  }
  return CheckNotAnInput(path, what);
}

}  // namespace engram
