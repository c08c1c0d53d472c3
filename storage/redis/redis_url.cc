#include "storage/redis/redis_url.h"

#include <cstdlib>

namespace engram::redis {
namespace {

constexpr std::string_view kScheme = "redis://";
constexpr size_t kMaxNameBytes = 200;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding of the user and password, so that ':', '@' and '/' can
// be part of them.
Result<std::string> PercentDecode(std::string_view text, const char* what) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    const int hi = i + 2 < text.size() ? HexValue(text[i + 1]) : -1;
    const int lo = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      return Status::InvalidArgument(std::string("redis URL: the ") + what + " has a '%' not followed by two hex digits");
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

const char* GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

std::string NodeAddress::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<NodeAddress> ParseNodeAddress(std::string_view text) {
  NodeAddress a;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Status::InvalidArgument("redis node '" + std::string(text) + "': expected [IPV6]:PORT");
    }
    a.host = std::string(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return Status::InvalidArgument("redis node '" + std::string(text) + "': expected HOST:PORT");
    }
    a.host = std::string(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  if (a.host.empty()) return Status::InvalidArgument("redis node '" + std::string(text) + "': no host");
  uint32_t value = 0;
  if (port.empty() || port.size() > 5) {
    return Status::InvalidArgument("redis node '" + std::string(text) + "': the port must be 1..65535");
  }
  for (char c : port) {
    if (c < '0' || c > '9') return Status::InvalidArgument("redis node '" + std::string(text) + "': the port must be 1..65535");
    value = value * 10 + uint32_t(c - '0');
  }
  if (value == 0 || value > 65535) {
    return Status::InvalidArgument("redis node '" + std::string(text) + "': the port must be 1..65535");
  }
  a.port = static_cast<uint16_t>(value);
  return a;
}

std::string RedisUrl::Display() const {
  std::string out(kScheme);
  for (size_t i = 0; i < seeds.size(); ++i) {
    if (i != 0) out += ',';
    out += seeds[i].ToString();
  }
  out += '/';
  out += name;
  return out;
}

bool IsRedisUrl(std::string_view path) { return path.substr(0, kScheme.size()) == kScheme; }

Status CheckTableName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return Status::InvalidArgument("redis table name must have 1.." + std::to_string(kMaxNameBytes) + " characters");
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) {
      return Status::InvalidArgument("redis table name '" + std::string(name) +
                                     "': only letters, digits, '.', '_' and '-' (it is part of every key)");
    }
  }
  return Status::OK();
}

Result<RedisUrl> ParseRedisUrl(std::string_view url) {
  if (!IsRedisUrl(url)) return Status::InvalidArgument("not a redis URL (redis://HOST:PORT[,HOST:PORT...]/NAME)");
  std::string_view rest = url.substr(kScheme.size());
  RedisUrl out;
  // The credentials end at the last '@' before the path: a percent-encoded
  // password has none, a raw one might.
  const size_t slash = rest.find('/', rest.rfind('@') == std::string_view::npos ? 0 : rest.rfind('@'));
  if (slash == std::string_view::npos) {
    return Status::InvalidArgument("redis URL without a table name: redis://HOST:PORT[,HOST:PORT...]/NAME");
  }
  std::string_view authority = rest.substr(0, slash);
  const std::string_view name = rest.substr(slash + 1);
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const size_t colon = userinfo.find(':');
    ENGRAM_ASSIGN_OR_RETURN(out.user, PercentDecode(userinfo.substr(0, colon), "user"));
    if (colon != std::string_view::npos) {
      ENGRAM_ASSIGN_OR_RETURN(out.password, PercentDecode(userinfo.substr(colon + 1), "password"));
    }
  }
  if (authority.empty()) return Status::InvalidArgument("redis URL names no node: redis://HOST:PORT[,...]/NAME");
  for (size_t begin = 0; begin <= authority.size();) {
    size_t comma = authority.find(',', begin);
    if (comma == std::string_view::npos) comma = authority.size();
    ENGRAM_ASSIGN_OR_RETURN(NodeAddress a, ParseNodeAddress(authority.substr(begin, comma - begin)));
    out.seeds.push_back(std::move(a));
    begin = comma + 1;
  }
  ENGRAM_RETURN_IF_ERROR(CheckTableName(name));
  out.name = std::string(name);
  if (out.user.empty()) {
    if (const char* u = GetEnv(kUserEnv)) out.user = u;
  }
  if (out.password.empty()) {
    if (const char* p = GetEnv(kPasswordEnv)) out.password = p;
  }
  if (!out.user.empty() && out.password.empty()) {
    return Status::InvalidArgument("redis URL gives user '" + out.user + "' but no password (in the URL or " +
                                   kPasswordEnv + ")");
  }
  return out;
}

}  // namespace engram::redis
