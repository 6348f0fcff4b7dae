// Judging a running trial (docs/architecture.md, "Judging a running trial").
//
// Under --stop-on-violation a run wants its first violation, not the end of
// the trial that shows it. A trial's record is complete up to an instant W
// once every process that may still write to it has written a line at or
// after W: each writer takes a line's time before it writes the line and
// writes its lines in time order, so nothing it writes later can be earlier.
// The events with t < W are then a prefix of every record the trial can go
// on to write, and a checker whose invalid verdicts survive every extension
// (CheckerInfo::judges_cuts) may judge them: an invalid verdict there is the
// whole trial's, already. The supervisor looks for such a cut while the trial
// runs (supervisor_cut.cc), writes a `trial` event of phase "cut" at W when
// it finds one, and ends the trial; the run judges the record up to that mark.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checker.h"
#include "history.h"

namespace harness {

// Where a running trial's record is complete, from the lines read so far.
// Lives in the supervisor; fed history.jsonl's complete lines in file order.
class CutPoint {
 public:
  // A line of the history, in file order. A worker line that is older than
  // the same writer's previous one (a writer that does not keep its lines in
  // time order), or a launcher's, makes every later cut() nullopt: the rule
  // above no longer holds for that trial.
  void add(Json event);

  // The latest instant the record is complete up to: `now` (the supervisor's
  // clock as it began this look: every line it writes from here on is later)
  // or, if earlier, the last line of any process in `live` (pids as logged;
  // the processes that may still write), or for a process in `quiet` the
  // later of that and its quiet instant (every line it stamped up to then is
  // known written: Supervisor::quiet_until). nullopt when a live process has
  // not written yet, or a line came from a pid outside `known`.
  std::optional<std::int64_t> cut(std::int64_t now, const std::vector<int>& live,
                                  const std::set<int>& known,
                                  const std::map<int, std::int64_t>& quiet = {}) const;

  const std::vector<Json>& events() const { return events_; }
  bool broken() const { return broken_; }
  // The t of writer `pid`'s last line read (nullopt: none yet).
  std::optional<std::int64_t> last_line(int pid) const;
  // Whether a line a verdict may turn on - an op's completion (ok / fail), or
  // the supervisor's look at an op's CPU (cpu) - is before `w` and was not
  // before the last judged cut. Judging later only delays a verdict a cut
  // reaches (invalid at one cut is invalid at every later one), so a look
  // judges only then.
  bool news_before(std::int64_t w) const { return !news_.empty() && *news_.begin() < w; }
  // A cut at `w` was judged: what is before it is no longer news.
  void judged(std::int64_t w) { news_.erase(news_.begin(), news_.lower_bound(w)); }

  static constexpr std::size_t kMaxEvents = 20'000;

 private:
  std::vector<Json> events_;
  std::map<int, std::int64_t> last_;  // writer pid -> t of its last line
  std::multiset<std::int64_t>
      news_;  // t of each line news_before() counts, from the last judged cut
  bool broken_ = false;
};

// The invariants whose checkers judge cuts, minus those in `excused` (a
// scenario's excuses: a violation of one must not stop its trial).
std::vector<std::string> cut_invariants(const std::map<std::string, std::string>& excused);

// A record judged at a cut: the record up to cut_t (build_history with
// cut_t), the checks of `invariants` on it, and its own history errors.
struct CutJudgement {
  History history;
  std::vector<CheckResult> checks;
  std::vector<std::string> errors;
  // The rule every user of a cut follows (the supervisor stopping a trial,
  // the run judging a stopped one, the self-check): a cut decides the trial
  // only if its record fits the protocol and one of `invariants` is invalid.
  bool decisive = false;
  // Those invalid invariants, in `invariants` order.
  std::vector<std::string> invalid() const;
};
CutJudgement judge_cut(const std::vector<Json>& events, const TrialMeta& meta, std::int64_t cut_t,
                       const std::vector<std::string>& invariants);

// The self-check of judges_cuts over a stored record (shmstress check
// --every-cut): the record is judged whole (its cut marks ignored) and at
// every cut it has (before each distinct event time), with `invariants`. A
// cut that calls an invariant invalid which the whole record does not is
// unsound: a --stop-on-violation run could have stopped on it. A cut whose
// record has history errors decides nothing (neither the supervisor nor the
// run judges one) and is skipped. A record with more distinct event times
// than max_cuts (> 1) is judged at max_cuts of them, evenly spread, the last
// included. One line per unsound cut and invariant; `cuts` and
// `invalid_cuts` count the cuts judged and those with an invalid verdict.
std::vector<std::string> unsound_cuts(const std::vector<Json>& events, const TrialMeta& meta,
                                      const std::vector<std::string>& invariants,
                                      std::size_t max_cuts, std::size_t* cuts,
                                      std::size_t* invalid_cuts);

}  // namespace harness
