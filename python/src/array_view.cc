#include "python/src/array_view.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include <pybind11/numpy.h>

#include "python/src/dlpack_abi.h"

namespace py = pybind11;

namespace engram::python {
namespace {

// The element kind of a struct-module format string ("B", "<q", "=f", ...).
ElementKind KindOfFormat(const char* format) {
  if (format == nullptr) return ElementKind::kUnsignedInt;  // plain bytes
  const char* f = format;
  while (*f == '@' || *f == '=' || *f == '<' || *f == '>' || *f == '!') ++f;
  if (f[0] == '\0' || f[1] != '\0') return ElementKind::kOther;
  switch (f[0]) {
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': return ElementKind::kSignedInt;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': case 'c': return ElementKind::kUnsignedInt;
    case 'e': case 'f': case 'd': return ElementKind::kFloat;
    case '?': return ElementKind::kBool;
    default: return ElementKind::kOther;
  }
}

const char* KindName(ElementKind kind) {
  switch (kind) {
    case ElementKind::kSignedInt: return "int";
    case ElementKind::kUnsignedInt: return "uint";
    case ElementKind::kFloat: return "float";
    case ElementKind::kBool: return "bool";
    default: return "other";
  }
}

void DeleteManaged(void* managed) {
  auto* m = static_cast<DLManagedTensor*>(managed);
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
}

template <typename T>
void CopyAs(const ArrayView& v, std::vector<uint64_t>& out, const char* what) {
  const size_t n = v.size();
  out.resize(n);
  const auto& shape = v.shape();
  const auto& strides = v.strides();
  // Walk every element in row-major order through the byte strides.
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    const std::byte* p = v.data();
    for (size_t d = 0; d < shape.size(); ++d) p += index[d] * strides[d];
    T value;
    std::memcpy(&value, p, sizeof(T));
    if constexpr (std::numeric_limits<T>::is_signed) {
      if (value < 0) throw py::value_error(std::string(what) + ": negative ID " + std::to_string(value) +
                                           " at position " + std::to_string(i));
    }
    out[i] = static_cast<uint64_t>(value);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

ArrayView ArrayView::Borrow(py::handle obj, bool writable, const char* what) {
  ArrayView v;
  if (py::isinstance<py::array>(obj)) {
    // numpy arrays: read the array's own fields (no buffer export, which
    // costs about as much as a small gather's lookups).
    auto array = py::reinterpret_borrow<py::array>(obj);
    if (writable && !array.writeable()) {
      throw py::value_error(std::string(what) + " is read-only: it must be a writable array");
    }
    const auto* descr = py::detail::array_descriptor_proxy(py::detail::array_proxy(obj.ptr())->descr);
    v.kind_ = descr->kind == 'i'   ? ElementKind::kSignedInt
              : descr->kind == 'u' ? ElementKind::kUnsignedInt
              : descr->kind == 'f' ? ElementKind::kFloat
              : descr->kind == 'b' ? ElementKind::kBool
                                   : ElementKind::kOther;
    v.itemsize_ = static_cast<size_t>(descr->elsize);
    v.data_ = static_cast<std::byte*>(const_cast<void*>(array.data()));
    const py::ssize_t ndim = array.ndim();
    v.shape_.assign(array.shape(), array.shape() + ndim);
    v.strides_.assign(array.strides(), array.strides() + ndim);
    v.array_ = std::move(array);
    v.FinishLayout();
    return v;
  }
  if (PyObject_CheckBuffer(obj.ptr())) {
    int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), &v.buffer_, flags) != 0) {
      PyErr_Clear();
      // Tell a read-only buffer apart from one that cannot be described.
      if (writable && PyObject_GetBuffer(obj.ptr(), &v.buffer_, PyBUF_STRIDES | PyBUF_FORMAT) == 0) {
        PyBuffer_Release(&v.buffer_);
        throw py::value_error(std::string(what) + " is read-only: it must be a writable buffer");
      }
      PyErr_Clear();
      throw py::value_error(std::string(what) + ": its buffer cannot be read as a strided array");
    }
    v.has_buffer_ = true;
    v.data_ = static_cast<std::byte*>(v.buffer_.buf);
    v.itemsize_ = static_cast<size_t>(v.buffer_.itemsize);
    v.kind_ = KindOfFormat(v.buffer_.format);
    for (int d = 0; d < v.buffer_.ndim; ++d) {
      v.shape_.push_back(v.buffer_.shape[d]);
      v.strides_.push_back(v.buffer_.strides ? v.buffer_.strides[d] : 0);
    }
    if (v.buffer_.ndim == 0) {  // a scalar-like buffer: treat as 1-D of len bytes / itemsize
      v.shape_.push_back(v.buffer_.len / std::max<Py_ssize_t>(1, v.buffer_.itemsize));
      v.strides_.push_back(v.buffer_.itemsize);
    }
    if (v.buffer_.strides == nullptr) v.strides_.clear();
    v.FinishLayout();
    return v;
  }
  if (py::hasattr(obj, "__dlpack__")) {
    py::object capsule;
    try {
      capsule = obj.attr("__dlpack__")();
    } catch (py::error_already_set& e) {
      // torch refuses to export bool tensors (and tensors that need grad).
      throw py::type_error(std::string(what) + ": " + TypeName(obj) + " cannot be borrowed through DLPack: " +
                           std::string(py::str(e.value())));
    }
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (managed == nullptr) {
      PyErr_Clear();
      throw py::value_error(std::string(what) + ": __dlpack__ did not return a DLPack capsule");
    }
    // Consumed: the capsule no longer deletes the tensor; this view does.
    PyCapsule_SetName(capsule.ptr(), "used_dltensor");
    v.capsule_ = std::move(capsule);
    v.managed_ = managed;
    const DLTensor& t = managed->dl_tensor;
    if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
      throw py::value_error(std::string(what) + " is not in host memory (DLPack device type " +
                            std::to_string(t.device.device_type) + "); pass a CPU tensor");
    }
    if (t.dtype.lanes != 1 || t.dtype.bits % 8 != 0) {
      throw py::value_error(std::string(what) + ": unsupported DLPack dtype");
    }
    v.data_ = static_cast<std::byte*>(t.data) + t.byte_offset;
    v.itemsize_ = t.dtype.bits / 8;
    v.kind_ = t.dtype.code == kDLInt    ? ElementKind::kSignedInt
              : t.dtype.code == kDLUInt ? ElementKind::kUnsignedInt
              : t.dtype.code == kDLFloat ? ElementKind::kFloat
              : t.dtype.code == kDLBool  ? ElementKind::kBool
                                         : ElementKind::kOther;
    for (int d = 0; d < t.ndim; ++d) {
      v.shape_.push_back(t.shape[d]);
      if (t.strides != nullptr) v.strides_.push_back(t.strides[d] * int64_t(v.itemsize_));
    }
    v.FinishLayout();
    return v;
  }
  throw py::value_error(std::string(what) + " must be an array (numpy, torch CPU tensor, buffer or DLPack), not " +
                        TypeName(obj));
}

