// Named failpoints ("area/object/op", listed below and in docs/failpoints.md)
// sit at every syscall shmcoord makes and at every step of every multi-step
// critical section. They are libfiu points: a test or the harness enables them
// with fiu_enable()/FIU_ENABLE/fiu-ctrl, and then a syscall point fails with the
// errno given as failinfo (EACCES if none) while a window point raises SIGKILL.
//
// Without libfiu, from the environment (read once, at the first point passed):
// - SHMCOORD_CRASH_AT=k          SIGKILL at the k-th point passed (1-based,
//                                 syscall and window points alike): enumeration.
// - SHMCOORD_CRASH_AT=point:n    SIGKILL the n-th time `point` is passed.
// - SHMCOORD_PAUSE_AT=point:n[,point:n...]
//                                 raise SIGSTOP on ourselves the n-th time
//                                 `point` is passed; a supervisor's SIGCONT
//                                 resumes us there, so other processes run
//                                 inside the window meanwhile.
// - SHMCOORD_LEASE_FIRST_FIT=1     every lease takes the lowest free cell of
//                                 its namespace's leases file (lease_first_fit).
// A malformed value or an unknown point name disables that variable and is
// reported by env_error() (and once on stderr): a typo never silently passes.
// The observers, if set, hear the point name first so a worker can log where
// it died or stopped.
//
// With SHMCOORD_FAILPOINTS=OFF at build time all of this compiles to nothing
// (the table stays, so tools can still validate names).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace shmcoord::failpoint {

enum class Kind {
  kSyscall,  // fiu-enabled: the call fails with an errno
  kWindow,   // fiu-enabled: SIGKILL; the step between two writes of a protocol
};

struct Point {
  std::string_view name;
  Kind kind;
  std::string_view where;
};

// Every point shmcoord passes. A unit test checks this table against the
// sources in both directions, so it is complete by construction.
inline constexpr Point kPoints[] = {
    // Segments (registry and barriers share the code; the area names the segment).
    {"shm/registry/open", Kind::kSyscall, "shm_open of the registry"},
    {"shm/registry/create", Kind::kSyscall, "exclusive create of the registry"},
    {"shm/registry/fstat", Kind::kSyscall, "fstat of the registry"},
    {"shm/registry/mmap", Kind::kSyscall, "mapping the registry"},
    {"shm/registry/ftruncate", Kind::kSyscall, "sizing a new registry"},
    {"shm/registry/fallocate", Kind::kSyscall, "reserving a new registry's pages (ENOSPC here, not SIGBUS later)"},
    {"shm/registry/unlink", Kind::kSyscall, "removing a zero-length, garbage or retired registry before rebuilding it"},
    {"shm/barrier/open", Kind::kSyscall, "shm_open of a barrier"},
    {"shm/barrier/create", Kind::kSyscall, "exclusive create of a barrier"},
    {"shm/barrier/fstat", Kind::kSyscall, "fstat of a barrier"},
    {"shm/barrier/mmap", Kind::kSyscall, "mapping a barrier"},
    {"shm/barrier/ftruncate", Kind::kSyscall, "sizing a new barrier"},
    {"shm/barrier/fallocate", Kind::kSyscall, "reserving a new barrier's pages"},
    {"shm/barrier/unlink", Kind::kSyscall, "removing a barrier (last detach, rebuild)"},
    {"crash/registry/after-create", Kind::kWindow, "registry created, not sized (init lock held)"},
    {"crash/registry/after-size", Kind::kWindow, "registry sized, not initialised or published (init lock held)"},
    {"crash/barrier/after-create", Kind::kWindow, "barrier created, not sized (init lock held)"},
    {"crash/barrier/after-size", Kind::kWindow, "barrier sized, not initialised or published (init lock held)"},
    // Names outside the registry, the init lock, the leases file, the locks.
    {"shm/stale/open", Kind::kSyscall, "opening a stale segment to check it is no other layout version's before removing it"},
    {"shm/stale/unlink", Kind::kSyscall, "removing a stale prefix segment (sweep, claim, cleanup)"},
    {"shm/dir/list", Kind::kSyscall, "listing /dev/shm"},
    {"lock/dir/list", Kind::kSyscall, "listing the lock dir"},
    {"lock/init/open", Kind::kSyscall, "opening the namespace init lock (<root>init.lock)"},
    {"lock/init/flock", Kind::kSyscall, "locking the init lock"},
    {"lock/init/unlink", Kind::kSyscall, "removing the init lock (cleanup, last detach)"},
    {"lock/stale/open", Kind::kSyscall, "opening a lock file to test it"},
    {"lock/stale/flock", Kind::kSyscall, "testing a lock file with LOCK_NB"},
    {"lock/stale/unlink", Kind::kSyscall, "removing an unheld lock file"},
    {"mutex/lock", Kind::kSyscall, "locking a registry or barrier lock (fails as if the lock call failed)"},
    {"lease/open", Kind::kSyscall, "opening (creating) the leases file <root>leases"},
    {"lease/lock", Kind::kSyscall, "locking this process's lease cell"},
    {"lease/unlink", Kind::kSyscall, "removing the leases file once no process holds a lease"},
    {"crash/lease/locked", Kind::kWindow, "lease cell locked, its token not yet written"},
    // Registry: acquire.
    {"crash/registry/acquire-locked", Kind::kWindow, "acquire holds the registry lock, nothing read yet"},
    {"crash/registry/sweep-after-unlink", Kind::kWindow, "a dead job's names removed, its slot not yet freed (lock held)"},
    {"crash/registry/claim-half-written", Kind::kWindow, "a prefix claim written half-way (lock held)"},
    {"crash/registry/join-half-written", Kind::kWindow, "a joining rank's holder written, not yet published (lock held)"},
    {"crash/registry/after-claim", Kind::kWindow, "claimed or joined, lock released, other ranks may still be missing"},
    {"crash/registry/wait-before-sleep", Kind::kWindow, "join wait: job checked incomplete, before the futex sleep"},
    {"crash/registry/poison-half-written", Kind::kWindow, "a failure reason written, the slot not yet poisoned (lock held)"},
    {"crash/registry/withdrawn", Kind::kWindow, "a rank withdrew its job without the lock, its holder not yet marked"},
    {"crash/registry/joined", Kind::kWindow, "all ranks joined, acquire about to return"},
    // Registry: release.
    {"crash/registry/release-before-free", Kind::kWindow, "a holder released, before the slot is freed (lock held)"},
    {"crash/registry/release-after-unlink", Kind::kWindow, "the released job's names removed, its slot not yet freed (lock held)"},
    // Cleanup.
    {"crash/cleanup/init-locked", Kind::kWindow, "clean_stale holds the init lock, nothing judged yet"},
    {"crash/cleanup/registry-locked", Kind::kWindow, "clean_stale holds the registry lock, before the sweep (the old snapshot point)"},
    {"crash/cleanup/after-sweep", Kind::kWindow, "dead slots freed and stale prefix names removed, registry lock still held"},
    {"crash/cleanup/registry-retired", Kind::kWindow, "the empty registry marked retired, not yet unlinked"},
    {"crash/cleanup/barrier-locked", Kind::kWindow, "clean_stale holds a barrier's lock, its participants not yet judged"},
    {"crash/cleanup/barrier-retired", Kind::kWindow, "a barrier with no live participant marked retired, not yet unlinked"},
    {"crash/cleanup/before-init-unlink", Kind::kWindow, "nothing of the namespace left, before removing the init lock"},
    // Barrier.
    {"crash/barrier/attach/after-lock", Kind::kWindow, "attach holds the barrier lock, nothing checked yet"},
    {"crash/barrier/attach/half-reset", Kind::kWindow, "a stale barrier's seats cleared, its counters not yet (lock held)"},
    {"crash/barrier/attach/locked", Kind::kWindow, "a seat chosen, the participant not yet written (lock held)"},
    {"crash/barrier/wait/after-enter", Kind::kWindow, "arrival counted, not yet marked as arrived"},
    {"crash/barrier/wait/before-release", Kind::kWindow, "the last arrival counted, round not yet released (a survivor releases it)"},
    {"crash/barrier/woken", Kind::kWindow, "a waker has bumped seq and woken the sleepers, the waker not yet on (after a release: published first)"},
    {"crash/barrier/wait/before-sleep", Kind::kWindow, "arrived, before the futex wait"},
    {"crash/barrier/wait/check-locked", Kind::kWindow, "a waiter's liveness check holds the barrier lock"},
    {"crash/barrier/break-half-written", Kind::kWindow, "a break reason written, the broken flag not yet set (lock held)"},
    {"crash/barrier/detach/locked", Kind::kWindow, "marked as departed, before retiring or waking (lock held)"},
    {"crash/barrier/detach/retired", Kind::kWindow, "the last participant retired the barrier, not yet unlinked"},
};

