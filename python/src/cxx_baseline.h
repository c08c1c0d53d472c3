// The same work done by C++ callers, timed in C++: the baselines
// bench/python_overhead.py compares the binding against, in the same process
// and on the same store.
#pragma once

#include <pybind11/pybind11.h>

namespace engram::python {

// Adds _cxx_gather_seconds and _cxx_hash_gather_seconds to the module.
void BindCxxBaselines(pybind11::module_& m);

}  // namespace engram::python