std::string TypeName(py::handle obj) { return Py_TYPE(obj.ptr())->tp_name; }

void ArrayView::FinishLayout() {
  // Fill compact strides where none were given, then check contiguity
  // (dimensions of extent 1 may have any stride; an empty array has no
  // element out of place, whatever strides its exporter reports).
  if (strides_.empty()) {
    strides_.assign(shape_.size(), 0);
    int64_t s = int64_t(itemsize_);
    for (size_t d = shape_.size(); d-- > 0;) {
      strides_[d] = s;
      s *= shape_[d];
    }
  }
  int64_t expected = int64_t(itemsize_);
  contiguous_ = true;
  for (size_t d = shape_.size(); d-- > 0;) {
    if (shape_[d] != 1 && strides_[d] != expected) contiguous_ = false;
    expected *= shape_[d];
  }
  if (size() == 0) contiguous_ = true;
}

ArrayView::ArrayView(ArrayView&& o) noexcept
    : buffer_(o.buffer_),
      has_buffer_(std::exchange(o.has_buffer_, false)),
      array_(std::move(o.array_)),
      capsule_(std::move(o.capsule_)),
      managed_(std::exchange(o.managed_, nullptr)),
      data_(o.data_),
      kind_(o.kind_),
      itemsize_(o.itemsize_),
      shape_(std::move(o.shape_)),
      strides_(std::move(o.strides_)),
      contiguous_(o.contiguous_) {}

ArrayView::~ArrayView() {
  if (has_buffer_) PyBuffer_Release(&buffer_);
  DeleteManaged(managed_);
}

