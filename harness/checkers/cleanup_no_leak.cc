// cleanup.no-leak: after the trial and its cleanup step nothing of it remains
// in /dev/shm or the lock dir (DESIGN §4). Judged from the harness's audit;
// entries a fault seeded as another user's are expected to stay (cleanup must
// never remove them). Without a cleanup step, leftovers of killed jobs are
// expected and nothing is checked.
#include <fmt/format.h>

#include "checker.h"
#include "checkers/common.h"

namespace harness {
namespace {

CheckResult check_cleanup_no_leak(const History& h) {
  checks::Report rep("cleanup.no-leak");
  // Without a private /dev/shm, what appeared in the machine's own outside
  // the trial's root stays there for good: never lost silently, though
  // nobody can tell the subject's from another program's.
  if (!h.audit.shared_shm_new.empty()) {
    std::string list;
    for (const auto& n : h.audit.shared_shm_new) list += (list.empty() ? "" : ", ") + n;
    rep.unknown(fmt::format("new in the shared /dev/shm during the trial, outside its name root, and still "
                            "there (not removed: it may be another program's): {}",
                            list));
  }
  if (!h.meta.cleanup_step) return rep.take();
  if (!h.audit.ran) {
    rep.unknown("no audit ran after the cleanup step, so leftovers are unknown");
    return rep.take();
  }
  const auto foreign = checks::foreign_names(h);
  auto report = [&](const std::vector<std::string>& names, const char* where) {
    std::string list;
    for (const auto& n : names) {
      if (foreign.contains(n)) {
        rep.reach("foreign-entry-kept");
        continue;
      }
      list += (list.empty() ? "" : ", ") + n;
    }
    if (!list.empty())
      rep.invalid(fmt::format("left in {} after the cleanup step: {}", where, list));
  };
  report(h.audit.leftover_shm, "/dev/shm");
  report(h.audit.leftover_locks, "the lock dir");
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "cleanup.no-leak",
    "after the trial and its cleanup nothing of it remains in /dev/shm or the lock dir",
    harness::check_cleanup_no_leak, {"foreign-entry-kept"});
