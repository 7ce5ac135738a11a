#include "kvredis/redis_url.h"

#include <charconv>

namespace kvforge::kvredis {
namespace {

bool ParsePort(std::string_view text, int* port) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1 || v > 65535) return false;
  *port = v;
  return true;
}

// host[:port], with `default_port` when the port is left out. An IPv6 host is bracketed.
Result<RedisEndpoint> ParseHostPort(std::string_view text, bool port_required) {
  RedisEndpoint e;
  std::string_view host = text, port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos)
      return Status::InvalidArgument("redis url: unclosed '[' in '" + std::string(text) + "'");
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        return Status::InvalidArgument("redis url: junk after ']' in '" + std::string(text) + "'");
      port = rest.substr(1);
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return Status::InvalidArgument("redis url: put an IPv6 host in brackets ('" +
                                     std::string(text) + "')");
    if (port.empty())
      return Status::InvalidArgument("redis url: empty port in '" + std::string(text) + "'");
  }
  if (host.empty())
    return Status::InvalidArgument("redis url: no host in '" + std::string(text) + "'");
  e.host = std::string(host);
  if (port.empty()) {
    if (port_required)
      return Status::InvalidArgument("redis: no port in '" + std::string(text) + "'");
  } else if (!ParsePort(port, &e.port)) {
    return Status::InvalidArgument("redis url: bad port '" + std::string(port) + "'");
  }
  return e;
}

}  // namespace

Result<RedisEndpoint> ParseEndpoint(std::string_view text) { return ParseHostPort(text, true); }

Result<RedisUrl> ParseRedisUrl(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.substr(0, kScheme.size()) != kScheme)
    return Status::InvalidArgument("redis url must start with redis:// (got '" + std::string(url) +
                                   "')");
  std::string_view rest = url.substr(kScheme.size());
  RedisUrl out;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    if (const size_t colon = cred.find(':'); colon != std::string_view::npos) {
      out.user = std::string(cred.substr(0, colon));
      out.password = std::string(cred.substr(colon + 1));
    } else {
      out.password = std::string(cred);
    }
    if (out.password.empty())
      return Status::InvalidArgument("redis url: empty password before '@'");
  }
  std::string_view hosts = rest;
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    hosts = rest.substr(0, slash);
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      const auto [end, ec] = std::from_chars(db.data(), db.data() + db.size(), out.db);
      if (ec != std::errc() || end != db.data() + db.size() || out.db < 0)
        return Status::InvalidArgument("redis url: bad database number '" + std::string(db) + "'");
    }
  }
  while (!hosts.empty()) {
    const size_t comma = hosts.find(',');
    std::string_view one = hosts.substr(0, comma);
    KVF_ASSIGN_OR_RETURN(RedisEndpoint e, ParseHostPort(one, false));
    out.seeds.push_back(std::move(e));
    if (comma == std::string_view::npos) break;
    hosts = hosts.substr(comma + 1);
  }
  if (out.seeds.empty())
    return Status::InvalidArgument("redis url: no host in '" + std::string(url) + "'");
  return out;
}

}  // namespace kvforge::kvredis
