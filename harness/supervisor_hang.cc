// The early end of a trial that can only hang.
//
// A hung trial used to run to its timeout (15-20 s in most scenarios) before
// anyone knew. But once every live worker of the trial has an op open past
// the point where the checkers call it a hang whatever happens next - its
// deadline + grace, not counting what its process waited for a CPU, plus a
// margin - and the supervisor has nothing left to do (no action, trigger or
// timer pending, so no fault still to deliver or window still to close),
// nothing can change the verdict: the trial ends there, as at its timeout,
// and the checkers judge the open ops exactly as they would have then.
//
// Deliberately narrow, so it never ends a trial that could still come out
// otherwise: only where the history holds every op's CPU wait (an external
// subject's adapter writes cpu_wait_ns as the native worker does; an invoke
// without it never counts as overdue), no launcher, no container (their
// processes are not our children, or see other pids), no process of the
// trial we did not start still alive (a loader worker, a launched rank),
// none of the workers dead for less than a second (what it left behind may
// still act), and no worker stopped at the look. A worker's own stops are
// not counted against its op's deadline, here as in the checkers
// (checks::stopped_ns): the supervisor keeps each worker's windows as it
// logs them (Worker::stops). A stop of another process counts, as there: a
// subject must fail at its deadline while a peer is stopped. Until
// 2026-11-29 any stop kept the watcher off, and the sometimes-on pauses (a
// few ms, in many trials) left hung trials running to their timeout: a
// barrier that never noticed a death was caught at 15 s instead of 5.
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "supervisor_internal.h"

namespace harness::supervision {

namespace {
constexpr std::int64_t kAfterDeathNs = 1'000'000'000;
}  // namespace

void OpenOps::update(const std::string& history) {
  tail_.read(history, [&](std::string_view line) {
    // Only invokes and completions matter; skip the rest unparsed.
    if (line.find("\"invoke\"") == std::string_view::npos && line.find("\"ok\"") == std::string_view::npos &&
        line.find("\"fail\"") == std::string_view::npos && line.find("\"info\"") == std::string_view::npos)
      return;
    auto e = Json::parse(line, nullptr, false);
    const std::int64_t id = e.is_object() ? int_of(e, "id", -1) : -1;
    if (id < 0) return;
    const std::string type = str_of(e, "type");
    const int pid = static_cast<int>(int_of(e, "pid", -1));
    if (type == "invoke") {
      open_[pid][id] = Open{str_of(e, "op"), int_of(e, "t", 0), int_of(e, "cpu_wait_ns", -1),
                            int_of(e, "cpu_run_ns", -1)};
    } else if (type == "ok" || type == "fail" || type == "info") {
      // A result split over continuation lines completes the op at its first.
      if (auto it = open_.find(pid); it != open_.end()) it->second.erase(id);
    }
  });
}

bool Supervisor::watches_hangs() const { return !cfg_.hang_after_ns.empty() && pids_are_ours(); }

std::string Supervisor::hangs(std::int64_t now, bool nothing_planned_left) {
  if (!nothing_planned_left || !watches_hangs() || now < next_hang_look_) return "";
  next_hang_look_ = now + 250'000'000;  // a look costs a read and a parse of what is new
  for (const auto& [pid, t] : tracked_) {
    if (t.alive) return "";
  }
  // A process the trial never announced may still act for a worker that
  // just died: CPython's resource tracker unlinks its dead parent's segments
  // within milliseconds, and the teardown would kill it first. A second
  // after the last death, it has.
  for (const auto& [pid, w] : workers_) {
    if (!w.alive && w.exited_t > now - kAfterDeathNs) return "";
  }
  open_ops_.update(trial_dir_ + "/history.jsonl");
  std::string why;
  int live = 0;
  for (const auto& [pid, w] : workers_) {
    if (!w.alive || w.plan == nullptr) continue;
    ++live;
    auto it = open_ops_.open().find(w.self_pid);
    if (it == open_ops_.open().end() || it->second.empty()) return "";  // between ops: it may go on
    if (w.stopped_now()) return "";  // its op's time is not running
    const std::int64_t wait_now = cpu_wait_ns_of(pid);
    bool overdue = false;
    for (const auto& [id, o] : it->second) {
      auto bound = cfg_.hang_after_ns.find(o.op);
      if (bound == cfg_.hang_after_ns.end() || o.cpu_wait_ns < 0 || wait_now < 0) continue;
      const std::int64_t open_for = now - o.invoke_t -
                                    std::max<std::int64_t>(0, wait_now - o.cpu_wait_ns) -
                                    w.stopped_within(o.invoke_t, now);
      if (open_for <= bound->second) continue;
      overdue = true;
      if (why.empty())
        why = fmt::format("job {} rank {} (pid {}): {} open {} ms, past {} ms", w.job, w.rank, w.self_pid, o.op,
                          open_for / 1'000'000, bound->second / 1'000'000);
      break;
    }
    if (!overdue) return "";
  }
  if (live == 0) return "";
  return fmt::format("every live worker ({}) has an op open past its deadline + grace + margin, e.g. {}", live, why);
}

}  // namespace harness::supervision
