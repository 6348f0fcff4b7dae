#include "shmcoord/cleanup.h"

#include <unistd.h>

#include "clean_parts.h"
#include "lease.h"
#include "names.h"
#include "segment.h"
#include "shmcoord/failpoint.h"

namespace shmcoord {

std::string CleanReport::to_string() const {
  std::string s;
  auto add = [&](const char* what, const std::vector<Entry>& v) {
    for (const auto& e : v) s += std::string(what) + " " + e.name + (e.reason.empty() ? "" : " (" + e.reason + ")") + "\n";
  };
  add("removed", removed);
  add("kept", kept);
  add("skipped", skipped);
  return s;
}

Result<CleanReport> clean_stale(const Namespace& ns, std::chrono::milliseconds timeout) {
  if (auto v = ns.validate(); !v) return std::unexpected(v.error());
  if (timeout.count() < 0) return fail(Code::kInvalidArgument, "negative timeout");
  const Deadline d = Deadline::after(timeout);
  CleanReport rep;
  const bool init_lock_existed = shm_inode(ns.shm_name(kInitSuffix)) != 0;
  // Held throughout: no registry or barrier is created or rebuilt meanwhile.
  auto init = InitLock::acquire(ns, d);
  if (!init) return std::unexpected(init.error());
  failpoint::crash_window("crash/cleanup/init-locked");

  // Locks are held by leases: ours is taken at the first lock we need.
  CleanerLease lease(ns, d);

  // 1. The registry, and with it every prefix name, judged under its lock.
  auto judged = clean_registry(ns, *init, d, rep, lease);
  if (!judged) return std::unexpected(judged.error());
  const RegistryVerdict verdict = judged->verdict;

  // 2. Everything else under the root. Names we cannot list are never judged.
  auto listed = list_owned(ns);
  if (!listed) return std::unexpected(listed.error());
  for (auto& [p, entries] : *listed) {
    for (const auto& e : entries) {
      if (!e.is_lock && e.name == ns.shm_name("registry")) continue;
      if (p >= 0) {
        if (verdict == RegistryVerdict::kStays) continue;  // judged under the registry lock (step 1)
        if (verdict == RegistryVerdict::kUnjudged) {
          rep.skipped.push_back({e.name, "prefix " + std::to_string(p) + ": " + judged->why});
          continue;
        }
        // No registry: nobody can grant this prefix while we hold the init lock.
      } else if (!e.is_lock) {
        clean_other_segment(ns, e, d, rep, lease);
        continue;
      }
      std::string r = remove_entry(e);
      if (r.empty()) {
        rep.removed.push_back({e.name, p >= 0 ? "prefix " + std::to_string(p) + " has no live holder" : "lock not held"});
      } else if (not_ours(r)) {
        rep.skipped.push_back({e.name, r});
      } else {
        rep.kept.push_back({e.name, r});
      }
    }
  }

  // 3. The namespace's own objects once nothing of ours is left (another
  // user's entries may stay: they could not open our 0600 objects anyway).
  // A registry that stays, ours or not, keeps the init lock that guards it.
  lease.drop();  // before judging the leases file: our own cell would keep it
  bool ours_left = verdict != RegistryVerdict::kAbsent;
  if (auto left = list_owned(ns)) {
    for (const auto& [p, entries] : *left) {
      for (const auto& e : entries) ours_left |= e.uid == ::geteuid();
    }
  } else {
    ours_left = true;  // cannot tell: the namespace's own objects stay
  }
  const std::string leases = ns.shm_name(kLeasesSuffix);
  const bool leases_existed = shm_inode(leases) != 0;
  std::string leases_kept = remove_leases_if_unused(ns);
  if (leases_existed) {
    if (leases_kept.empty()) {
      rep.removed.push_back({leases, "no process holds a lease"});
    } else {
      const bool foreign = leases_kept.rfind("owned by", 0) == 0;
      (foreign ? rep.skipped : rep.kept).push_back({leases, leases_kept});
      ours_left |= !foreign;
    }
  }
  if (init->owner() != ::geteuid()) {
    // Another user's: its jobs may share the namespace with ours.
    rep.skipped.push_back({init->path(), "owned by uid " + std::to_string(init->owner())});
  } else if (!ours_left) {
    failpoint::crash_window("crash/cleanup/before-init-unlink");
    if (init->unlink_held() && init_lock_existed) rep.removed.push_back({init->path(), "nothing left to initialise"});
  }
  return rep;
}

}  // namespace shmcoord
