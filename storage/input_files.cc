#include "storage/input_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "storage/file_util.h"
#include "storage/mutex.h"

namespace engram {
namespace {

struct InputRecord {
  uint64_t id = 0;  // 0: for the rest of the process
  dev_t dev = 0;
  ino_t ino = 0;
  std::string path;      // as the reader named it, for messages
  std::string absolute;  // re-stat()ed to tell whether the record still counts
  std::string what;
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

  uint64_t Add(const struct stat& st, const std::string& path, std::string what, bool held) {
    InputRecord r;
    r.dev = st.st_dev;
    r.ino = st.st_ino;
    r.path = path;
    std::error_code ec;
    r.absolute = std::filesystem::absolute(path, ec).string();
    if (ec) r.absolute = path;
    r.what = std::move(what);
    MutexLock lock(&mu_);
    if (!held) {
      // Records for the process: each file once, and those whose path no
      // longer names their file dropped, so that a long-lived process that
      // reads many files does not grow this list without bound.
      std::erase_if(records_, [](const InputRecord& e) { return e.id == 0 && !StillNamesTheFile(e); });
      for (const InputRecord& e : records_) {
        if (e.id == 0 && e.dev == r.dev && e.ino == r.ino && e.absolute == r.absolute) return 0;
      }
      records_.push_back(std::move(r));
      return 0;
    }
    r.id = next_id_++;
    records_.push_back(std::move(r));
    return records_.back().id;
  }

  void Remove(uint64_t id) {
    MutexLock lock(&mu_);
    std::erase_if(records_, [id](const InputRecord& e) { return e.id == id; });
  }

  // The records of the file with this identity.
  std::vector<InputRecord> Find(dev_t dev, ino_t ino) {
    MutexLock lock(&mu_);
    std::vector<InputRecord> found;
    for (const InputRecord& e : records_) {
      if (e.dev == dev && e.ino == ino) found.push_back(e);
    }
    return found;
  }

 private:
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
  return InputFileHold(InputRegistry::Get().Add(st, path, std::move(what), /*held=*/true));
}

InputFileHold HoldInputPath(const std::string& path, std::string what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return InputFileHold();
  return InputFileHold(InputRegistry::Get().Add(st, path, std::move(what), /*held=*/true));
}

void RecordInputFile(int fd, const std::string& path, std::string what) {
  struct stat st {};
  if (::fstat(fd, &st) == 0) InputRegistry::Get().Add(st, path, std::move(what), /*held=*/false);
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
