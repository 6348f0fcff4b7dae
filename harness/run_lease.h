// A run's claim on the names it may place in the machine's shared /dev/shm,
// and the one place that decides what `shmstress clean` may remove.
//
// Process contract:
// - A run whose trials may fall back to a name root in the shared /dev/shm
//   (--no-mount-ns, or no CAP_SYS_ADMIN to mount a private tmpfs) takes a
//   lease first: the shm object "shmstress.<token>.lease", where <token> is
//   "<pid>-<16 random hex digits>" (unique across pid namespaces, which reuse
//   pids), holding a shared flock(2) on it for the run's whole life. Every
//   trial root of that run is "shmstress.<token>.<n>.", so every name the run
//   or its subject creates says which lease it belongs to.
// - The lease appears already locked (created unnamed, O_TMPFILE, locked,
//   then linked in), so nobody ever sees it unlocked while its run lives.
// - flock is the kernel's: it is dropped when the last fd of the harness and
//   its forked trial supervisors closes (SIGKILL included), and it answers the
//   same from every pid namespace sharing /dev/shm. No pid is involved, so a
//   live run in a container is never taken for a dead one (kill(pid, 0) means
//   nothing across pid namespaces). Workers do not hold it (close-on-exec).
// - The run removes its own lease at its end; a run killed by SIGKILL leaves
//   it, unlocked, for `clean`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace harness {

class RunLease {
 public:
  // Creates and locks the lease in /dev/shm. nullopt with *why if it cannot
  // (a read-only or full /dev/shm: the environment, exit 3).
  static std::optional<RunLease> take(std::string* why);
  RunLease(RunLease&& o) noexcept;
  RunLease& operator=(RunLease&& o) noexcept {
    std::swap(token_, o.token_);
    std::swap(fd_, o.fd_);
    return *this;
  }
  RunLease(const RunLease&) = delete;
  ~RunLease();  // removes the lease; the lock goes with the fd

  const std::string& token() const { return token_; }
  // The shm name root of the run's n-th trial: "shmstress.<token>.<n>.".
  std::string trial_root(std::uint64_t n) const;

 private:
  RunLease(std::string token, int fd) : token_(std::move(token)), fd_(fd) {}
  std::string token_;
  int fd_ = -1;
};

// Whether trials of a run may fall back to the shared /dev/shm: no mount
// namespace allowed, or no CAP_SYS_ADMIN to make one.
bool may_use_shared_shm(bool allow_mount_ns);

// What `shmstress clean` does with one name in /dev/shm that looks like the
// harness's ("shmstress." ...).
struct CleanDecision {
  std::string name;  // in /dev/shm
  bool remove = false;
  std::string why;   // kept: why not ("its run is alive", "no lease: ...")
};

// The one place that decides what `clean` may remove: the names of a run
// whose lease exists and is not locked (its run, in whatever pid namespace,
// is dead), then that lease. A name of a live run, a name whose lease is gone
// or that has none (an older shmstress's "shmstress.<pid>.", a stranger's),
// is kept with the reason. It removes while it holds the dead lease's lock
// exclusively, so no run can take it meanwhile. `dir` is /dev/shm but for
// tests.
std::vector<CleanDecision> clean_dead_runs(const std::string& dir = "/dev/shm");

}  // namespace harness
