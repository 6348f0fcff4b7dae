// unprivileged: chosen workers run as an unprivileged uid (default 65534,
// nobody). Root ignores file modes, so this is the only way to get a real
// EACCES in CI: the unprivileged worker meets the 0600 segments and lock files
// of root's workers — and root's cleanup meets the unprivileged worker's live
// entries, which it must leave alone. Entries that uid creates are another
// user's: the supervisor lists them at the audit as `foreign` (no cleanup of
// root's may remove them, so they are no leak). Params: uid, job, rank,
// random_rank.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"uid", "job", "rank", "random_rank"})) return e;
  // uid_t is 32 bits and (uid_t)-1 means "unchanged": 1 .. 2^31-1 (not root).
  int uid = 65534;
  if (auto e = param_int(f, "uid", 65534, 1, 2147483647, &uid)) return e;
  std::vector<WorkerPlan*> ws;
  if (auto e = pick_workers(f, s, rng, p, &ws)) return e;
  for (auto* w : ws) {
    w->uid = w->gid = uid;
    p.actions.push_back(Action{0, w->job, w->rank, 0, "unprivileged", "instant", {{"uid", uid}}});
  }
  return std::nullopt;
}

}  // namespace

SHMSTRESS_REGISTER_INJECTOR("unprivileged", "run chosen workers as an unprivileged uid: real EACCES against root's 0600 entries",
                            plan);

}  // namespace harness
