/* CHECK for the C API's tests in C: counts a failed condition in `failures`
 * (which the test defines and returns on) and prints it with the calling
 * thread's engram_last_error(), so one run lists every failed check. */
#ifndef ENGRAM_TESTS_TESTING_CAPI_CHECK_H_
#define ENGRAM_TESTS_TESTING_CAPI_CHECK_H_

#include <stdio.h>

#include "engram/engram.h"

static int failures = 0;
#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n",   \
              __FILE__, __LINE__, #cond, engram_last_error());        \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

#endif /* ENGRAM_TESTS_TESTING_CAPI_CHECK_H_ */