size_t ArrayView::size() const {
  size_t n = 1;
  for (int64_t s : shape_) n *= size_t(s);
  return n;
}

std::string ArrayView::Describe() const {
  std::string s = std::string(KindName(kind_)) + std::to_string(itemsize_ * 8) + "[";
  for (size_t d = 0; d < shape_.size(); ++d) s += (d ? ", " : "") + std::to_string(shape_[d]);
  return s + "]";
}

RowIds::RowIds(py::handle obj, const char* what) : view_(ArrayView::Borrow(obj, /*writable=*/false, what)) {
  size_ = view_.size();
  const size_t w = view_.itemsize();
  if (view_.kind() == ElementKind::kUnsignedInt && w == 8 && view_.contiguous()) {
    data_ = reinterpret_cast<const uint64_t*>(view_.data());
    return;
  }
  // int64 (torch's index type, what a GPU kernel writing IDs usually
  // makes): read in place when none is negative, as uint64 has the same
  // bits for those.
  if (view_.kind() == ElementKind::kSignedInt && w == 8 && view_.contiguous()) {
    const int64_t* ids = reinterpret_cast<const int64_t*>(view_.data());
    int64_t lowest = 0;
    for (size_t i = 0; i < size_; ++i) lowest = std::min(lowest, ids[i]);
    if (lowest >= 0) {
      data_ = reinterpret_cast<const uint64_t*>(ids);
      return;
    }
  }
  switch (view_.kind()) {
    case ElementKind::kUnsignedInt:
      if (w == 1) CopyAs<uint8_t>(view_, copy_, what);
      else if (w == 2) CopyAs<uint16_t>(view_, copy_, what);
      else if (w == 4) CopyAs<uint32_t>(view_, copy_, what);
      else if (w == 8) CopyAs<uint64_t>(view_, copy_, what);
      else throw py::value_error(std::string(what) + ": unsupported integer width");
      break;
    case ElementKind::kSignedInt:
      if (w == 1) CopyAs<int8_t>(view_, copy_, what);
      else if (w == 2) CopyAs<int16_t>(view_, copy_, what);
      else if (w == 4) CopyAs<int32_t>(view_, copy_, what);
      else if (w == 8) CopyAs<int64_t>(view_, copy_, what);
      else throw py::value_error(std::string(what) + ": unsupported integer width");
      break;
    case ElementKind::kBool:
      throw py::type_error(std::string(what) + " must hold integers, not bools (got " + view_.Describe() + ")");
    default:
      throw py::value_error(std::string(what) + " must hold integers, got " + view_.Describe());
  }
  data_ = copy_.data();
}

std::vector<uint32_t> TokenIds(py::handle obj, const char* what) {
  std::vector<uint32_t> tokens;
  if (obj.is_none()) return tokens;
  if (!PyObject_CheckBuffer(obj.ptr()) && !py::hasattr(obj, "__dlpack__")) {
    if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj)) {
      throw py::type_error(std::string(what) + " must be an integer array or a sequence of ints, not " +
                           TypeName(obj));
    }
    size_t position = 0;
    for (py::handle item : obj) {
      const std::string at = " at position " + std::to_string(position++);
      // True is an int to Python, and numpy's bool_ still converts to one.
      if (PyBool_Check(item.ptr()) || std::string(TypeName(item)) == "numpy.bool_") {
        throw py::type_error(std::string(what) + " must hold ints, not bools (" + std::string(py::repr(item)) + at +
                             ")");
      }
      if (!py::isinstance<py::int_>(item)) {
        throw py::value_error(std::string(what) + " must hold ints, got " + TypeName(item) + at);
      }
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(item.ptr(), &overflow);
      if (overflow != 0 || v < 0 || v > 0xffffffffLL) {
        throw py::value_error(std::string(what) + ": token " + std::string(py::str(item)) + at + " is not a uint32");
      }
      tokens.push_back(static_cast<uint32_t>(v));
    }
    return tokens;
  }
  RowIds ids(obj, what);
  tokens.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids.data()[i] > 0xffffffffull) {
      throw py::value_error(std::string(what) + ": token " + std::to_string(ids.data()[i]) + " at position " +
                            std::to_string(i) + " is not a uint32");
    }
    tokens[i] = static_cast<uint32_t>(ids.data()[i]);
  }
  return tokens;
}

