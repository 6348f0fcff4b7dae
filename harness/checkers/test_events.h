// Hand-written protocol events for checker tests (docs/worker-protocol.md),
// built into a History as a real trial's would be: ops of ranks and of their
// loader workers, exits, and any raw event.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "checker.h"
#include "history.h"

namespace harness::testing_events {

inline constexpr std::int64_t kMs = 1'000'000;

class Events {
 public:
  Events() { add({{"t", 0}, {"type", "trial"}, {"phase", "start"}}); }

  // A process's op: worker -1 is the rank itself.
  Events& op(int job, int rank, int worker, int pid, const std::string& name, double t0, double t1, Json value = {},
             Json args = Json::object(), const char* outcome = "ok", const std::string& code = "") {
    const std::int64_t id = ++ids_[pid];
    add(ev("invoke", job, rank, worker, pid, t0, {{"op", name}, {"id", id}, {"args", args}}));
    if (std::string(outcome) == "open") return *this;
    Json done = {{"op", name}, {"id", id}};
    if (std::string(outcome) == "ok") {
      done["value"] = value.is_null() ? Json::object() : value;
    } else {
      done["error"] = {{"code", code}, {"message", code + " happened"}};
    }
    return add(ev(outcome, job, rank, worker, pid, t1, done));
  }
  Events& round(int job, int rank, int worker, int pid, int r, double t0, double t1) {
    return op(job, rank, worker, pid, "barrier", t0, t1, {{"round", r}}, {{"round", r}});
  }
  Events& exit(int job, int rank, int worker, int pid, double t, Json how) {
    Json e = {{"t", at(t)}, {"type", "exit"}, {"job", job}, {"rank", rank}, {"pid", pid}};
    if (worker >= 0) e["worker"] = worker, e["role"] = "loader";
    e.update(how);
    return add(e);
  }
  Events& add(Json e) {
    events_.push_back(std::move(e));
    return *this;
  }
  History build(const TrialMeta& meta, std::vector<std::string>* errors = nullptr) const {
    std::vector<std::string> own;
    History h = build_history(events_, meta, errors ? errors : &own);
    if (!errors) {
      EXPECT_TRUE(own.empty()) << own.front();
    }
    return h;
  }
  static std::int64_t at(double ms) { return static_cast<std::int64_t>(ms * kMs); }
  const std::vector<Json>& events() const { return events_; }

 private:
  Json ev(const char* type, int job, int rank, int worker, int pid, double t, Json extra) {
    Json e = {{"t", at(t)}, {"type", type}, {"job", job}, {"rank", rank}, {"local_rank", rank}, {"pid", pid}};
    if (worker >= 0) e["worker"] = worker;
    e.update(extra);
    return e;
  }
  std::vector<Json> events_;
  std::map<int, std::int64_t> ids_;
};

inline TrialMeta meta(int ranks, int rounds, int workers, bool cleanup_step = true) {
  TrialMeta m;
  m.scenario = "process-model";
  JobMeta j;
  j.ranks = ranks;
  j.barrier_rounds = rounds;
  j.barrier_workers = workers;
  m.jobs = {j};
  m.barrier_deadline_ns = 1000 * kMs;
  m.acquire_deadline_ns = 1000 * kMs;
  m.grace_ns = 500 * kMs;
  m.liveness_ns = 200 * kMs;
  m.cleanup_step = cleanup_step;
  return m;
}

inline CheckResult check(const std::string& invariant, const History& h) {
  auto r = run_checkers(h, {invariant});
  EXPECT_EQ(r.size(), 1u);
  return r.empty() ? CheckResult{} : r.front();
}

inline bool reached(const CheckResult& r, const std::string& s) {
  for (const auto& x : r.reached) {
    if (x == s) return true;
  }
  return false;
}

inline std::string dump(const CheckResult& r) {
  std::string s = r.invariant + " " + verdict_name(r.verdict) + "\n";
  for (const auto& p : r.problems) s += "  problem: " + p + "\n";
  return s;
}

}  // namespace harness::testing_events
