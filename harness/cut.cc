#include "cut.h"

#include <fmt/format.h>

#include <algorithm>

namespace harness {
namespace {

// The supervisor's own event types (docs/worker-protocol.md): its lines are
// bounded by its clock, not by the writer rule, since it judges between them.
bool supervisor_type(const std::string& type) {
  static const std::set<std::string> types = {"trial",    "fault",         "exit", "audit", "gate",
                                              "teardown", "harness-error", "cpu",  "alive"};
  return types.contains(type);
}

}  // namespace

void CutPoint::add(Json event) {
  if (broken_) return;
  // A trial that writes this much is judged at its end: every look rebuilds
  // the record from all of it, and memory stays bounded.
  if (events_.size() >= kMaxEvents) {
    broken_ = true;
    events_.clear();
    return;
  }
  if (!event.is_object()) {
    broken_ = true;
    return;
  }
  auto t = event.find("t");
  auto type = event.find("type");
  auto pid = event.find("pid");
  if (t == event.end() || !t->is_number_integer() || type == event.end() || !type->is_string()) {
    broken_ = true;  // build_history will call it a history error; no cut judges it
    return;
  }
  const std::string kind = type->get<std::string>();
  if (!supervisor_type(kind)) {
    // A launcher's record is the supervisor's, written when it learns of it:
    // not in time order with anything. Cuts are for trials without one.
    auto role = event.find("role");
    if (pid == event.end() || !pid->is_number_integer() ||
        (kind == "start" && role != event.end() && role->is_string() &&
         role->get<std::string>() == "launcher")) {
      broken_ = true;
    } else {
      const int p = pid->get<int>();
      const std::int64_t at = t->get<std::int64_t>();
      if (kind == "ok" || kind == "fail") news_.insert(at);
      auto [it, fresh] = last_.try_emplace(p, at);
      if (!fresh) {
        if (at < it->second) broken_ = true;
        it->second = std::max(it->second, at);
      }
    }
  }
  // The supervisor's look at a spinning op, or at a live worker (a hold
  // certain for longer), is evidence a verdict may turn on, as a completion is.
  if (kind == "cpu" || kind == "alive") news_.insert(t->get<std::int64_t>());
  events_.push_back(std::move(event));
}

std::optional<std::int64_t> CutPoint::last_line(int pid) const {
  auto it = last_.find(pid);
  if (it == last_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::int64_t> CutPoint::cut(std::int64_t now, const std::vector<int>& live,
                                          const std::set<int>& known,
                                          const std::map<int, std::int64_t>& quiet) const {
  if (broken_) return std::nullopt;
  for (const auto& [pid, t] : last_) {
    if (!known.contains(pid)) return std::nullopt;  // a writer we do not know of may write anything
  }
  std::int64_t w = now;
  for (int pid : live) {
    auto it = last_.find(pid);
    if (it == last_.end())
      return std::nullopt;  // its first line may come with any time from its start
    auto q = quiet.find(pid);
    w = std::min(w, q == quiet.end() ? it->second : std::max(it->second, q->second));
  }
  return w;
}

std::vector<std::string> cut_invariants(const std::map<std::string, std::string>& excused) {
  std::vector<std::string> out;
  for (const CheckerInfo& c : checker_registry()) {
    if (c.judges_cuts && !excused.contains(c.invariant)) out.push_back(c.invariant);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> CutJudgement::invalid() const {
  std::vector<std::string> out;
  for (const CheckResult& c : checks) {
    if (c.verdict == Verdict::kInvalid) out.push_back(c.invariant);
  }
  return out;
}

CutJudgement judge_cut(const std::vector<Json>& events, const TrialMeta& meta, std::int64_t cut_t,
                       const std::vector<std::string>& invariants) {
  CutJudgement j;
  j.history = build_history(events, meta, &j.errors, cut_t);
  if (invariants.empty()) return j;  // run_checkers would run every checker
  j.checks = run_checkers(j.history, invariants);
  j.decisive = j.errors.empty() && !j.invalid().empty();
  return j;
}

std::vector<std::string> unsound_cuts(const std::vector<Json>& events, const TrialMeta& meta,
                                      const std::vector<std::string>& invariants,
                                      std::size_t max_cuts, std::size_t* cuts,
                                      std::size_t* invalid_cuts) {
  std::vector<std::string> out;
  std::vector<std::string> errors;
  const History whole = build_history(events, meta, &errors);
  std::set<std::string> invalid_whole;
  for (const CheckResult& c : run_checkers(whole, invariants)) {
    if (c.verdict == Verdict::kInvalid) invalid_whole.insert(c.invariant);
  }
  std::set<std::int64_t> times;
  for (const Json& e : events) {
    if (!e.is_object()) continue;
    auto t = e.find("t");
    if (t != e.end() && t->is_number_integer()) times.insert(t->get<std::int64_t>());
  }
  // Every cut of a record of n events costs O(n) each: a long record is
  // judged at max_cuts of them, evenly spread, its last always among them.
  std::vector<std::int64_t> at_times(times.begin(), times.end());
  if (max_cuts > 1 && at_times.size() > max_cuts) {
    std::vector<std::int64_t> some;
    for (std::size_t i = 0; i < max_cuts; ++i)
      some.push_back(at_times[i * (at_times.size() - 1) / (max_cuts - 1)]);
    at_times = std::move(some);
  }
  for (const std::int64_t at : at_times) {
    const CutJudgement j = judge_cut(events, meta, at, invariants);
    if (!j.errors.empty()) continue;  // decides nothing, whatever it says
    ++*cuts;
    if (!j.decisive) continue;
    ++*invalid_cuts;
    for (const CheckResult& c : j.checks) {
      if (c.verdict != Verdict::kInvalid || invalid_whole.contains(c.invariant)) continue;
      out.push_back(fmt::format("cut at +{:.3f} ms: {} invalid ({}), the whole trial not",
                                (at - whole.start_t) / 1e6, c.invariant,
                                c.problems.empty() ? std::string() : c.problems.front()));
    }
  }
  return out;
}

}  // namespace harness
