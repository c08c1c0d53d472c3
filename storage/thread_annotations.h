// Clang's thread-safety annotations (-Wthread-safety): what a mutex guards,
// which locks a function needs, takes or must not hold, in a form the
// compiler checks rather than in comments. Other compilers ignore them.
// The store's CI builds the libraries with Clang and -Wthread-safety -Werror
// (scripts/thread_safety_check.sh), so a guarded field touched without its
// lock fails the build.
//
// Annotated code locks engram::Mutex (storage/mutex.h): libstdc++'s
// std::mutex carries no annotations, so the analysis cannot see it.
// The names are those of Clang's documentation (and of LevelDB and Abseil),
// each defined only if nothing defined it before.
#pragma once

#if defined(__clang__)
#define ENGRAM_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define ENGRAM_THREAD_ANNOTATION(x)
#endif

// A class whose objects are locks (a mutex).
#ifndef CAPABILITY
#define CAPABILITY(x) ENGRAM_THREAD_ANNOTATION(capability(x))
#endif
// A class whose objects hold a lock for their lifetime (a lock guard).
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY ENGRAM_THREAD_ANNOTATION(scoped_lockable)
#endif
// A member only read or written while holding the lock x.
#ifndef GUARDED_BY
#define GUARDED_BY(x) ENGRAM_THREAD_ANNOTATION(guarded_by(x))
#endif
// A pointer whose target is only read or written while holding the lock x.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) ENGRAM_THREAD_ANNOTATION(pt_guarded_by(x))
#endif
// A lock taken before (after) the listed ones whenever both are held.
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) ENGRAM_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#endif
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) ENGRAM_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#endif
// The caller must hold the listed locks.
#ifndef REQUIRES
#define REQUIRES(...) ENGRAM_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#endif
// The function takes (releases) the listed locks; with no argument, `this`.
#ifndef ACQUIRE
#define ACQUIRE(...) ENGRAM_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) ENGRAM_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#endif
// The caller must not hold the listed locks (the function takes them).
#ifndef EXCLUDES
#define EXCLUDES(...) ENGRAM_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#endif
// The function checks at run time that the lock is held; the analysis then
// assumes it is.
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) ENGRAM_THREAD_ANNOTATION(assert_capability(x))
#endif
// The function returns a reference to the lock x.
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) ENGRAM_THREAD_ANNOTATION(lock_returned(x))
#endif
// Turns the analysis off for one function; say why wherever it is used.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS ENGRAM_THREAD_ANNOTATION(no_thread_safety_analysis)
#endif
