// A tiny blocking HTTP client over a real loopback socket, for tests of the
// metrics endpoint and of tools that serve it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace engram::testing {

// A connected socket to 127.0.0.1:port, or -1.
inline int Connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads a connected socket until the server closes it (or 5 s pass).
inline std::string ReadUntilClosed(int fd) {
  std::string out;
  char buf[4096];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

// Sends raw bytes, reads until the server closes (or 5 s pass).
inline std::string Exchange(uint16_t port, const std::string& request) {
  int fd = Connect(port);
  if (fd < 0) return "";
  if (!request.empty()) (void)!write(fd, request.data(), request.size());
  std::string out = ReadUntilClosed(fd);
  close(fd);
  return out;
}

inline std::string Get(uint16_t port, const std::string& path) {
  return Exchange(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

}  // namespace engram::testing
