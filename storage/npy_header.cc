#include "storage/npy_header.h"

#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "storage/byte_order.h"
#include "storage/file_util.h"

namespace engram {

namespace {

constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

Status Bad(const std::string& m) { return Status::Corruption("npy header: " + m); }

// A tiny reader for the dict literal numpy writes (and hand-written
// variants): quoted strings, True/False, tuples of integers.
class DictReader {
 public:
  explicit DictReader(std::string_view s) : s_(s) {}

  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == s_.size();
  }
  char Peek() {
    SkipSpace();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  std::optional<std::string> String() {
    SkipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return std::nullopt;
    char q = s_[pos_++];
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\') return std::nullopt;  // numpy never escapes in these fields
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) return std::nullopt;
    ++pos_;
    return out;
  }
  std::optional<bool> Bool() {
    SkipSpace();
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    return std::nullopt;
  }
  // A non-negative integer, optionally with Python 2's 'L' suffix.
  std::optional<uint64_t> Int() {
    SkipSpace();
    size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (__builtin_mul_overflow(v, uint64_t{10}, &v) ||
          __builtin_add_overflow(v, static_cast<uint64_t>(s_[pos_] - '0'), &v)) {
        return std::nullopt;
      }
      ++pos_;
    }
    if (pos_ == start) return std::nullopt;
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;
    return v;
  }
  // (a, b, ...) with an optional trailing comma; () is a 0-d array.
  std::optional<std::vector<uint64_t>> Tuple() {
    if (!Eat('(')) return std::nullopt;
    std::vector<uint64_t> out;
    while (!Eat(')')) {
      auto v = Int();
      if (!v) return std::nullopt;
      out.push_back(*v);
      if (!Eat(',')) {
        if (!Eat(')')) return std::nullopt;
        break;
      }
    }
    return out;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

// descr such as '<f4', '|u1', '|V264' -> (dtype name, element bytes).
Status ParseDescr(const std::string& descr, TensorInfo* t) {
  if (descr.size() < 3) return Bad("dtype descr '" + descr + "' is not of the form <kind><size>, e.g. '<f4'");
  char order = descr[0], kind = descr[1];
  uint64_t size = 0;
  for (size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || size > 1'000'000) return Bad("dtype descr '" + descr + "' is malformed");
    size = size * 10 + static_cast<uint64_t>(descr[i] - '0');
  }
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    return Bad("dtype descr '" + descr + "' has an unknown byte order '" + std::string(1, order) + "'");
  }
  if (size == 0 || size > 4088) return Status::Unsupported("npy header: dtype '" + descr + "' element size is not in [1, 4088]");
  if (order == '>' && size > 1) {
    return Status::Unsupported("npy header: big-endian dtype '" + descr +
                               "' is not supported; save the array as little-endian (arr.astype('<" +
                               descr.substr(1) + "'))");
  }
  std::string name;
  switch (kind) {
    case 'b': name = size == 1 ? "BOOL" : ""; break;
    case 'u': name = size == 1 ? "U8" : size == 2 ? "U16" : size == 4 ? "U32" : size == 8 ? "U64" : ""; break;
    case 'i': name = size == 1 ? "I8" : size == 2 ? "I16" : size == 4 ? "I32" : size == 8 ? "I64" : ""; break;
    case 'f': name = size == 2 ? "F16" : size == 4 ? "F32" : size == 8 ? "F64" : ""; break;
    case 'c': name = size == 8 ? "C64" : size == 16 ? "C128" : ""; break;
    // Appended rather than "V" + to_string(): GCC 12 warns (-Wrestrict, a
    // false positive) on the operator+ form in every build.
    case 'V': name.append("V").append(std::to_string(size)); break;  // raw bytes (e.g. ml_dtypes fp8/bf16 saved as void)
    case 'S': name.append("S").append(std::to_string(size)); break;
    default: break;
  }
  if (name.empty()) {
    return Status::Unsupported("npy header: dtype '" + descr + "' is not supported (numeric, bool or raw-byte dtypes only)");
  }
  t->dtype = name;
  t->element_bytes = static_cast<uint32_t>(size);
  return Status::OK();
}

}  // namespace

