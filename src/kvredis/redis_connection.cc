#include "kvredis/redis_connection.h"

#include <hiredis.h>
#include <sys/time.h>

#include <cerrno>

namespace kvforge::kvredis {
namespace {

timeval Millis(int ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

RedisReply Copy(const redisReply& r) {
  RedisReply out;
  switch (r.type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r.str, r.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r.elements);
      for (size_t i = 0; i < r.elements; ++i) out.elements.push_back(Copy(*r.element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<RedisConnection>> RedisConnection::Open(const RedisEndpoint& at,
                                                               const RedisAuth& auth,
                                                               int timeout_ms) {
  redisContext* ctx = redisConnectWithTimeout(at.host.c_str(), at.port, Millis(timeout_ms));
  if (ctx == nullptr) return Status::ResourceExhausted("redis: cannot allocate a connection");
  if (ctx->err != 0) {
    std::string why = ctx->errstr;
    redisFree(ctx);
    return Status::Unavailable("redis " + at.ToString() + ": " + why);
  }
  if (redisSetTimeout(ctx, Millis(timeout_ms)) != REDIS_OK) {
    redisFree(ctx);
    return Status::Unavailable("redis " + at.ToString() + ": cannot set the time-out");
  }
  std::unique_ptr<RedisConnection> c(new RedisConnection(ctx, at));
  if (!auth.password.empty()) {
    RedisArgs args = {"AUTH"};
    if (!auth.user.empty()) args.push_back(auth.user);
    args.push_back(auth.password);
    KVF_ASSIGN_OR_RETURN(RedisReply r, c->Command(args));
    if (r.is_error()) return Status::InvalidArgument("redis " + at.ToString() + ": AUTH: " + r.str);
  }
  if (auth.db != 0) {
    const std::string db = std::to_string(auth.db);
    KVF_ASSIGN_OR_RETURN(RedisReply r, c->Command({"SELECT", db}));
    if (r.is_error())
      return Status::InvalidArgument("redis " + at.ToString() + ": SELECT " + db + ": " + r.str);
  }
  return c;
}

RedisConnection::~RedisConnection() { redisFree(ctx_); }

Status RedisConnection::Fail(const char* what) {
  const int saved_errno = errno;  // before anything below can change it
  broken_ = true;
  // hiredis 0.14 reports a socket time-out as an I/O error with EAGAIN; later versions have
  // their own code for it.
  timed_out_ = ctx_->err == REDIS_ERR_IO && (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK);
#ifdef REDIS_ERR_TIMEOUT
  timed_out_ = timed_out_ || ctx_->err == REDIS_ERR_TIMEOUT;
#endif
  std::string why = timed_out_ ? "timed out" : ctx_->err != 0 ? ctx_->errstr : "connection lost";
  return Status::Unavailable("redis " + at_.ToString() + ": " + what + ": " + why);
}

Result<std::vector<RedisReply>> RedisConnection::Pipeline(std::span<const RedisArgs> commands) {
  if (broken_) return Status::Unavailable("redis " + at_.ToString() + ": connection broken");
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const RedisArgs& args : commands) {
    if (args.empty()) return Status::InvalidArgument("redis: an empty command");  // no reply comes
    argv.clear();
    lens.clear();
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK)
      return Fail("send");
  }
  std::vector<RedisReply> out;
  out.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) return Fail("read");
    redisReply* r = static_cast<redisReply*>(raw);
    out.push_back(Copy(*r));
    freeReplyObject(r);
  }
  return out;
}

Result<RedisReply> RedisConnection::Command(const RedisArgs& args) {
  KVF_ASSIGN_OR_RETURN(std::vector<RedisReply> r, Pipeline(std::span<const RedisArgs>(&args, 1)));
  return std::move(r.front());
}

}  // namespace kvforge::kvredis