constexpr std::span<const Point> points() { return kPoints; }
constexpr bool known(std::string_view name) {
  for (const Point& p : kPoints) {
    if (p.name == name) return true;
  }
  return false;
}

using Observer = void (*)(const char* point, std::uint64_t hit);

// True if failpoints were compiled in.
bool compiled_in();
// Hears the point before the process SIGKILLs itself there.
void set_observer(Observer fn);
// Hears the point before the process SIGSTOPs itself there.
void set_pause_observer(Observer fn);
// Number of points this process has passed so far.
std::uint64_t hits();
// Programmatic SHMCOORD_CRASH_AT=k (tests); 0 disables. Resets the count.
void set_crash_at(std::uint64_t k);
// Programmatic SHMCOORD_CRASH_AT / SHMCOORD_PAUSE_AT with the same syntax
// ("" disables). Returns "" if accepted, else why not (and changes nothing).
std::string set_crash_spec(std::string_view spec);
std::string set_pause_spec(std::string_view spec);
// Why a SHMCOORD_CRASH_AT / SHMCOORD_PAUSE_AT / SHMCOORD_LEASE_FIRST_FIT value
// was refused, "" if none.
std::string env_error();
// From now on this process passes every point as if no trigger were set
// (environment, programmatic or libfiu). A supervisor aims a crash or a pause
// at one process; a child forked from it (its resource tracker, a forked
// loader worker) inherits the triggers with its memory but is another process,
// one the supervisor neither watches for the stop nor resumes. Call it in the
// child (e.g. from a pthread_atfork child handler). Not undone.
void disarm();

// Whether a lease takes the lowest free cell instead of starting its search at
// a random one. Random is the default: a take then costs one lock attempt
// however many processes hold cells. Lowest-first packs a namespace's live
// holders into adjacent cells, so a cell layout that lets neighbours overlap
// (one holder's token written over the next one's) shows in any trial of two
// holders, not in about one of 16,384 / k^2. From SHMCOORD_LEASE_FIRST_FIT
// ("1" on, "0" off, empty as unset; anything else is refused like a bad
// trigger), or set_lease_first_fit. Not a trigger: disarm() leaves it, and a forked child
// takes its own lease the same way. Always false without failpoints.
bool lease_first_fit();
void set_lease_first_fit(bool on);

// Called by the library at each syscall point. Returns the errno to inject (0: proceed).
int check(const char* point);
// Called by the library at each window point: dies or stops here if asked to.
void crash_window(const char* point);

}  // namespace shmcoord::failpoint