Result<uint64_t> NpyHeaderLength(std::span<const std::byte> prefix, uint64_t file_size) {
  if (prefix.size() < 10 || file_size < 10) return Bad("file is too short for an .npy header");
  if (std::memcmp(prefix.data(), kMagic, sizeof kMagic) != 0) return Bad("bad magic: not an .npy file");
  uint8_t major = static_cast<uint8_t>(prefix[6]);
  uint64_t total = 0;
  if (major == 1) {
    total = 10 + LoadLe16(prefix.data() + 8);
  } else if (major == 2 || major == 3) {
    if (prefix.size() < 12 || file_size < 12) return Bad("file is too short for an .npy v2/v3 header");
    total = 12 + uint64_t{LoadLe32(prefix.data() + 8)};
  } else {
    return Status::Unsupported("npy header: format version " + std::to_string(major) + "." +
                               std::to_string(static_cast<uint8_t>(prefix[7])) + " (1.0, 2.0 and 3.0 are supported)");
  }
  if (total > kNpyMaxHeaderBytes) return Bad("header length " + std::to_string(total) + " exceeds the 1 MiB limit");
  if (total > file_size) {
    return Bad("header length " + std::to_string(total) + " is past the end of the " + std::to_string(file_size) +
               "-byte file");
  }
  return total;
}

Result<TensorInfo> ParseNpyHeader(std::span<const std::byte> prefix, uint64_t file_size) {
  ENGRAM_ASSIGN_OR_RETURN(uint64_t total, NpyHeaderLength(prefix, file_size));
  if (prefix.size() < total) return Status::InvalidArgument("npy header: buffer is shorter than the header");
  size_t dict_start = static_cast<uint8_t>(prefix[6]) == 1 ? 10 : 12;
  std::string_view dict(reinterpret_cast<const char*>(prefix.data() + dict_start), total - dict_start);

  DictReader r(dict);
  if (!r.Eat('{')) return Bad("header is not a dict literal");
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<uint64_t>> shape;
  while (!r.Eat('}')) {
    auto key = r.String();
    if (!key) return Bad("expected a quoted key in the header dict");
    if (!r.Eat(':')) return Bad("expected ':' after key '" + *key + "'");
    if (*key == "descr") {
      if (r.Peek() == '[') {
        return Status::Unsupported("npy header: structured dtypes are not supported");
      }
      descr = r.String();
      if (!descr) return Bad("'descr' is not a quoted string");
    } else if (*key == "fortran_order") {
      fortran = r.Bool();
      if (!fortran) return Bad("'fortran_order' is not True or False");
    } else if (*key == "shape") {
      shape = r.Tuple();
      if (!shape) return Bad("'shape' is not a tuple of non-negative integers");
    } else {
      return Bad("unexpected key '" + *key + "' in the header dict");
    }
    if (!r.Eat(',')) {
      if (!r.Eat('}')) return Bad("expected ',' or '}' in the header dict");
      break;
    }
  }
  if (!r.AtEnd()) return Bad("unexpected bytes after the header dict");
  if (!descr || !fortran || !shape) return Bad("header dict lacks one of 'descr', 'fortran_order', 'shape'");
  if (*fortran) {
    return Status::Unsupported("npy header: fortran_order=True arrays are not supported; save a C-ordered array "
                               "(np.ascontiguousarray)");
  }
  TensorInfo t;
  ENGRAM_RETURN_IF_ERROR(ParseDescr(*descr, &t));
  t.shape = *shape;
  const std::optional<uint64_t> data_bytes = TensorDataBytes(t.element_bytes, t.shape);
  if (!data_bytes) return Bad("shape " + ShapeToString(t.shape) + " of '" + *descr + "' overflows 64 bits");
  const uint64_t bytes = *data_bytes;
  t.data_offset = total;
  t.data_bytes = bytes;
  if (file_size - total != bytes) {
    return Bad("shape " + ShapeToString(t.shape) + " of '" + *descr + "' needs " + std::to_string(bytes) +
               " data bytes but the file holds " + std::to_string(file_size - total) +
               (file_size - total < bytes ? " (truncated?)" : ""));
  }
  return t;
}

Result<TensorInfo> ReadNpyHeader(const std::string& path) {
  ENGRAM_ASSIGN_OR_RETURN(int raw_fd, fileutil::OpenReadOnly(path));
  fileutil::ScopedFd fd(raw_fd);
  ENGRAM_ASSIGN_OR_RETURN(uint64_t size, fileutil::FileSize(fd.get(), path));
  std::vector<std::byte> first(std::min<uint64_t>(size, 12));
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd.get(), first, 0, path));
  auto total = NpyHeaderLength(first, size);
  if (!total.ok()) return total.status().WithContext(path);
  std::vector<std::byte> prefix(*total);
  ENGRAM_RETURN_IF_ERROR(fileutil::PreadExact(fd.get(), prefix, 0, path));
  auto t = ParseNpyHeader(prefix, size);
  if (!t.ok()) return t.status().WithContext(path);
  t->name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  return t;
}

}  // namespace engram
