// The run's zygote (zygote.h), owned by the harness for the length of a run.
#pragma once

#include <sys/types.h>

#include <string>

namespace harness {

class ZygoteServer {
 public:
  // Starts `exe zygote`. fd() is the registration socket every supervisor
  // forked from here inherits; -1 if the zygote could not be started (every
  // worker is exec'd then).
  explicit ZygoteServer(const std::string& exe);
  // Closes our end and waits (at most 2 s, then kills it) for the zygote,
  // which exits once every supervisor is gone too.
  ~ZygoteServer();
  ZygoteServer(const ZygoteServer&) = delete;
  ZygoteServer& operator=(const ZygoteServer&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int pidfd_ =
      -1;  // the zygote, however its pid is reaped meanwhile (the run loop waits for any child)
};

}  // namespace harness
