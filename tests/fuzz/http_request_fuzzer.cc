// Fuzz target: the metrics endpoint's request path (src/metrics/http_endpoint.*):
// raw bytes into Boost.Beast's request parser, configured exactly as the
// endpoint configures it (header limit 8 KiB, body limit 4 KiB), then
// RouteHttpRequest on what it parsed, as the endpoint does; and the same bytes
// as a --metrics-listen address (ParseListenAddress).
#include <string_view>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "src/metrics/http_endpoint.h"
#include "tests/fuzz/fuzz_util.h"

namespace engram::fuzz {

namespace http = boost::beast::http;

int FuzzHttpRequest(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto listen = ParseListenAddress(text);
  if (listen.ok()) FUZZ_CHECK(!listen->address.empty());

  const HttpEndpointOptions defaults;
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(defaults.max_header_bytes));
  parser.body_limit(4096);
  parser.eager(true);
  boost::beast::error_code ec;
  boost::asio::const_buffer buffer(data, size);
  while (buffer.size() > 0 && !parser.is_done()) {
    const size_t used = parser.put(buffer, ec);
    if (ec == http::error::need_more) {
      ec = {};
      break;
    }
    if (ec || used == 0) break;
    buffer += used;
  }
  if (!ec && !parser.is_done() && parser.got_some()) parser.put_eof(ec);
  if (ec || !parser.is_done()) return 0;
  const auto& req = parser.get();
  const std::string_view method(req.method_string().data(), req.method_string().size());
  const std::string_view target(req.target().data(), req.target().size());
  const RoutedRequest routed = RouteHttpRequest(method, target);
  const bool get_or_head = req.method() == http::verb::get || req.method() == http::verb::head;
  FUZZ_CHECK((routed.route == HttpRoute::kMethodNotAllowed) == !get_or_head);
  FUZZ_CHECK(!routed.head_only || req.method() == http::verb::head);
  if (routed.route == HttpRoute::kMetrics) FUZZ_CHECK(target.substr(0, 8) == "/metrics");
  if (routed.route == HttpRoute::kHealthz) FUZZ_CHECK(target.substr(0, 8) == "/healthz");
  (void)req.keep_alive();
  (void)req.version();
  return 0;
}

}  // namespace engram::fuzz

ENGRAM_FUZZ_TARGET(FuzzHttpRequest)
