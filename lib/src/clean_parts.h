// The parts of clean_stale that need a segment's layout, each implemented by
// the module that owns that layout. The caller (cleanup.cc) holds the
// namespace's init lock throughout, so no registry or barrier can be created
// or rebuilt meanwhile.
#pragma once

#include "names.h"
#include "segment.h"
#include "shmcoord/cleanup.h"

namespace shmcoord {

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
Result<RegistryJudgement> clean_registry(const Namespace& ns, const InitLock& held, Deadline d, CleanReport& rep);

// A segment without a prefix: if it is a barrier with no live participant, it
// is retired under its own lock and unlinked; a barrier of another library
// version is left alone; anything else that is ours is removed.
void clean_other_segment(const Namespace& ns, const OwnedEntry& e, Deadline d, CleanReport& rep);

}  // namespace shmcoord
