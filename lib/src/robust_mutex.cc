#include "robust_mutex.h"

#include <cerrno>
#include <ctime>

#include "shmcoord/failpoint.h"

namespace shmcoord {

void init_robust_mutex(pthread_mutex_t* m) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL);  // never ERRORCHECK: see robust_mutex.h
  pthread_mutex_init(m, &a);
  pthread_mutexattr_destroy(&a);
}

Result<RobustGuard> RobustGuard::lock(pthread_mutex_t* m, Deadline d, const std::string& what) {
  if (int e = failpoint::check("mutex/lock")) return std::unexpected(sys_error("pthread_mutex_lock", what, e));
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d.at.time_since_epoch()).count();
  struct timespec abs{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  int r = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &abs);
  if (r == 0) return RobustGuard(m, false);
  if (r == EOWNERDEAD) {
    pthread_mutex_consistent(m);
    return RobustGuard(m, true);
  }
  if (r == ETIMEDOUT) {
    return fail(Code::kTimeout, "timed out locking " + what + " (its holder is stopped or stuck)", r);
  }
  if (r == EDEADLK) {
    // Only an ERRORCHECK mutex answers this: a holder in another pid namespace
    // with our tid would make it permanent. See robust_mutex.h.
    return fail(Code::kCorrupt, what + ": lock answered EDEADLK (a mutex of the wrong type; see robust_mutex.h)", r);
  }
  if (r == ENOTRECOVERABLE) {
    return fail(Code::kCorrupt, what + ": lock not recoverable (a previous owner died and nobody repaired it)", r);
  }
  return std::unexpected(sys_error("pthread_mutex_clocklock", what, r));
}

void RobustGuard::unlock() {
  if (m_) pthread_mutex_unlock(m_);
  m_ = nullptr;
}

}  // namespace shmcoord
