// The files this process reads, so that no file it writes replaces one.
//
// Every reader of an input records the file here -- tables and the shards of
// reference tables (TableFile, while it is open), rank manifests (the store
// that opened them), a converter's sources (the conversion), hash layouts and
// token maps (read whole and used for the rest of the process) -- and every
// writer asks CheckOutputPath before it writes and again right before it
// renames its output into place: tables, rank tables, manifests (TableWriter,
// the reference writer, WriteFileAtomically), hot sets and traces. One
// registry and one check, so that no writer can miss an input another part
// of the process opened (a hot set over the rank manifest the store read,
// a manifest over the --layout file).
//
// Identity is the device and inode of the file read (fstat of its open file),
// so an output path that is a symlink to an input (stat follows it) or a hard
// link of one (the same inode) is that input. A record counts while its own
// path still names the file it recorded: once that path is removed or
// replaced, the inode number may be reused by an unrelated file, which must
// not be refused (a hard link that outlives the recorded name is then not
// caught; nothing of the process's read copy is lost by writing it). The
// recorded file is kept open while its record lives (by its holder, or, for
// a record for the rest of the process, by the registry until the record is
// dropped), so a new file made at the same path cannot get its inode number.
// At most 64 files are recorded for the rest of the process (the oldest
// record goes).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engram/status.h"

namespace engram {

// A record of one input file, kept while this object lives. Move-only; an
// empty hold (default-constructed, or for a file that could not be stat()ed)
// records nothing.
class InputFileHold {
 public:
  InputFileHold() = default;
  InputFileHold(InputFileHold&& other) noexcept : id_(other.id_) { other.id_ = 0; }
  InputFileHold& operator=(InputFileHold&& other) noexcept;
  InputFileHold(const InputFileHold&) = delete;
  InputFileHold& operator=(const InputFileHold&) = delete;
  ~InputFileHold();

 private:
  friend InputFileHold HoldInputFile(int fd, const std::string& path, std::string what);
  friend InputFileHold HoldInputPath(const std::string& path, std::string what);
  explicit InputFileHold(uint64_t id) : id_(id) {}
  uint64_t id_ = 0;
};

// Records the file open as `fd`, read from `path`, as an input of this
// process until the hold is destroyed. `what` says what the file is to the
// process, for the message of a refused output: "the table file", "the rank
// manifest of table 'l1'", "a source of this conversion".
InputFileHold HoldInputFile(int fd, const std::string& path, std::string what);
// The same by path (stat()); a path that does not stat records nothing (its
// reader fails on it anyway).
InputFileHold HoldInputPath(const std::string& path, std::string what);

// Records the file open as `fd` as an input for the rest of the process: a
// file read whole whose contents the process keeps using (a hash layout, a
// token map), with no object to hold the record.
void RecordInputFile(int fd, const std::string& path, std::string what);

// InvalidArgument if `path` (stat()ed: through symlinks and hard links) is a
// file this process reads, naming both: "hot_set_path l1.json is the same file
// as l1.json, the rank manifest of table 'l1', which this process reads:
// writing it would replace that file". `what` names the output. A path that
// does not exist is no input.
Status CheckNotAnInput(const std::string& path, std::string_view what);

// The check every output written under a temporary name and renamed over
// `path` passes, before it is written and again right before the rename:
// InvalidArgument if `path` exists and is not a regular file (a directory, a
// FIFO, a device, a socket: the rename would replace the node itself, or fail
// after all the work), or if it is an input of this process
// (CheckNotAnInput). A missing path or a regular file that is no input is OK.
Status CheckOutputPath(const std::string& path, std::string_view what);

}  // namespace engram
