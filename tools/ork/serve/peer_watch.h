// Whether the client of a request whose answer is not streamed has gone
// away. A streamed answer finds out when a write fails; a plain one writes
// nothing until its end, and cpp-httplib (0.11) gives a handler no handle on
// its connection. The connection is found by its two addresses, which the
// request carries, among the process's sockets; then its state is read
// without consuming anything: the peer's end of stream (a recv that peeks
// 0 bytes), a hang-up or an error.
#pragma once

#include <string>

namespace ork::serve {

class PeerWatch {
 public:
  // remote_addr / remote_port / local_port as httplib::Request has them.
  PeerWatch(const std::string& remote_addr, int remote_port, int local_port);
  // True once the client has closed or reset its connection. False where
  // the connection was not found (then nothing is cancelled).
  bool gone() const;
  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace ork::serve
