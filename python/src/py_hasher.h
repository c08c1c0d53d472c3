// The Python-facing Hasher: engram::NgramHasher over a layout file's layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "engram/hasher.h"

namespace engram::python {

class PyHasher {
 public:
  // layer: index into the layout file's "layers" (as engram-hash --layer).
  // slots: the slots hashed (a rank's, ascending); empty = all of them.
  PyHasher(const std::string& layout_path, uint32_t layer, pybind11::handle token_map, std::vector<uint32_t> slots);

  // [len(tokens), rows_per_token] uint64 row IDs, as engram-hash --layer.
  pybind11::array_t<uint64_t> RowIds(pybind11::handle tokens, pybind11::handle history) const;

  const NgramHasher& hasher() const { return hasher_; }

 private:
  NgramHasher hasher_;
};

}  // namespace engram::python
