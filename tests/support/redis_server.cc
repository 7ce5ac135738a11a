#include "support/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <thread>

extern char** environ;

namespace kvforge::testing {
namespace {

// A port nobody listens on now (the kernel's pick for an ephemeral bind).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// Whether nothing listens on loopback `port` now (a bind to it succeeds).
bool PortFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

// Runs `argv` and returns its pid (-1 on failure); stdout/stderr go to `log`.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

std::string SendInline(int port, const std::string& command) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const std::string line = command + "\r\n";
    if (write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size())) {
      // Read until the reply is complete enough for set-up checks: a line, or a bulk string.
      char buf[4096];
      for (;;) {
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
        if (out[0] == '$') {
          const size_t eol = out.find("\r\n");
          if (eol == std::string::npos) continue;
          const long len = std::strtol(out.c_str() + 1, nullptr, 10);
          if (len < 0 || out.size() >= eol + 2 + static_cast<size_t>(len) + 2) break;
        } else if (out.find("\r\n") != std::string::npos) {
          break;
        }
      }
    }
  }
  close(fd);
  return out;
}

bool WaitFor(const std::function<bool()>& done, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

}  // namespace

bool HaveRedisServer() {
  return std::system(
             "command -v redis-server >/dev/null 2>&1 && command -v redis-cli "
             ">/dev/null 2>&1") == 0;
}

RedisServer::RedisServer(std::vector<std::string> extra) : extra_(std::move(extra)) {
  // A cluster node also listens on port + 10000 (its bus), which must exist and be free.
  const bool cluster = std::find(extra_.begin(), extra_.end(), "--cluster-enabled") != extra_.end();
  for (int attempt = 0; attempt < 20 && pid_ <= 0; ++attempt) {
    port_ = FreePort();
    if (port_ == 0) continue;
    if (cluster && (port_ + 10000 > 65535 || !PortFree(port_ + 10000))) continue;
    Start();
  }
}

RedisServer::~RedisServer() { Kill(); }

bool RedisServer::Answers() const {
  // PONG, or NOAUTH from a server started with --requirepass: either way it is up.
  const std::string r = SendInline(port_, "PING");
  return r.rfind("+PONG", 0) == 0 || r.rfind("-NOAUTH", 0) == 0;
}

bool RedisServer::Start() {
  std::vector<std::string> argv = {"redis-server",
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--dir",
                                   dir_.path(),
                                   "--protected-mode",
                                   "no",
                                   "--loglevel",
                                   "warning"};
  argv.insert(argv.end(), extra_.begin(), extra_.end());
  const pid_t pid = Spawn(argv, dir_.path() + "/redis.log");
  if (pid <= 0) return false;
  const bool up = WaitFor(
      [&] {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) return true;  // exited: stop waiting
        return Answers();
      },
      10.0);
  if (up && Answers()) {
    pid_ = pid;
    return true;
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return false;
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGCONT);  // a paused one must be able to die
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}
void RedisServer::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

bool RedisServer::Restart() {
  Kill();
  // The port was just ours; a few tries cover a slow release of the socket.
  for (int attempt = 0; attempt < 5 && pid_ <= 0; ++attempt)
    if (!Start()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return pid_ > 0;
}

std::string RedisServer::Command(const std::string& inline_command) const {
  return SendInline(port_, inline_command);
}

RedisCluster::RedisCluster(int masters) {
  for (int i = 0; i < masters; ++i) {
    nodes_.push_back(std::make_unique<RedisServer>(
        std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                 "--cluster-node-timeout", "5000"}));
    if (!nodes_.back()->ok()) {
      error_ = "cluster node " + std::to_string(i) + " did not start (see its redis.log)";
      return;
    }
  }
  // A create that fails half-way (a node slow to answer on a loaded machine) leaves slots
  // assigned; the nodes are reset before it is tried again.
  bool created = Create();
  for (int attempt = 1; attempt < 3 && !created; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    for (const auto& n : nodes_) {
      n->Command("FLUSHALL");
      n->Command("CLUSTER RESET HARD");
    }
    created = Create();
  }
  if (!created) return;
  ok_ = WaitFor(
      [&] {
        for (const auto& n : nodes_)
          if (n->Command("CLUSTER INFO").find("cluster_state:ok") == std::string::npos)
            return false;
        return true;
      },
      30.0);
  if (!ok_) error_ = "cluster_state did not become ok within 30 s";
}

bool RedisCluster::Create() {
  const std::string log = nodes_[0]->dir() + "/create.log";
  std::string create = "redis-cli --cluster create";
  for (const auto& n : nodes_) create += " 127.0.0.1:" + std::to_string(n->port());
  create += " --cluster-replicas 0 --cluster-yes >" + log + " 2>&1";
  if (std::system(create.c_str()) == 0) return true;
  std::ifstream in(log);
  error_ = "redis-cli --cluster create failed: " +
           std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return false;
}

std::string RedisCluster::url() const {
  std::string out = "redis://";
  for (size_t i = 0; i < nodes_.size(); ++i)
    out += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(nodes_[i]->port());
  return out;
}

std::string RedisCluster::NodeId(size_t i) const {
  std::string r = nodes_[i]->Command("CLUSTER MYID");  // "$40\r\n<id>\r\n"
  const size_t eol = r.find("\r\n");
  if (eol == std::string::npos) return "";
  r = r.substr(eol + 2);
  return r.substr(0, r.find("\r\n"));
}

int RedisCluster::NodeOfSlot(int slot) const {
  // CLUSTER NODES lines: "<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <state>
  // <slot ranges...>" — one bulk string, parsed for set-up only.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const std::string all = nodes_[i]->Command("CLUSTER NODES");
    std::istringstream lines(all);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find("myself") == std::string::npos) continue;
      std::istringstream words(line);
      std::string w;
      for (int k = 0; k < 8 && words >> w; ++k) {
      }
      while (words >> w) {
        const size_t dash = w.find('-');
        const int lo = std::atoi(w.c_str());
        const int hi = dash == std::string::npos ? lo : std::atoi(w.c_str() + dash + 1);
        if (w[0] != '[' && slot >= lo && slot <= hi) return static_cast<int>(i);
      }
    }
  }
  return -1;
}

}  // namespace kvforge::testing
