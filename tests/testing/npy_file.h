// Test helper: .npy files assembled byte by byte, as numpy lays them out,
// independent of any reader in this repository.
#pragma once

#include <string>

namespace engram::testing {

// numpy's layout: magic, version, little-endian header length, then the dict
// padded with spaces and a final '\n' so data starts 64-byte aligned.
inline std::string Npy(const std::string& dict, const std::string& data, int major = 1) {
  size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + header + data;
}

inline std::string Dict(const std::string& descr, const std::string& shape, const char* fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

}  // namespace engram::testing
