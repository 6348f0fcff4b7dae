// The early end of a trial that is already invalid (--stop-on-violation).
//
// Every 25 ms of a running trial (and at most a twentieth of its time: after
// a look that took d, the next comes no sooner than 20 d later), the
// supervisor reads what the history has grown by, finds the latest instant the record is complete
// up to (cut.h: every live worker has written a line at or after it, and the supervisor's own lines
// before it are all written, since it is the one looking), and, if that instant moved, judges the
// record up to it with the checkers that judge cuts. An invalid verdict there is the whole trial's,
// whatever it would do next: the supervisor writes a `trial` event of phase "cut" at that instant
// and ends the trial as at its end (heal, teardown, audit; no cleanup step). The
// last look comes when the last worker is gone. The run judges the record up
// to the mark (check_trial_dir).
//
// Narrower than the early end of a hung trial: the native subject only (the
// run sets cut_meta only for it), no launcher, no container (pids collide
// across them), no process of the trial we did not start (a loader worker
// writes lines we cannot bound), and not before every setting is logged.
#include "supervisor_internal.h"

namespace harness::supervision {

namespace {
// Looks come at most this often, and at most 1/kCutBudget of the
// supervisor's time goes to them: a look rebuilds the record from all of it
// (a trial of thousands of barrier rounds takes milliseconds), and 32 trials
// share two cores.
constexpr std::int64_t kCutLookNs = 25'000'000;
constexpr std::int64_t kCutBudget = 20;
}  // namespace

bool Supervisor::pids_are_ours() const {
  return plan_.launchers.empty() &&
         std::none_of(plan_.workers.begin(), plan_.workers.end(),
                      [](const WorkerPlan& w) { return w.container >= 0; });
}

bool Supervisor::watches_cuts() const {
  if (!cfg_.cut_meta || cfg_.cut_invariants.empty() || tracks_processes_ || !pids_are_ours() ||
      cut_point_.broken()) {
    return false;
  }
  return std::none_of(plan_.workers.begin(), plan_.workers.end(),
                      [](const WorkerPlan& w) { return w.loader_workers > 0; });
}

bool Supervisor::cuts(std::int64_t now, bool settled) {
  if (!settled || now < next_cut_look_ || !watches_cuts()) return false;
  next_cut_look_ = now + kCutLookNs;
  look_at_silent(now);  // before the read: what it shows holds for the lines read after
  cut_tail_.read(trial_dir_ + "/history.jsonl",
                 [&](std::string_view line) { cut_point_.add(Json::parse(line, nullptr, false)); });
  std::vector<int> live;
  std::set<int> known;
  for (const auto& [pid, w] : workers_) {
    known.insert(w.self_pid);
    if (w.alive && w.plan != nullptr) live.push_back(w.self_pid);
  }
  const std::optional<std::int64_t> at = cut_point_.cut(now, live, known, quiet_until());
  if (!at || *at <= last_cut_ || !cut_point_.news_before(*at)) return false;
  last_cut_ = *at;
  cut_point_.judged(*at);
  const CutJudgement j = judge_cut(cut_point_.events(), *cfg_.cut_meta, *at, cfg_.cut_invariants);
  const std::int64_t judged = mono_ns();
  next_cut_look_ = std::max(next_cut_look_, judged + kCutBudget * (judged - now));
  if (!j.decisive) return false;
  log_.emit({{"type", "trial"}, {"phase", "cut"}, {"t", *at}, {"invalid", j.invalid()}});
  cut_ = true;
  return true;
}

}  // namespace harness::supervision
