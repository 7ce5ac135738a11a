#include "kvredis/cluster_slots.h"

#include <algorithm>
#include <charconv>

namespace kvforge::kvredis {

uint16_t Crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char c : bytes) {
    crc ^= static_cast<uint16_t>(c << 8);
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<uint16_t>(crc << 1);
  }
  return crc;
}

std::string_view HashTag(std::string_view key) {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

int KeySlot(std::string_view key) { return Crc16(HashTag(key)) & (kClusterSlots - 1); }

namespace {

Result<RedisEndpoint> NodeOf(const RedisReply& node, const RedisEndpoint& asked) {
  if (node.type != RedisReply::Type::kArray || node.elements.size() < 2 ||
      node.elements[1].type != RedisReply::Type::kInteger)
    return Status::DataLoss("redis: CLUSTER SLOTS: malformed node entry");
  RedisEndpoint e;
  const RedisReply& host = node.elements[0];
  e.host = host.type == RedisReply::Type::kString ? host.str : "";
  // An empty host (or "?") means "the address you reached me on".
  if (e.host.empty() || e.host == "?") e.host = asked.host;
  const long long port = node.elements[1].integer;
  if (port < 1 || port > 65535) return Status::DataLoss("redis: CLUSTER SLOTS: bad port");
  e.port = static_cast<int>(port);
  return e;
}

}  // namespace

Result<SlotMap> SlotMap::FromClusterSlots(const RedisReply& reply, const RedisEndpoint& asked) {
  if (reply.type != RedisReply::Type::kArray)
    return Status::DataLoss("redis: CLUSTER SLOTS did not return an array");
  SlotMap map;
  for (const RedisReply& entry : reply.elements) {
    if (entry.type != RedisReply::Type::kArray || entry.elements.size() < 3 ||
        entry.elements[0].type != RedisReply::Type::kInteger ||
        entry.elements[1].type != RedisReply::Type::kInteger)
      return Status::DataLoss("redis: CLUSTER SLOTS: malformed slot range");
    SlotRange r;
    r.first = static_cast<int>(entry.elements[0].integer);
    r.last = static_cast<int>(entry.elements[1].integer);
    if (r.first < 0 || r.last < r.first || r.last >= kClusterSlots)
      return Status::DataLoss("redis: CLUSTER SLOTS: slot range out of bounds");
    KVF_ASSIGN_OR_RETURN(r.master, NodeOf(entry.elements[2], asked));
    map.ranges_.push_back(std::move(r));
  }
  std::sort(map.ranges_.begin(), map.ranges_.end(),
            [](const SlotRange& x, const SlotRange& y) { return x.first < y.first; });
  for (size_t i = 1; i < map.ranges_.size(); ++i)
    if (map.ranges_[i].first <= map.ranges_[i - 1].last)
      return Status::DataLoss("redis: CLUSTER SLOTS: overlapping slot ranges");
  return map;
}

std::optional<RedisEndpoint> SlotMap::MasterOf(int slot) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), slot,
                             [](int s, const SlotRange& r) { return s < r.first; });
  if (it == ranges_.begin()) return std::nullopt;
  --it;
  if (slot > it->last) return std::nullopt;
  return it->master;
}

void SlotMap::Assign(int slot, const RedisEndpoint& at) {
  std::vector<SlotRange> out;
  out.reserve(ranges_.size() + 2);
  for (const SlotRange& r : ranges_) {
    if (slot < r.first || slot > r.last) {
      out.push_back(r);
      continue;
    }
    if (r.first < slot) out.push_back({r.first, slot - 1, r.master});
    if (slot < r.last) out.push_back({slot + 1, r.last, r.master});
  }
  out.push_back({slot, slot, at});
  std::sort(out.begin(), out.end(),
            [](const SlotRange& x, const SlotRange& y) { return x.first < y.first; });
  ranges_ = std::move(out);
}

std::vector<RedisEndpoint> SlotMap::Masters() const {
  std::vector<RedisEndpoint> out;
  for (const SlotRange& r : ranges_)
    if (std::find(out.begin(), out.end(), r.master) == out.end()) out.push_back(r.master);
  return out;
}

std::optional<Redirect> ParseRedirect(const RedisReply& reply) {
  const std::string_view kind = reply.error_kind();
  if (kind != "MOVED" && kind != "ASK") return std::nullopt;
  std::string_view rest = std::string_view(reply.str).substr(kind.size());
  if (rest.empty() || rest.front() != ' ') return std::nullopt;
  rest.remove_prefix(1);
  const size_t space = rest.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  Redirect r;
  r.ask = kind == "ASK";
  const std::string_view slot = rest.substr(0, space);
  const auto [end, ec] = std::from_chars(slot.data(), slot.data() + slot.size(), r.slot);
  if (ec != std::errc() || end != slot.data() + slot.size() || r.slot < 0 ||
      r.slot >= kClusterSlots)
    return std::nullopt;
  // "host:port", where Redis writes an IPv6 host without brackets and may leave the host out
  // (then it is the node that replied: the caller fills it in).
  std::string_view addr = rest.substr(space + 1);
  const size_t colon = addr.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = addr.substr(0, colon), port = addr.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const auto [pend, pec] = std::from_chars(port.data(), port.data() + port.size(), r.to.port);
  if (pec != std::errc() || pend != port.data() + port.size() || r.to.port < 1 || r.to.port > 65535)
    return std::nullopt;
  r.to.host = std::string(host);
  return r;
}

}  // namespace kvforge::kvredis
