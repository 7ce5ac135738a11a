// server/peer_socket.h — whether the client of a request still holds its connection.
//
// cpp-httplib 0.11 (Debian 12) hands a handler neither its socket nor a "connection closed"
// query, so a non-streaming handler cannot see a client that gave up. The connection is still
// named by its two endpoints (the request's local and remote address and port), and those are
// unique among the process's open TCP sockets: FindConnectionSocket scans /proc/self/fd for the
// socket whose own address and peer match, and PeerHungUp polls it without blocking
// (POLLRDHUP / POLLHUP, or a zero-byte MSG_PEEK) to tell a closed or reset connection.
// Thread-safety: reentrant. Cost: FindConnectionSocket is one pass over the open descriptors
// (done once per request, lazily); PeerHungUp is one poll() system call.
#pragma once

#include <string>

namespace kvforge::server {

struct ConnectionEndpoints {
  std::string local_addr;  // numeric host, as getnameinfo(NI_NUMERICHOST) writes it
  int local_port = 0;
  std::string remote_addr;
  int remote_port = 0;
};

// The descriptor of the open TCP socket with exactly these endpoints, or -1.
int FindConnectionSocket(const ConnectionEndpoints& endpoints);
// True once the peer closed or reset the connection (a half-close counts: httplib answers no
// request on a half-closed connection either). False while it is open, or for fd < 0.
bool PeerHungUp(int fd);

}  // namespace kvforge::server
