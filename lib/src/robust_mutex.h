// A robust, process-shared pthread mutex living in a shared segment. Unlike a
// flock it is owned by a thread, not an open file description, so a forked child
// that inherits our fds can never keep it held; and when its owner dies the
// kernel hands it to the next locker with EOWNERDEAD instead of leaving it stuck.
#pragma once

#include <pthread.h>

#include <string>

#include "segment.h"
#include "shmcoord/error.h"

namespace shmcoord {

void init_robust_mutex(pthread_mutex_t* m);

class RobustGuard {
 public:
  // Locks before `d`; `owner_died()` tells the caller to repair what the dead
  // owner may have left half-written.
  static Result<RobustGuard> lock(pthread_mutex_t* m, Deadline d, const std::string& what);
  RobustGuard(RobustGuard&& o) noexcept : m_(o.m_), died_(o.died_) { o.m_ = nullptr; }
  RobustGuard& operator=(RobustGuard&&) = delete;
  ~RobustGuard() { unlock(); }
  bool owner_died() const { return died_; }
  void unlock();

 private:
  RobustGuard(pthread_mutex_t* m, bool died) : m_(m), died_(died) {}
  pthread_mutex_t* m_;
  bool died_;
};

}  // namespace shmcoord
