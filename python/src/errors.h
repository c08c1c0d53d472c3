// Store Status -> Python exception:
//   InvalidArgument, OutOfRange         -> ValueError
//   NotFound                            -> FileNotFoundError
//   Corruption                          -> engram_store.CorruptionError (an OSError)
//   IOError, Unsupported, ResourceExhausted -> OSError
//   Cancelled, Internal                 -> RuntimeError
// The message is the status text ("Corruption: table t block 12: checksum
// mismatch"); the exception's `code` attribute is the status code's name.
#pragma once

#include <cstddef>
#include <vector>

#include <pybind11/pybind11.h>

#include "engram/status.h"

namespace engram::python {

// Creates engram_store.CorruptionError in `m`.
void RegisterErrors(pybind11::module_& m);

// Throws the exception for a failed status (with the GIL held);
// failed_positions, when given, becomes the exception's attribute of that name.
[[noreturn]] void RaiseStatus(const Status& status, const std::vector<size_t>* failed_positions = nullptr);

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) RaiseStatus(status);
}

template <typename T>
T ValueOrRaise(Result<T> result) {
  if (!result.ok()) RaiseStatus(result.status());
  return std::move(result).value();
}

}  // namespace engram::python
