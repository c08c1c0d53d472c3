// Temporary files that an interrupted tool must not leave behind.
//
// TableWriter builds a table under a temporary name (tens to hundreds of MB
// before the final rename). Its destructor deletes the file, but Ctrl-C or
// SIGTERM kills the process without running destructors. So writers register
// their temporary files here, and a tool that wants them removed on those
// signals calls RemoveTempFilesOnTerminationSignals() once at startup.
//
// The library never installs signal handlers by itself: an embedding runtime
// owns its process's signals. Registering is cheap and harmless when no
// handler is installed.
//
// Besides temporary files, a writer may register finished files that must go
// too until something else commits them: a rank conversion registers each
// rank table it has written until its manifest is renamed into place.
//
// Limit: SIGKILL (kill -9), a power loss or a crash cannot be intercepted and
// still leave the temporary file (named .<table>.tmp-XXXXXX next to the
// table; it never opens as a table). The next writer of the same output
// removes it (fileutil::RemoveStaleTempFiles).
#pragma once

#include <csignal>
#include <string>

namespace engram {

// Registers `path` for removal by the signal handler; returns a token for
// UnregisterTempFile, or -1 if the registry is full or the path too long (the
// file is then only removed by its owner, as before).
int RegisterTempFile(const std::string& path);

// Forgets a registration (a no-op for -1). Call it once the file is gone or
// renamed into place.
void UnregisterTempFile(int token);

// Installs handlers for SIGINT, SIGTERM and SIGHUP that delete every
// registered temporary file, then let the signal kill the process as it
// would have without the handler (so the exit status is still 128+signal). A
// signal that was ignored when this is called (nohup, a background job of a
// non-interactive shell) stays ignored. For tools' main(); call it once.
void RemoveTempFilesOnTerminationSignals();

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread while it lives, so
// that a commit -- a rename into place and the unregistering of the files it
// makes permanent -- is never split by the removal handler: a signal that
// arrives meanwhile is delivered once the commit is whole. (A signal that
// another thread of the process takes is not held back.)
class TerminationSignalsDeferred {
 public:
  TerminationSignalsDeferred();
  ~TerminationSignalsDeferred();
  TerminationSignalsDeferred(const TerminationSignalsDeferred&) = delete;
  TerminationSignalsDeferred& operator=(const TerminationSignalsDeferred&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace engram
