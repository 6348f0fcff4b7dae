// unprivileged: chosen workers run as an unprivileged uid (default 65534,
// nobody). Root ignores file modes, so this is the only way to get a real
// EACCES in CI: the unprivileged worker meets the 0600 segments and lock files
// of root's workers — and root's cleanup meets the unprivileged worker's live
// entries, which it must leave alone. Params: uid, job, rank, random_rank.
#include "injector.h"

namespace harness {
namespace {

std::optional<std::string> plan(const FaultSpec& f, const Scenario& s, Rng& rng, TrialPlan& p) {
  if (auto e = only_keys(f, {"uid", "job", "rank", "random_rank"})) return e;
  int uid = f.params.value("uid", 65534);
  if (uid <= 0) return std::string("'uid' must be a positive uid (not root)");
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
