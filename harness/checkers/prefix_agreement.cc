// prefix.agreement: the ranks of one job end with the same prefix, or all fail
// with a clear error (DESIGN §4). Ranks cut off mid-acquire (info) say nothing
// either way and are left out. A rank whose failure a fault can cause (an
// injected permission error: "permission", by checkers/excuses.h) is excused:
// its failure is the fault's, not a split decision of the subject.
//
// At a cut (judges_cuts): every rule reads completed acquires and the faults
// begun before them, all final before the cut; an acquire still open there is
// left out, as one cut off by a death.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "checker.h"
#include "checkers/excuses.h"
#include "checkers/history_queries.h"

namespace harness {
namespace {

std::string error_of(const Op& op) {
  return fmt::format("{}: {}", op.error_code.empty() ? "(no code)" : op.error_code,
                     op.error_message);
}

CheckResult check_prefix_agreement(const History& h) {
  checks::Report rep("prefix.agreement");
  // The k-th acquire of every rank of a job is one decision.
  std::map<std::pair<int, int>, std::vector<const Op*>> rounds;  // (job, k) -> ops
  std::map<std::tuple<int, int, int>, int> seen;  // (job, rank, pid) -> acquires so far
  for (const Op& op : h.ops) {
    if (op.op != "acquire") continue;
    int k = seen[{op.job, op.rank, op.pid}]++;
    rounds[{op.job, k}].push_back(&op);
  }
  // A failure a fault made while another job certainly held a prefix: the
  // failing rank met a registry that was live and published (the path of a
  // rank that joins a busy node), not one it had to create. The holds are
  // built at the first such failure: most trials, and most looks at a cut,
  // have none.
  std::optional<std::vector<checks::JobHold>> holds;
  auto beside_live_job = [&](const Op& f) {
    if (!holds) holds = checks::prefix_holds(h);
    return std::any_of(holds->begin(), holds->end(), [&](const checks::JobHold& j) {
      return j.job != f.job && j.sure_start <= f.invoke_t && f.invoke_t < j.sure_end;
    });
  };
  for (const auto& [key, ops] : rounds) {
    const auto [job, k] = key;
    std::map<std::int64_t, std::vector<const Op*>> by_prefix;
    std::vector<const Op*> fails;
    for (const Op* op : ops) {
      if (op->outcome == Outcome::kOk) {
        const auto& p = op->prefix;
        if (!p) {
          rep.invalid(fmt::format("{} returned ok without a prefix: {}", checks::describe(h, *op),
                                  op->value.dump(-1, ' ', false, Json::error_handler_t::replace)));
          continue;
        }
        by_prefix[*p].push_back(op);
      } else if (op->outcome == Outcome::kFail) {
        fails.push_back(op);
        if (checks::fault_causing_failure(h, *op) != nullptr && beside_live_job(*op)) {
          rep.reach("acquire-failed-by-fault-beside-live-job");
        }
        if (op->error_code == "in-use") rep.reach("acquire-failed-in-use");
        if (op->error_code.empty() && op->error_message.empty()) {
          rep.invalid(
              fmt::format("{} failed without any error code or message", checks::describe(h, *op)));
        }
      }
    }
    std::string label =
        k == 0 ? fmt::format("job {}", job) : fmt::format("job {} (acquire #{})", job, k + 1);
    if (by_prefix.size() > 1) {
      std::string got;
      for (const auto& [p, holders] : by_prefix) {
        for (const Op* op : holders) {
          got += fmt::format("{}rank {} (pid {}) got prefix {} at {}", got.empty() ? "" : ", ",
                             op->rank, op->pid, p, checks::at(h, op->complete_t));
        }
      }
      rep.invalid(fmt::format("{}: ranks disagree on the prefix: {}", label, got));
    }
    if (by_prefix.empty()) {
      if (!fails.empty()) rep.reach("acquire-all-ranks-failed");
      continue;
    }
    const Op* winner = by_prefix.begin()->second.front();
    for (const Op* f : fails) {
      if (checks::fault_causing_failure(h, *f) != nullptr) {
        rep.reach("acquire-failed-by-fault");
        continue;
      }
      rep.invalid(fmt::format(
          "{}: rank {} (pid {}) got prefix {} at {}, but rank {} (pid {}) failed at {}: {}", label,
          winner->rank, winner->pid, by_prefix.begin()->first, checks::at(h, winner->complete_t),
          f->rank, f->pid, checks::at(h, f->complete_t), error_of(*f)));
    }
  }
  return rep.take();
}

}  // namespace
}  // namespace harness

SHMSTRESS_REGISTER_CHECKER(
    "prefix.agreement",
    "all ranks of a job end with the same prefix, or all fail with a clear error",
    harness::check_prefix_agreement,
    {"acquire-failed-in-use", "acquire-all-ranks-failed", "acquire-failed-by-fault",
     "acquire-failed-by-fault-beside-live-job"},
    /*judges_cuts=*/true);
