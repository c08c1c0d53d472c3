// ArrayView: a borrowed view of a caller's array -- anything with the buffer
// protocol (numpy, bytearray, memoryview, ...) or with __dlpack__ (torch
// tensors on the CPU, pinned or not) -- without copying it.
//
// The view keeps what it borrowed alive (the Py_buffer or the DLPack
// capsule) until it is destroyed; destroy it with the GIL held.
#pragma once

#include <Python.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

namespace engram::python {

enum class ElementKind { kSignedInt, kUnsignedInt, kFloat, kBool, kOther };

class ArrayView {
 public:
  // Borrows `obj`. writable: the caller will write into it (a read-only
  // buffer is a ValueError naming `what`). Throws ValueError if obj is
  // neither a buffer nor a CPU DLPack tensor.
  static ArrayView Borrow(pybind11::handle obj, bool writable, const char* what);

  ArrayView(ArrayView&& other) noexcept;
  ArrayView& operator=(ArrayView&&) = delete;
  ArrayView(const ArrayView&) = delete;
  ~ArrayView();

  std::byte* data() const { return data_; }
  ElementKind kind() const { return kind_; }
  size_t itemsize() const { return itemsize_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t size() const;  // elements
  // Row-major contiguous: element i at data() + i * itemsize().
  bool contiguous() const { return contiguous_; }
  // Byte strides per dimension.
  const std::vector<int64_t>& strides() const { return strides_; }
  // "uint8[24, 264]"
  std::string Describe() const;
  // Borrowed through __dlpack__ (a torch tensor): the capsule pins the
  // tensor, but not its memory, which Tensor.resize_() may reallocate.
  bool from_dlpack() const { return managed_ != nullptr; }

 private:
  ArrayView() = default;
  void FinishLayout();

  Py_buffer buffer_{};
  bool has_buffer_ = false;
  pybind11::object array_;    // a numpy array, read through its own fields
  pybind11::object capsule_;  // the consumed DLPack capsule (owns the tensor)
  void* managed_ = nullptr;   // DLManagedTensor*, deleted with the view
  std::byte* data_ = nullptr;
  ElementKind kind_ = ElementKind::kOther;
  size_t itemsize_ = 0;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  bool contiguous_ = true;
};

// Row IDs from any integer array, as uint64 (copied once when the array is
// not already contiguous uint64/int64). Negative IDs are a ValueError, a
// bool array a TypeError.
class RowIds {
 public:
  RowIds(pybind11::handle obj, const char* what);
  const uint64_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::vector<int64_t>& shape() const { return view_.shape(); }

 private:
  ArrayView view_;
  std::vector<uint64_t> copy_;
  const uint64_t* data_ = nullptr;
  size_t size_ = 0;
};

// Token IDs (uint32) from any integer array or a Python sequence of ints;
// None = empty. A value outside uint32 is a ValueError naming its position;
// bools (True is an int to Python) and str are a TypeError.
std::vector<uint32_t> TokenIds(pybind11::handle obj, const char* what);

// A request's history tokens, of which a hasher reads only the last `keep`
// (NgramHasher::history_tokens()): only those are converted and checked
// (errors name their positions in the whole history, as TokenIds does), and
// the others read as 0, so a long history costs what a short one does. The
// span has the history's full length, as the hasher's positions count from
// its start. Holds no Python object: it may outlive the GIL.
class HistoryTokens {
 public:
  HistoryTokens() = default;
  HistoryTokens(pybind11::handle obj, const char* what, size_t keep);
  std::span<const uint32_t> span() const { return {data_.get(), size_}; }

 private:
  struct Free {
    void operator()(uint32_t* p) const { std::free(p); }
  };
  // calloc: a long history's pages are the kernel's zero pages, never
  // written (only the last few tokens are).
  std::unique_ptr<uint32_t[], Free> data_;
  size_t size_ = 0;
};

// The type name of obj for an error message ("numpy.ndarray", "Tensor").
std::string TypeName(pybind11::handle obj);

}  // namespace engram::python
