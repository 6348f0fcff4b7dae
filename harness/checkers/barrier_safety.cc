// barrier.safety: no participant leaves round r before every participant has
// entered round r (DESIGN §4).
//
// A participant is a seat (checks::seat): a rank, or a loader worker when the
// loader workers enter the barrier in their ranks' place. Its round is
// args.round of its barrier op (else its ordinal among its barrier ops; a
// retried wait keeps its round). The participants of a job's barrier are all
// its seats in the scenario (a barrier is for all of them: one that never
// arrives must break it, not be skipped) plus any seen using it. For every ok barrier op of
// round r: every participant must have invoked its round-r op no later than
// that op completed. All ranks released from round r must report the same
// round value (the subject's generation): two values mean they were released
// by different rounds, e.g. ranks of another job counted as ours.
//
// At a cut (judges_cuts): both rules stay invalid however the trial goes on.
// A participant's entry that is not before the cut comes after it, so after
// the leave it was missing from; two release values stay two.
#include <fmt/format.h>

#include <map>
#include <set>

#include "checker.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

struct Entry {
  const Op* op;
  std::int64_t round;
};

CheckResult check_barrier_safety(const History& h) {
  checks::Report rep("barrier.safety");
  // job -> seat -> barrier ops with their round, in invoke order.
  std::map<int, std::map<int, std::vector<Entry>>> jobs;
  std::map<int, std::set<int>> participants;
  for (const Op& op : h.ops) {
    const int me = checks::seat(h, op);
    if (op.op == "barrier_attach") participants[op.job].insert(me);
    if (op.op != "barrier") continue;
    auto& mine = jobs[op.job][me];
    std::int64_t round = op.round.value_or(static_cast<std::int64_t>(mine.size()));
    mine.push_back(Entry{&op, round});
    participants[op.job].insert(me);
    if (op.outcome == Outcome::kInfo && op.info_cause != kCauseTrialTimeout)
      rep.reach("killed-in-barrier");
    if (checks::json_int(op.args, "retry").value_or(0) > 0) rep.reach("barrier-wait-retried");
  }
  // A loader worker ended (destroying its copy of its rank's handles) while
  // the rank that forked it held a seat: the window in which a copy that acts
  // for its parent detaches the parent's seat.
  for (const Exit& e : h.exits) {
    if (e.worker < 0) continue;
    std::int64_t seated = checks::kNever, left = checks::kNever;
    for (const Op& op : h.ops) {
      if (op.job != e.job || op.rank != e.rank || op.worker >= 0 || op.outcome != Outcome::kOk) continue;
      if (op.op == "barrier_attach") seated = std::min(seated, op.complete_t);
      if (op.op == "barrier_detach") left = std::min(left, op.invoke_t);
    }
    if (seated < e.t && e.t < left) rep.reach("loader-exited-while-rank-seated");
  }
  for (std::size_t j = 0; j < h.meta.jobs.size(); ++j) {
    if (h.meta.jobs[j].barrier_rounds <= 0 || !jobs.contains(static_cast<int>(j))) continue;
    for (int r = 0; r < checks::seats(h, static_cast<int>(j)); ++r) participants[static_cast<int>(j)].insert(r);
  }

  for (const auto& [job, ranks] : jobs) {
    // round -> rank -> earliest entry
    std::map<std::int64_t, std::map<int, const Op*>> entered;
    for (const auto& [rank, entries] : ranks) {
      for (const Entry& e : entries) {
        auto& first = entered[e.round][rank];
        if (first == nullptr || e.op->invoke_t < first->invoke_t) first = e.op;
      }
    }
    // A rank already in round r+1 while another is still in round r: the
    // window in which a reset or a lapping participant breaks a barrier.
    // (From the earliest entries: a history of thousands of rounds is judged
    // often, at every cut of a running trial.)
    bool overlapped = false;
    for (const auto& [rank, entries] : ranks) {
      for (const Entry& e : entries) {
        auto next = entered.find(e.round + 1);
        if (next == entered.end()) continue;
        for (const auto& [other, in] : next->second) {
          overlapped = overlapped || (other != rank && in->invoke_t < e.op->complete_t);
        }
      }
    }
    if (overlapped) rep.reach("barrier-rounds-overlapped");
    for (const auto& [round, by_rank] : entered) {
      std::map<std::int64_t, const Op*> values;  // reported round value -> one op that reported it
      std::set<int> reported;                    // missing ranks already named for this round
      for (const auto& [rank, entries] : ranks) {
        for (const Entry& e : entries) {
          if (e.round != round || e.op->outcome != Outcome::kOk) continue;
          const Op& left = *e.op;
          if (left.generation) values.emplace(*left.generation, &left);
          for (int p : participants[job]) {
            auto it = by_rank.find(p);
            const Op* in = it == by_rank.end() ? nullptr : it->second;
            if (in != nullptr && in->invoke_t <= left.complete_t) continue;
            if (!reported.insert(p).second) continue;
            rep.invalid(fmt::format(
                "job {} round {}: {} (pid {}) left at {} before {} entered ({})", job, round,
                checks::seat_name(h, job, checks::seat(h, left)), left.pid, checks::at(h, left.complete_t),
                checks::seat_name(h, job, p),
                in == nullptr
                    ? std::string("it never entered that round")
                    : fmt::format("pid {} entered at {}", in->pid, checks::at(h, in->invoke_t))));
          }
        }
      }
      if (values.size() > 1) {
        std::string list;
        for (const auto& [v, op] : values) {
          list += fmt::format("{}{} (pid {}) as round {}", list.empty() ? "" : ", ",
                              checks::seat_name(h, job, checks::seat(h, *op)), op->pid, v);
        }
        rep.invalid(fmt::format("job {} round {}: ranks were released by different rounds: {}", job,
                                round, list));
      }
    }
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER("barrier.safety",
                           "no participant leaves round r before every participant has entered it",
                           harness::check_barrier_safety,
                           {"killed-in-barrier", "barrier-rounds-overlapped",
                            "loader-exited-while-rank-seated", "barrier-wait-retried"},
                           /*judges_cuts=*/true);