namespace {

// Token `position` of a Python sequence, checked as TokenIds checks it.
uint32_t TokenOfItem(py::handle item, size_t position, const char* what) {
  const std::string at = " at position " + std::to_string(position);
  // True is an int to Python, and numpy's bool_ still converts to one.
  if (PyBool_Check(item.ptr()) || std::string(TypeName(item)) == "numpy.bool_") {
    throw py::type_error(std::string(what) + " must hold ints, not bools (" + std::string(py::repr(item)) + at + ")");
  }
  if (!py::isinstance<py::int_>(item)) throw py::value_error(std::string(what) + " must hold ints, got " + TypeName(item) + at);
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(item.ptr(), &overflow);
  if (overflow != 0 || v < 0 || v > 0xffffffffLL) {
    throw py::value_error(std::string(what) + ": token " + std::string(py::str(item)) + at + " is not a uint32");
  }
  return static_cast<uint32_t>(v);
}

// Element `i` (in row-major order) of an integer array, checked as
// TokenIds (through RowIds) checks it.
uint32_t TokenOfElement(const ArrayView& v, size_t i, const char* what) {
  const std::byte* p = v.data();
  size_t rest = i;
  for (size_t d = v.shape().size(); d-- > 0;) {
    const size_t extent = size_t(v.shape()[d]);
    p += int64_t(rest % extent) * v.strides()[d];
    rest /= extent;
  }
  uint64_t value = 0;
  auto read = [&](auto typed) {
    decltype(typed) x;
    std::memcpy(&x, p, sizeof x);
    if constexpr (std::numeric_limits<decltype(typed)>::is_signed) {
      if (x < 0) {
        throw py::value_error(std::string(what) + ": negative ID " + std::to_string(x) + " at position " +
                              std::to_string(i));
      }
    }
    value = static_cast<uint64_t>(x);
  };
  const size_t w = v.itemsize();
  if (v.kind() == ElementKind::kUnsignedInt && (w == 1 || w == 2 || w == 4 || w == 8)) {
    if (w == 1) read(uint8_t{});
    else if (w == 2) read(uint16_t{});
    else if (w == 4) read(uint32_t{});
    else read(uint64_t{});
  } else if (v.kind() == ElementKind::kSignedInt && (w == 1 || w == 2 || w == 4 || w == 8)) {
    if (w == 1) read(int8_t{});
    else if (w == 2) read(int16_t{});
    else if (w == 4) read(int32_t{});
    else read(int64_t{});
  } else if (v.kind() == ElementKind::kBool) {
    throw py::type_error(std::string(what) + " must hold integers, not bools (got " + v.Describe() + ")");
  } else if (v.kind() == ElementKind::kSignedInt || v.kind() == ElementKind::kUnsignedInt) {
    throw py::value_error(std::string(what) + ": unsupported integer width");
  } else {
    throw py::value_error(std::string(what) + " must hold integers, got " + v.Describe());
  }
  if (value > 0xffffffffull) {
    throw py::value_error(std::string(what) + ": token " + std::to_string(value) + " at position " +
                          std::to_string(i) + " is not a uint32");
  }
  return static_cast<uint32_t>(value);
}

}  // namespace

HistoryTokens::HistoryTokens(py::handle obj, const char* what, size_t keep) {
  if (obj.is_none()) return;
  std::optional<ArrayView> view;
  if (PyObject_CheckBuffer(obj.ptr()) || py::hasattr(obj, "__dlpack__")) {
    view.emplace(ArrayView::Borrow(obj, /*writable=*/false, what));
    size_ = view->size();
  } else {
    if (!py::isinstance<py::sequence>(obj) || py::isinstance<py::str>(obj)) {
      throw py::type_error(std::string(what) + " must be an integer array or a sequence of ints, not " +
                           TypeName(obj));
    }
    size_ = py::len(obj);
  }
  if (size_ == 0) return;
  data_.reset(static_cast<uint32_t*>(std::calloc(size_, sizeof(uint32_t))));
  if (data_ == nullptr) throw std::bad_alloc();
  const size_t first = size_ - std::min(keep, size_);
  if (view) {
    for (size_t i = first; i < size_; ++i) data_[i] = TokenOfElement(*view, i, what);
    return;
  }
  py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
  for (size_t i = first; i < size_; ++i) data_[i] = TokenOfItem(seq[i], i, what);
}

}  // namespace engram::python
