// clean_stale: removes what dead jobs left under a namespace.
//
// Process contract:
// - Removes a segment or lock file only if it is ours (same euid — also when
//   run as root) and no live owner uses it: prefix entries whose registry slot
//   has no live holder (a SIGSTOPped holder is live), barriers with no live
//   participant, lock files nobody holds (flock LOCK_NB), and the registry and
//   init lock once nothing is registered.
// - Decides by name and ownership, never by reading a record it has not
//   validated, so zero-length, truncated and garbage segments are removed like
//   any other stale entry instead of stopping it.
// - Idempotent, and safe to run from several processes at once (it works under
//   the init lock and the registry lock).
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
