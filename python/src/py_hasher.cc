#include "python/src/py_hasher.h"

#include <vector>

#include "python/src/array_view.h"
#include "python/src/errors.h"
#include "python/src/py_store.h"

namespace py = pybind11;

namespace engram::python {
namespace {

NgramHasher Create(const std::string& layout_path, uint32_t layer, py::handle token_map,
                   std::vector<uint32_t> slots) {
  EngramHashLayout layout = ValueOrRaise(EngramHashLayout::FromFile(layout_path, layer));
  return ValueOrRaise(NgramHasher::Create(std::move(layout), TokenMapArgument(token_map), std::move(slots)));
}

}  // namespace

PyHasher::PyHasher(const std::string& layout_path, uint32_t layer, py::handle token_map,
                   std::vector<uint32_t> slots)
    : hasher_(Create(layout_path, layer, token_map, std::move(slots))) {}

py::array_t<uint64_t> PyHasher::RowIds(py::handle tokens, py::handle history) const {
  const std::vector<uint32_t> step = TokenIds(tokens, "tokens");
  const HistoryTokens before(history, "history", hasher_.history_tokens());
  const size_t per_token = hasher_.rows_per_token();
  py::array_t<uint64_t> out({step.size(), size_t(per_token)});
  uint64_t* data = out.mutable_data();
  Status st;
  {
    py::gil_scoped_release release;
    st = hasher_.Hash(before.span(), step, std::span<uint64_t>(data, step.size() * per_token));
  }
  ThrowIfError(st);
  return out;
}

}  // namespace engram::python
