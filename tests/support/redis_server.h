// redis_server.h — a real redis-server process for one test: on a free loopback port, in its own
// temporary directory, killed with the test. Fault tests stop it (SIGKILL), pause it (SIGSTOP),
// resume and restart it on the same port. RedisCluster starts three such masters as a Redis
// Cluster (redis-cli --cluster create) and waits until every node says cluster_state:ok.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace kvforge::testing {

// Whether redis-server (and redis-cli) can be run here; tests skip with a message when not.
bool HaveRedisServer();

class RedisServer {
 public:
  // Starts on a free port; `extra` are more redis-server arguments ("--maxmemory", "1mb", ...).
  // With "--cluster-enabled" among them the port leaves room for the cluster bus (port + 10000).
  explicit RedisServer(std::vector<std::string> extra = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  bool ok() const { return pid_ > 0; }  // it started and answered PING
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_.path(); }

  void Kill();     // SIGKILL, and reaps it
  void Pause();    // SIGSTOP: connections hang until Resume
  void Resume();   // SIGCONT
  bool Restart();  // starts again on the same port (after Kill); true when it answers PING

  // Sends one inline command (words separated by spaces) and returns the raw reply text ("" on
  // failure); for test set-up, not for the code under test.
  std::string Command(const std::string& inline_command) const;

 private:
  bool Start();
  bool Answers() const;

  TempDir dir_{"kvforge-redis"};
  std::vector<std::string> extra_;
  int port_ = 0;
  pid_t pid_ = -1;
};

class RedisCluster {
 public:
  explicit RedisCluster(int masters = 3);
  bool ok() const { return ok_; }
  // Why it did not come up (the failing step and redis-cli's output); empty when ok.
  const std::string& error() const { return error_; }
  // redis://127.0.0.1:p1,127.0.0.1:p2,...
  std::string url() const;
  RedisServer& node(size_t i) { return *nodes_[i]; }
  size_t size() const { return nodes_.size(); }
  // The node id (CLUSTER MYID) of node i.
  std::string NodeId(size_t i) const;
  // The index of the node serving `slot`, -1 if unknown.
  int NodeOfSlot(int slot) const;

 private:
  // One `redis-cli --cluster create` over the nodes; false (with error_ set) when it failed.
  bool Create();

  std::vector<std::unique_ptr<RedisServer>> nodes_;
  bool ok_ = false;
  std::string error_;
};

}  // namespace kvforge::testing
