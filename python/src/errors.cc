#include "python/src/errors.h"

namespace py = pybind11;

namespace engram::python {
namespace {

PyObject* corruption_error = nullptr;

PyObject* ExceptionType(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return PyExc_ValueError;
    case StatusCode::kNotFound:
      return PyExc_FileNotFoundError;
    case StatusCode::kCorruption:
      return corruption_error;
    case StatusCode::kIOError:
    case StatusCode::kUnsupported:
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
      return PyExc_OSError;
    case StatusCode::kDeadlineExceeded:
      return PyExc_TimeoutError;
    default:
      return PyExc_RuntimeError;
  }
}

}  // namespace

void RegisterErrors(py::module_& m) {
  corruption_error = PyErr_NewExceptionWithDoc(
      "engram_store.CorruptionError",
      "A block of a table failed its checksum (or a file failed validation). A subclass of OSError; nothing "
      "unverified was returned or cached.",
      PyExc_OSError, nullptr);
  if (corruption_error == nullptr) throw py::error_already_set();
  m.add_object("CorruptionError", py::handle(corruption_error));
}

void RaiseStatus(const Status& status, const std::vector<size_t>* failed_positions) {
  py::object type = py::reinterpret_borrow<py::object>(ExceptionType(status.code()));
  py::object error = type(py::str(status.ToString()));
  error.attr("code") = py::str(StatusCodeName(status.code()));
  if (failed_positions != nullptr) {
    py::list positions;
    for (size_t p : *failed_positions) positions.append(p);
    error.attr("failed_positions") = positions;
  }
  PyErr_SetObject(type.ptr(), error.ptr());
  throw py::error_already_set();
}

}  // namespace engram::python
