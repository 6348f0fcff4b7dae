// A robust, process-shared pthread mutex living in a shared segment. Unlike a
// flock it is owned by a thread, not an open file description, so a forked child
// that inherits our fds can never keep it held; and when its owner dies the
// kernel hands it to the next locker with EOWNERDEAD instead of leaving it stuck.
//
// Pid namespaces: the owner is recorded as a tid of the owner's own pid
// namespace, so two processes in containers sharing /dev/shm can carry the same
// tid. That is harmless for PTHREAD_MUTEX_NORMAL, the type used here: glibc
// compares the owner tid with ours only for the ERRORCHECK and RECURSIVE types
// (which would answer EDEADLK, or grant the lock twice); a NORMAL locker waits
// on the futex like any other, and the kernel marks the word owner-died only
// for the dying thread's own robust list. The mutex must therefore never be
// made ERRORCHECK or RECURSIVE (registry_test pins this with two processes
// that are both pid 2 of their namespaces).
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
