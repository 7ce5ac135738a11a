#include "server/peer_socket.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace kvforge::server {
namespace {

// Numeric host and port of a socket address; false for non-IP families.
bool HostPort(const sockaddr_storage& sa, socklen_t len, std::string* host, int* port) {
  if (sa.ss_family != AF_INET && sa.ss_family != AF_INET6) return false;
  char h[NI_MAXHOST], p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&sa), len, h, sizeof(h), p, sizeof(p),
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  *host = h;
  *port = std::atoi(p);
  return true;
}

bool Matches(int fd, const ConnectionEndpoints& e) {
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  std::string host;
  int port = 0;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return false;
  if (!HostPort(sa, len, &host, &port) || port != e.local_port || host != e.local_addr)
    return false;
  len = sizeof(sa);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return false;
  return HostPort(sa, len, &host, &port) && port == e.remote_port && host == e.remote_addr;
}

bool IsSocketLink(int dir_fd, const char* name) {
  char target[64];
  const ssize_t n = readlinkat(dir_fd, name, target, sizeof(target) - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  return std::strncmp(target, "socket:", 7) == 0;
}

}  // namespace

int FindConnectionSocket(const ConnectionEndpoints& endpoints) {
  if (endpoints.local_port <= 0 || endpoints.remote_port <= 0) return -1;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == dirfd(dir) || !IsSocketLink(dirfd(dir), entry->d_name)) continue;
    if (Matches(fd, endpoints)) {
      found = fd;
      break;
    }
  }
  closedir(dir);
  return found;
}

bool PeerHungUp(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  // Readable: either a pipelined next request (still connected) or the end of the stream.
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace kvforge::server
