// clean_stale: removes what dead jobs left under a namespace.
//
// Process contract:
// - Removes a segment or lock file only if it is ours (same euid - also when
//   run as root) and no live owner uses it: prefix names whose registry slot
//   has no live holder, barriers with no live participant, lock files nobody
//   holds (flock LOCK_NB), the leases file once nobody holds a lease, and the
//   registry and init lock once nothing is registered. Liveness is the owner's
//   kernel lease (registry.h): a SIGSTOPped owner is live, and so is one in
//   another pid namespace that shares /dev/shm.
// - Safe beside live jobs: prefix names are judged and removed under the
//   registry lock, the lock prefixes are granted under, so a prefix granted
//   during a cleanup is never swept and what its holder creates after the grant
//   survives. A barrier is retired under its own lock before it is unlinked, so
//   a racing attach reopens by name instead of joining a removed segment.
// - Never removes another user's entries, nor the registry, init lock or leases
//   file another user created in a namespace we share (reported as skipped):
//   that user's jobs may be live in it. Root's jobs can hold prefixes in such a
//   registry, so when we can open it (root can), our prefix names are judged
//   under its lock like under ours; when we cannot (a real EACCES), none of our
//   prefix names is removed, and each is skipped with that reason.
// - Never removes another shmcoord layout version's registry or barrier, nor
//   the prefix names of such a registry (reported as skipped).
// - Decides by name, ownership and leases, never by reading a record it has not
//   validated, so zero-length, truncated and garbage segments are removed like
//   any other stale entry instead of stopping it. Only what it has read is
//   judged: a registry it cannot open or map (one fd left, RLIMIT_AS, EACCES)
//   is never taken for garbage (ours: clean_stale fails with that error and
//   removes nothing under a prefix; another user's: its prefixes are skipped),
//   a barrier it cannot read is kept saying why, and names it cannot list
//   (EMFILE on opendir) fail the cleanup instead of looking absent.
// - Only the namespace's own names: "<root><suffix>" with a dot-free suffix
//   (namespace.h), so a root nested in ours ("a.b." in "a.") is never touched,
//   and a lock dir that is /dev/shm is refused (Code::kInvalidArgument) before
//   anything is judged.
// - Locks registries and barriers with a lease of its own (taken at the first
//   lock, dropped before the leases file is judged); if it dies holding one,
//   the next locker repairs, and a barrier it was judging is not broken.
// - Idempotent, and safe from several processes at once (the init lock
//   serialises them). A cleanup killed anywhere leaves nothing the next one
//   cannot finish: a registry it retired but did not unlink is removed by the
//   next cleanup (or rebuilt by the next acquire).
// - Time O(names under the root + registry slots); no fd stays open, and at
//   most three are open at once (the init lock, its lease, one more).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "shmcoord/error.h"
#include "shmcoord/namespace.h"

namespace shmcoord {

struct CleanReport {
  struct Entry {
    std::string name;
    std::string reason;
  };
  std::vector<Entry> removed, kept, skipped;
  std::string to_string() const;
};

Result<CleanReport> clean_stale(const Namespace& ns,
                                std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

}  // namespace shmcoord
