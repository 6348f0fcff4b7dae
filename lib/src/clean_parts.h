// The parts of clean_stale that need a segment's layout, each implemented by
// the module that owns that layout. The caller (cleanup.cc) holds the
// namespace's init lock throughout, so no registry or barrier can be created
// or rebuilt meanwhile.
#pragma once

#include <optional>

#include "lease.h"
#include "names.h"
#include "segment.h"
#include "shmcoord/cleanup.h"

namespace shmcoord {

// The lease clean_stale locks registries and barriers with (their locks name
// their holder by a lease: lease_lock.h). Taken at the first lock it needs,
// dropped before the leases file is judged, so an empty namespace costs none.
class CleanerLease {
 public:
  CleanerLease(const Namespace& ns, Deadline d) : ns_(ns), d_(d) {}
  Result<std::uint64_t> id() {
    if (!ref_) {
      auto r = LeaseRef::take(ns_, d_);
      if (!r) return std::unexpected(r.error());
      ref_.emplace(std::move(*r));
    }
    return lock_id(ref_->owner());
  }
  void drop() { ref_.reset(); }

 private:
  const Namespace& ns_;
  Deadline d_;
  std::optional<LeaseRef> ref_;
};

enum class RegistryVerdict {
  kAbsent,    // no registry is left: prefix names belong to nobody
  kStays,     // a registry stays (ours holding live prefixes, or another user's);
              // every prefix name was judged under its lock
  kUnjudged,  // a registry stays whose slots we cannot judge by (another library
              // version's, or another user's we cannot open or validate): no
              // prefix name may be removed, for the reason given
};

struct RegistryJudgement {
  RegistryVerdict verdict = RegistryVerdict::kAbsent;
  std::string why;  // kUnjudged: why prefix names cannot be judged
};

// Under the registry's lock: frees every dead job's slot and removes every
// prefix name no live job holds (grants happen under the same lock, so a
// prefix granted meanwhile cannot be swept), then retires and unlinks the
// registry if nothing is registered. A registry left retired by an interrupted
// cleanup is removed; garbage is removed; another version's is left alone.
// Another user's registry is never retired or removed: if we can open it (root
// can), its prefix names are judged under its lock like ours; if not, none is.
// Ours that cannot be read (EMFILE, ENOMEM: the bytes were never seen) is an
// error: nothing under a prefix is removed, and the registry stays.
Result<RegistryJudgement> clean_registry(const Namespace& ns, const InitLock& held, Deadline d, CleanReport& rep,
                                         CleanerLease& lease);

// A segment without a prefix: if it is a barrier with no live participant, it
// is retired under its own lock and unlinked; a barrier of another library
// version is left alone; one that cannot be read (no fd, no address space) is
// kept, saying why; anything else that is ours is removed.
void clean_other_segment(const Namespace& ns, const OwnedEntry& e, Deadline d, CleanReport& rep, CleanerLease& lease);

}  // namespace shmcoord
