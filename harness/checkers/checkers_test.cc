// Each checker over small hand-written histories: one that holds, one that
// breaks the invariant (with the problem line naming the offender), and the
// boundary cases each rule is there for. Histories go through build_history,
// as a real trial's would.
#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "checker.h"
#include "checkers/history_queries.h"
#include "checkers/excuses.h"
#include "history.h"

namespace harness {
namespace {

constexpr std::int64_t kMs = 1'000'000;

int Pid(int job, int rank) { return 1000 + 100 * job + rank; }

// Writes the events of a trial in milliseconds since its start.
class Trial {
 public:
  Trial() { Add({{"t", 0}, {"type", "trial"}, {"phase", "start"}}); }

  Trial& Ok(int job, int rank, const std::string& op, double t0, double t1,
            Json value = Json::object(), Json args = Json::object()) {
    auto id = Invoke(job, rank, op, t0, std::move(args));
    Add(Worker("ok", job, rank, t1, {{"id", id}, {"value", std::move(value)}}));
    return *this;
  }
  Trial& Fail(int job, int rank, const std::string& op, double t0, double t1,
              const std::string& code, const std::string& message, Json args = Json::object()) {
    auto id = Invoke(job, rank, op, t0, std::move(args));
    Add(Worker("fail", job, rank, t1,
               {{"id", id}, {"error", {{"code", code}, {"message", message}}}}));
    return *this;
  }
  // An op that never completes (the worker dies or hangs in it).
  Trial& Open(int job, int rank, const std::string& op, double t0, Json args = Json::object()) {
    Invoke(job, rank, op, t0, std::move(args));
    return *this;
  }
  Trial& Acquire(int job, int rank, double t0, double t1, int prefix) {
    return Ok(job, rank, "acquire", t0, t1, {{"prefix", prefix}});
  }
  Trial& Release(int job, int rank, double t0, double t1) {
    return Ok(job, rank, "release", t0, t1);
  }
  Trial& Round(int job, int rank, int round, double t0, double t1) {
    return Ok(job, rank, "barrier", t0, t1, {{"round", round}}, {{"round", round}});
  }
  Trial& Clean(int job, int rank, double t0, double t1, std::vector<std::string> removed,
               std::vector<std::string> kept = {}) {
    return Ok(job, rank, "clean", t0, t1,
              {{"removed", removed}, {"kept", kept}, {"skipped", Json::array()}});
  }
  // A segment the rank created, with its inode.
  Trial& Segment(int job, int rank, double t0, double t1, const std::string& name, int ino) {
    return Ok(job, rank, "segment", t0, t1, {{"name", name}, {"dev", 7}, {"ino", ino}},
              {{"name", name}});
  }
  // A witness: each entry is {name, ino} (ino 0: missing, -1: an error).
  Trial& Witness(int job, int rank, double t0, double t1,
                 std::vector<std::pair<std::string, int>> seen, bool truncated = false) {
    Json list = Json::array();
    for (const auto& [name, ino] : seen) {
      if (ino > 0) {
        list.push_back({{"name", name}, {"dev", 7}, {"ino", ino}});
      } else if (ino == 0) {
        list.push_back({{"name", name}, {"missing", true}});
      } else {
        list.push_back({{"name", name}, {"error", "EACCES: Permission denied"}});
      }
    }
    Json value = {{"segments", list}};
    if (truncated) value["truncated"] = true;
    return Ok(job, rank, "witness", t0, t1, value, {{"when", "release"}});
  }
  Trial& Exit(int job, int rank, double t, int code) {
    return Add({{"t", T(t)},
                {"type", "exit"},
                {"job", job},
                {"rank", rank},
                {"pid", Pid(job, rank)},
                {"exit_code", code}});
  }
  Trial& Killed(int job, int rank, double t, bool by_harness = true, int sig = SIGKILL,
                bool teardown = false) {
    if (by_harness && !teardown) Fault("sigkill", job, rank, t - 0.5, t - 0.5);
    return Add({{"t", T(t)},
                {"type", "exit"},
                {"job", job},
                {"rank", rank},
                {"pid", Pid(job, rank)},
                {"signal", sig},
                {"by_harness", by_harness},
                {"teardown", teardown}});
  }
  Trial& Point(int job, int rank, double t, const std::string& name) {
    return Add(Worker("point", job, rank, t, {{"name", name}}));
  }
  Trial& Fds(int job, int rank, double t, int count) {
    return Add(Worker("fds", job, rank, t, {{"count", count}}));
  }
  Trial& Fault(const std::string& kind, int job, int rank, double t0, double t1,
               Json detail = Json::object()) {
    Json base = {
        {"type", "fault"}, {"kind", kind}, {"job", job}, {"rank", rank}, {"detail", detail}};
    if (rank >= 0) base["pid"] = Pid(job, rank);
    if (t0 == t1) {
      Json e = base;
      e["t"] = T(t0);
      e["phase"] = "instant";
      return Add(e);
    }
    Json s = base, e = base;
    s["t"] = T(t0), s["phase"] = "start";
    e["t"] = T(t1), e["phase"] = "end";
    Add(s);
    return Add(e);
  }
  Trial& Audit(double t, std::vector<std::string> shm = {}, std::vector<std::string> locks = {},
               std::vector<int> orphans = {}) {
    return Add({{"t", T(t)},
                {"type", "audit"},
                {"leftover_shm", shm},
                {"leftover_locks", locks},
                {"orphans", orphans}});
  }
  // An audit that let the trial's remaining processes run `wait_ms` (deadlines.cleanup).
  Trial& AuditWaited(double t, double wait_ms, bool exited, double settled, std::vector<std::string> shm = {}) {
    Json e = {{"t", T(t)}, {"type", "audit"}, {"leftover_shm", shm}, {"leftover_locks", Json::array()},
              {"orphans", Json::array()}, {"straggler_wait_ms", static_cast<std::int64_t>(wait_ms)},
              {"stragglers_exited", exited}};
    if (exited) e["settled_t"] = T(settled);
    return Add(e);
  }
  Trial& End(double t, bool timed_out = false) {
    return Add({{"t", T(t)}, {"type", "trial"}, {"phase", "end"}, {"timed_out", timed_out}});
  }

  // The worker's cumulative wait for a CPU (cpu_wait_ns) as its latest
  // invoke and its latest completion logged it.
  Trial& CpuWait(double at_invoke_ms, double at_complete_ms) {
    bool invoke = false, complete = false;
    for (auto it = events_.rbegin(); it != events_.rend() && !(invoke && complete); ++it) {
      const std::string type = (*it)["type"];
      if (!invoke && type == "invoke") (*it)["cpu_wait_ns"] = T(at_invoke_ms), invoke = true;
      if (!complete && (type == "ok" || type == "fail")) (*it)["cpu_wait_ns"] = T(at_complete_ms), complete = true;
    }
    return *this;
  }
  // What the supervisor measured at the latest exit: the worker's final
  // cpu_wait_ns (from its zombie) and its own wait since its previous look.
  Trial& ExitWaits(double worker_ms, double reaper_ms) {
    for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
      if ((*it)["type"] != "exit") continue;
      (*it)["cpu_wait_ns"] = T(worker_ms);
      (*it)["reaper_wait_ns"] = T(reaper_ms);
      break;
    }
    return *this;
  }

  History Build(const TrialMeta& meta = {}) const {
    std::vector<std::string> errors;
    History h = build_history(events_, meta, &errors);
    EXPECT_TRUE(errors.empty()) << errors.front();
    return h;
  }
  History BuildWithErrors(const TrialMeta& meta, std::vector<std::string>* errors) const {
    return build_history(events_, meta, errors);
  }

 private:
  static std::int64_t T(double ms) { return static_cast<std::int64_t>(ms * kMs); }
  Trial& Add(Json e) {
    events_.push_back(std::move(e));
    return *this;
  }
  Json Worker(const char* type, int job, int rank, double t, Json extra) {
    Json e = {{"t", T(t)},    {"type", type},       {"job", job},
              {"rank", rank}, {"local_rank", rank}, {"pid", Pid(job, rank)}};
    e.update(extra);
    return e;
  }
  std::int64_t Invoke(int job, int rank, const std::string& op, double t0, Json args) {
    std::int64_t id = ++next_id_[{job, rank}];
    Add(Worker("invoke", job, rank, t0, {{"op", op}, {"id", id}, {"args", std::move(args)}}));
    return id;
  }

  std::vector<Json> events_;
  std::map<std::pair<int, int>, std::int64_t> next_id_;
};

JobMeta Job(int ranks, int rounds = 0, std::vector<std::string> dirs = {}, bool remote = true) {
  JobMeta j;
  j.ranks = ranks;
  j.barrier_rounds = rounds;
  j.dirs = dirs;
  j.has_remote.assign(dirs.size(), remote);
  return j;
}

TrialMeta Meta(std::vector<JobMeta> jobs = {}) {
  TrialMeta m;
  m.scenario = "test";
  m.jobs = std::move(jobs);
  m.acquire_deadline_ns = 1000 * kMs;
  m.barrier_deadline_ns = 1000 * kMs;
  m.grace_ns = 500 * kMs;
  m.fd_bound = 16;
  m.cleanup_step = true;
  return m;
}

CheckResult Check(const std::string& invariant, const History& h) {
  auto results = run_checkers(h, {invariant});
  EXPECT_EQ(results.size(), 1u);
  return results.empty() ? CheckResult{} : results.front();
}

std::string Dump(const CheckResult& r) {
  std::string s = r.invariant + " " + verdict_name(r.verdict) + "\n";
  for (const auto& p : r.problems) s += "  problem: " + p + "\n";
  for (const auto& p : r.reached) s += "  reached: " + p + "\n";
  return s;
}

// Some single problem line mentions every part.
bool Names(const CheckResult& r, std::initializer_list<std::string> parts) {
  for (const auto& p : r.problems) {
    bool all = true;
    for (const auto& part : parts) all = all && p.find(part) != std::string::npos;
    if (all) return true;
  }
  return false;
}

bool Reached(const CheckResult& r, const std::string& state) {
  for (const auto& s : r.reached) {
    if (s == state) return true;
  }
  return false;
}

#define EXPECT_VERDICT(r, v) EXPECT_EQ((r).verdict, Verdict::v) << Dump(r)

// ---------------------------------------------------------------- registry

TEST(Checkers, EveryInvariantOfTheDesignIsRegisteredWithASummary) {
  std::set<std::string> ids;
  for (const auto& c : checker_registry()) {
    ids.insert(c.invariant);
    EXPECT_FALSE(c.summary.empty()) << c.invariant;
  }
  for (const char* id : {"prefix.unique", "prefix.agreement", "prefix.exclusive-local",
                         "prefix.progress", "barrier.safety", "barrier.liveness", "cleanup.no-leak",
                         "cleanup.safety", "worker.clean-exit", "worker.exits", "harness.no-orphans"}) {
    EXPECT_TRUE(ids.contains(id)) << id;
  }
}

TEST(Checkers, VerdictNamesAndComposition) {
  EXPECT_STREQ(verdict_name(Verdict::kValid), "valid");
  EXPECT_STREQ(verdict_name(Verdict::kUnknown), "unknown");
  EXPECT_STREQ(verdict_name(Verdict::kInvalid), "invalid");
  EXPECT_EQ(compose(Verdict::kUnknown, Verdict::kValid), Verdict::kUnknown);
  EXPECT_EQ(compose(Verdict::kUnknown, Verdict::kInvalid), Verdict::kInvalid);
}

TEST(Checkers, OnlyRunsTheNamedOnesAndAnUnknownNameIsInconclusive) {
  History h = Trial().End(10).Build(Meta());
  auto results = run_checkers(h, {"barrier.safety", "no.such-invariant"});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].invariant, "barrier.safety");
  EXPECT_EQ(results[1].invariant, "no.such-invariant");
  EXPECT_VERDICT(results[1], kUnknown);
}

CheckResult Throws(const History&) { throw std::runtime_error("boom"); }
SHMSTRESS_REGISTER_CHECKER("test.throws", "a checker that throws", Throws);

TEST(Checkers, AThrowingCheckerIsUnknownNotACrash) {
  History h = Trial().End(10).Build(Meta());
  CheckResult r = Check("test.throws", h);
  EXPECT_VERDICT(r, kUnknown);
  EXPECT_TRUE(Names(r, {"boom"})) << Dump(r);
}

TEST(Checkers, EveryReachedStateIsDeclaredByItsChecker) {
  // A busy history that reaches many states at once.
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Acquire(0, 1, 1, 2, 0)
                  .Ok(0, 0, "barrier_attach", 3, 4)
                  .Ok(0, 1, "barrier_attach", 3, 4)
                  .Open(0, 0, "barrier", 5, {{"round", 0}})
                  .Killed(0, 0, 6)
                  .Fail(0, 1, "barrier", 5, 7, "broken", "rank 0 died", {{"round", 0}})
                  .Exit(0, 1, 8, 1)
                  .Fail(1, 0, "acquire", 1, 2, "in-use", "/data/x in use")
                  .Exit(1, 0, 3, 1)
                  .Clean(2, 0, 20, 21, {"/shm.000000_barrier"})
                  .Exit(2, 0, 22, 0)
                  .Audit(30)
                  .End(31)
                  .Build(Meta({Job(2, 1, {"/data/x"}), Job(1, 0, {"/data/x"}), Job(1)}));
  std::map<std::string, std::set<std::string>> declared;
  for (const auto& c : checker_registry())
    declared[c.invariant].insert(c.reached_states.begin(), c.reached_states.end());
  for (const auto& r : run_checkers(h)) {
    for (const auto& s : r.reached)
      EXPECT_TRUE(declared[r.invariant].contains(s)) << r.invariant << ": " << s;
  }
}

// ----------------------------------------------------------- prefix.unique

TEST(PrefixUnique, JobsOnDistinctPrefixesAreValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Acquire(1, 0, 1, 3, 1)
                  .Release(0, 0, 10, 11)
                  .Release(1, 0, 10, 11)
                  .Exit(0, 0, 12, 0)
                  .Exit(1, 0, 12, 0)
                  .End(20)
                  .Build(Meta());
  EXPECT_VERDICT(Check("prefix.unique", h), kValid);
}

TEST(PrefixUnique, TwoLiveJobsOverlappingOnOnePrefixIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Acquire(1, 0, 3, 4, 0)
                  .Release(0, 0, 10, 11)
                  .Release(1, 0, 12, 13)
                  .Exit(0, 0, 14, 0)
                  .Exit(1, 0, 14, 0)
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(
      Names(r, {"prefix 0", "job 0 (pids 1000)", "job 1 (pids 1100)", "+2.000ms", "+4.000ms"}))
      << Dump(r);
}

// Two datasets of one process (train and val under one job key): each acquire
// is paired with the release of the same dataset (args.dataset).
TEST(PrefixUnique, OneProcessHoldingOnePrefixForTwoDatasetsIsInvalid) {
  History h = Trial()
                  .Ok(0, 0, "acquire", 1, 2, {{"prefix", 0}}, {{"dataset", 0}})
                  .Ok(0, 0, "acquire", 3, 4, {{"prefix", 0}}, {{"dataset", 1}})
                  .Ok(0, 0, "release", 10, 11, Json::object(), {{"dataset", 1}})
                  .Ok(0, 0, "release", 20, 21, Json::object(), {{"dataset", 0}})
                  .Exit(0, 0, 22, 0)
                  .End(30)
                  .Build(Meta());
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"prefix 0 held twice by job 0 rank 0 (pid 1000)",
                        "dataset 0 from +2.000ms to +20.000ms",
                        "dataset 1 from +4.000ms to +10.000ms"}))
      << Dump(r);
}

TEST(PrefixUnique, TwoDatasetsOnTheirOwnPrefixesAreValid) {
  History h = Trial()
                  .Ok(0, 0, "acquire", 1, 2, {{"prefix", 0}}, {{"dataset", 0}})
                  .Ok(0, 0, "acquire", 3, 4, {{"prefix", 1}}, {{"dataset", 1}})
                  .Ok(0, 0, "release", 10, 11, Json::object(), {{"dataset", 1}})
                  .Ok(0, 0, "release", 20, 21, Json::object(), {{"dataset", 0}})
                  .Exit(0, 0, 22, 0)
                  .End(30)
                  .Build(Meta());
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "datasets-held-at-once")) << Dump(r);
}

// The second dataset's release ends only its own hold: another job granted
// the first dataset's prefix before that one's release shares it.
TEST(PrefixUnique, AReleaseOfTheSecondDatasetDoesNotEndTheFirstsHold) {
  History h = Trial()
                  .Ok(0, 0, "acquire", 1, 2, {{"prefix", 0}}, {{"dataset", 0}})
                  .Ok(0, 0, "acquire", 3, 4, {{"prefix", 1}}, {{"dataset", 1}})
                  .Ok(0, 0, "release", 10, 11, Json::object(), {{"dataset", 1}})
                  .Acquire(1, 0, 12, 13, 0)
                  .Ok(0, 0, "release", 20, 21, Json::object(), {{"dataset", 0}})
                  .Release(1, 0, 22, 23)
                  .End(30)
                  .Build(Meta());
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"prefix 0 held by job 0", "job 1 (pids 1100)"})) << Dump(r);
}

TEST(PrefixUnique, ReuseAfterTheLastReleaseIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Acquire(0, 1, 1, 2, 0)
                  .Release(0, 0, 5, 6)
                  .Release(0, 1, 7, 8)
                  .Acquire(1, 0, 9, 10, 0)
                  .Release(1, 0, 12, 13)
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "prefix-reused")) << Dump(r);
}

TEST(PrefixUnique, JobStaysLiveWhileOneRankHoldsAfterItsSiblingWasKilled) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Acquire(0, 1, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Acquire(1, 0, 6, 7, 0)  // rank 1 of job 0 still holds prefix 0
                  .Release(0, 1, 10, 11)
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Reached(r, "killed-holding-prefix")) << Dump(r);
  EXPECT_TRUE(Names(r, {"prefix 0", "job 0", "job 1"})) << Dump(r);
}

// Some order of the in-flight operations hands the prefix over cleanly.
TEST(PrefixUnique, OverlapOnlyWhileAReleaseWasInFlightIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Release(0, 0, 5, 9)
                  .Acquire(1, 0, 6, 7, 0)  // returned while job 0's release was still running
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "prefix-handover-in-flight"));
}

// The worker saw nothing of the prefix when it was granted: the dead job's
// resources were gone, so the reuse is no clash.
TEST(PrefixUnique, KilledHoldersPrefixGrantedWithNothingLeftIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Ok(1, 0, "acquire", 10, 11, {{"prefix", 0}, {"present", Json::array()}})
                  .End(20)
                  .Build(Meta({Job(1, 0, {"/data/0"}), Job(1, 0, {"/data/1"})}));
  EXPECT_VERDICT(Check("prefix.unique", h), kValid);
}

TEST(PrefixUnique, KilledHoldersPrefixGrantedWithItsSegmentStillThereIsUnknown) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Ok(1, 0, "acquire", 10, 11, {{"prefix", 0}, {"present", {"/shm.000000_barrier"}}})
                  .End(20)
                  .Build(Meta({Job(1, 0, {"/data/0"}), Job(1, 0, {"/data/1"})}));
  EXPECT_VERDICT(Check("prefix.unique", h), kUnknown);
}

TEST(PrefixUnique, KilledHolderCountsAsHoldingUntilCleanedSoReuseBeforeIsUnknown) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Acquire(1, 0, 10, 11, 0)
                  .End(20)
                  .Build(Meta({Job(1, 0, {"/data/0"}), Job(1, 0, {"/data/1"})}));
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kUnknown);
  EXPECT_TRUE(Names(r, {"prefix 0", "job 0 (pids 1000)", "was killed", "job 1 (pids 1100)"}))
      << Dump(r);
  EXPECT_TRUE(Reached(r, "killed-holding-prefix"));
}

TEST(PrefixUnique, KilledHoldersPrefixReusedAfterACleanupIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Clean(1, 0, 6, 7, {"/shm.000000_barrier"})
                  .Acquire(1, 0, 10, 11, 0)
                  .End(20)
                  .Build(Meta({Job(1, 0, {"/data/0"}), Job(1, 0, {"/data/1"})}));
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "prefix-reclaimed-from-dead-job")) << Dump(r);
}

// 30-minute soak, window-neighbours trial 480: the dead job's names went in
// the sweep of an acquire (here another job's), which said so; the reuse
// after it is no clash.
TEST(PrefixUnique, KilledHoldersPrefixReusedAfterAnAcquireRemovedItsNamesIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Ok(2, 0, "acquire", 6, 7, {{"prefix", 1}, {"removed", {"/shm.000000_barrier"}}})
                  .Acquire(1, 0, 10, 11, 0)
                  .End(20)
                  .Build(Meta({Job(1, 0, {"/data/0"}), Job(1, 0, {"/data/1"}), Job(1, 0, {"/data/2"})}));
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "prefix-reclaimed-from-dead-job")) << Dump(r);
}

// The same, the sweep in the reusing job's own acquire.
TEST(PrefixUnique, AnAcquireThatRemovedTheDeadJobsNamesItselfReusesThePrefixValidly) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Ok(1, 0, "acquire", 10, 11, {{"prefix", 0}, {"removed", {"/shm.000000_barrier"}}})
                  .End(20)
                  .Build(Meta({Job(1, 0, {"/data/0"}), Job(1, 0, {"/data/1"})}));
  EXPECT_VERDICT(Check("prefix.unique", h), kValid);
}

// Removed by an acquire begun before the death: maybe a previous user's names,
// before the dead job made its own. No evidence.
TEST(PrefixUnique, AnAcquireBegunBeforeTheDeathShowsNothingOfTheDeadJobsNames) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Ok(2, 0, "acquire", 3, 7, {{"prefix", 1}, {"removed", {"/shm.000000_barrier"}}})
                  .Killed(0, 0, 4)
                  .Acquire(1, 0, 10, 11, 0)
                  .End(20)
                  .Build(Meta({Job(1, 0, {"/data/0"}), Job(1, 0, {"/data/1"}), Job(1, 0, {"/data/2"})}));
  EXPECT_VERDICT(Check("prefix.unique", h), kUnknown);
}

// 30-minute soak, crash-points trial 237: the reusing job's first acquire
// began before the dead job's names were shown gone (by its peer's grant,
// which saw nothing left), but its grant may have come after: only acquires
// in flight meet the stale time, and some order is clean.
TEST(PrefixUnique, AReuseThatMeetsTheDeadHoldOnlyWhileItsAcquiresAreInFlightIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Ok(1, 0, "acquire", 5, 12, {{"prefix", 0}, {"present", {"/shm.000000_barrier"}}})
                  .Ok(1, 1, "acquire", 7, 11, {{"prefix", 0}, {"present", Json::array()}})
                  .End(20)
                  .Build(Meta({Job(1, 0, {"/data/0"}), Job(2, 0, {"/data/1"})}));
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "prefix-handover-in-flight")) << Dump(r);
}

// The same, but the reusing job certainly held the prefix (an acquire had
// returned) before anything showed the dead job's names gone.
TEST(PrefixUnique, AReuseCertainlyHeldBeforeTheDeadJobsNamesWereShownGoneIsUnknown) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Ok(1, 0, "acquire", 5, 8, {{"prefix", 0}, {"present", {"/shm.000000_barrier"}}})
                  .Ok(1, 1, "acquire", 9, 11, {{"prefix", 0}, {"present", Json::array()}})
                  .End(20)
                  .Build(Meta({Job(1, 0, {"/data/0"}), Job(2, 0, {"/data/1"})}));
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kUnknown);
  EXPECT_TRUE(Names(r, {"prefix 0", "nothing shows the dead job's resources were gone"})) << Dump(r);
}

TEST(PrefixUnique, ACleanupThatKeptThePrefixDoesNotEndTheDeadHold) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Clean(1, 0, 6, 7, {}, {"/shm.000000_barrier"})
                  .Acquire(1, 0, 10, 11, 0)
                  .End(20)
                  .Build(Meta({Job(1, 0, {"/data/0"}), Job(1, 0, {"/data/1"})}));
  EXPECT_VERDICT(Check("prefix.unique", h), kUnknown);
}

TEST(PrefixUnique, RestartWithTheSameDirsReclaimsTheDeadJobsPrefix) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Acquire(0, 1, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Killed(0, 1, 4)
                  .Acquire(1, 0, 10, 11, 0)
                  .Acquire(1, 1, 10, 11, 0)
                  .End(20)
                  .Build(Meta({Job(2, 0, {"/data/restart"}), Job(2, 0, {"/data/restart"})}));
  EXPECT_VERDICT(Check("prefix.unique", h), kValid);
}

// -------------------------------------------------------- prefix.agreement

TEST(PrefixAgreement, AllRanksWithOnePrefixAreValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 4)
                  .Acquire(0, 1, 1, 3, 4)
                  .Acquire(0, 2, 1, 3, 4)
                  .End(10)
                  .Build(Meta());
  EXPECT_VERDICT(Check("prefix.agreement", h), kValid);
}

TEST(PrefixAgreement, RanksOfOneJobWithDifferentPrefixesAreInvalid) {
  History h = Trial().Acquire(0, 0, 1, 2, 0).Acquire(0, 1, 1, 3, 1).End(10).Build(Meta());
  CheckResult r = Check("prefix.agreement", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(
      Names(r, {"job 0", "rank 0 (pid 1000) got prefix 0", "rank 1 (pid 1001) got prefix 1"}))
      << Dump(r);
}

TEST(PrefixAgreement, OneRankGettingAPrefixWhileAnotherFailsIsInvalid) {
  History h = Trial()
                  .Acquire(0, 1, 1, 2, 0)
                  .Fail(0, 2, "acquire", 1, 3, "exists", "shm_open(/000000_locals): File exists")
                  .End(10)
                  .Build(Meta());
  CheckResult r = Check("prefix.agreement", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(
      Names(r, {"rank 1 (pid 1001) got prefix 0", "rank 2 (pid 1002) failed", "exists: shm_open"}))
      << Dump(r);
}

TEST(PrefixAgreement, AllRanksFailingAlikeIsValid) {
  History h = Trial()
                  .Fail(0, 0, "acquire", 1, 2, "invalid-argument", "local world size not set")
                  .Fail(0, 1, "acquire", 1, 2, "invalid-argument", "local world size not set")
                  .End(10)
                  .Build(Meta());
  CheckResult r = Check("prefix.agreement", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "acquire-all-ranks-failed"));
}

TEST(PrefixAgreement, AFailureCausedByAFaultAimedAtThatRankIsExcused) {
  History h = Trial()
                  .Fault("fiu-errno", 0, 1, 0.5, 0.5, {{"errno", EACCES}})
                  .Acquire(0, 0, 1, 2, 0)
                  .Fail(0, 1, "acquire", 1, 2, "permission", "shm_open: Permission denied")
                  .End(10)
                  .Build(Meta());
  CheckResult r = Check("prefix.agreement", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "acquire-failed-by-fault"));
}

TEST(PrefixAgreement, AFaultMadeFailureWhileAnotherJobHoldsAPrefixReachesTheJoinersPath) {
  History h =
      Trial()
          .Acquire(0, 0, 1, 2, 0)
          .Fault("fiu-preload", 1, 0, 0.5, 0.5, {{"errno", EACCES}})
          .Fail(1, 0, "acquire", 3, 4, "permission", "mmap(/shmc.registry): Permission denied")
          .Release(0, 0, 8, 9)
          .End(10)
          .Build(Meta());
  CheckResult r = Check("prefix.agreement", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "acquire-failed-by-fault-beside-live-job")) << Dump(r);
}

TEST(PrefixAgreement, AFaultMadeFailureWithNoOtherJobHoldingIsNotTheJoinersPath) {
  // Invoked before job 0's acquire returned, and after its release: the
  // failing rank may have been the registry's creator.
  for (double t0 : {0.5, 9.5}) {
    History h = Trial()
                    .Fault("fiu-preload", 1, 0, 0.2, 0.2, {{"errno", EACCES}})
                    .Fail(1, 0, "acquire", t0, t0 + 0.2, "permission", "mmap: Permission denied")
                    .Acquire(0, 0, 1, 2, 0)
                    .Release(0, 0, 8, 9)
                    .End(10)
                    .Build(Meta());
    CheckResult r = Check("prefix.agreement", h);
    EXPECT_VERDICT(r, kValid);
    EXPECT_FALSE(Reached(r, "acquire-failed-by-fault-beside-live-job")) << t0;
  }
}

TEST(PrefixAgreement, AFailureNoFaultCausedIsNotTheJoinersPath) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Fail(1, 0, "acquire", 3, 4, "permission", "mmap: Permission denied")
                  .End(10)
                  .Build(Meta());
  EXPECT_FALSE(Reached(Check("prefix.agreement", h), "acquire-failed-by-fault-beside-live-job"));
}

TEST(PrefixAgreement, AFaultThatCannotCauseThatErrorIsNoExcuse) {
  // An injected EACCES explains "permission", never "in-use"; an unknown kind nothing.
  for (auto [kind, detail] : {std::pair<std::string, Json>{"fiu-errno", {{"errno", EACCES}}},
                              std::pair<std::string, Json>{"eacces", Json::object()}}) {
    History h = Trial()
                    .Fault(kind, 0, 1, 0.5, 0.5, detail)
                    .Acquire(0, 0, 1, 2, 0)
                    .Fail(0, 1, "acquire", 1, 2, "in-use", "/data/0 is in use by job 3")
                    .End(10)
                    .Build(Meta());
    CheckResult r = Check("prefix.agreement", h);
    EXPECT_VERDICT(r, kInvalid);
    EXPECT_TRUE(Names(r, {"but rank 1 (pid 1001) failed at +2.000ms: in-use"})) << kind;
  }
}

TEST(PrefixAgreement, RanksKilledMidAcquireAreLeftOut) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Open(0, 1, "acquire", 1)
                  .Killed(0, 1, 1.5)
                  .End(10)
                  .Build(Meta());
  EXPECT_VERDICT(Check("prefix.agreement", h), kValid);
}

// -------------------------------------------------- prefix.exclusive-local

TrialMeta SharedDir(bool remote) {
  return Meta({Job(1, 0, {"/data/shared"}, remote), Job(1, 0, {"/data/shared"}, remote)});
}

TEST(PrefixExclusiveLocal, ARefusalNamingTheDirWhileTheOwnerLivesIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Fail(1, 0, "acquire", 3, 4, "in-use",
                        "local dir /data/shared is in use by job k (pid 1000)")
                  .Release(0, 0, 10, 11)
                  .End(20)
                  .Build(SharedDir(true));
  CheckResult r = Check("prefix.exclusive-local", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "exclusive-local-refused"));
}

TEST(PrefixExclusiveLocal, ADirWithARemoteGrantedToTwoLiveJobsIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Acquire(1, 0, 3, 4, 1)
                  .Release(0, 0, 10, 11)
                  .Release(1, 0, 10, 11)
                  .End(20)
                  .Build(SharedDir(true));
  CheckResult r = Check("prefix.exclusive-local", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(
      Names(r, {"/data/shared", "job 0 (pids 1000, prefix 0)", "job 1 (pids 1100, prefix 1)"}))
      << Dump(r);
}

TEST(PrefixExclusiveLocal, ARefusalThatDoesNotNameTheDirIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Fail(1, 0, "acquire", 3, 4, "in-use", "Reused local directory")
                  .End(20)
                  .Build(SharedDir(true));
  CheckResult r = Check("prefix.exclusive-local", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"names none of the shared dirs", "/data/shared", "job 1 rank 0"}))
      << Dump(r);
}

TEST(PrefixExclusiveLocal, ADeadJobMakingTheDirInUseForItsRestartIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Fail(1, 0, "acquire", 10, 11, "in-use", "local dir /data/shared is in use")
                  .End(20)
                  .Build(SharedDir(true));
  CheckResult r = Check("prefix.exclusive-local", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"no live job could have held", "/data/shared", "job 1 rank 0 (pid 1100)"}))
      << Dump(r);
}

TEST(PrefixExclusiveLocal, SharingADirWithoutARemoteIsAllowed) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Acquire(1, 0, 3, 4, 1)
                  .Release(0, 0, 10, 11)
                  .Release(1, 0, 10, 11)
                  .End(20)
                  .Build(SharedDir(false));
  CheckResult r = Check("prefix.exclusive-local", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "local-dir-shared-without-remote"));
}

TEST(PrefixExclusiveLocal, RefusingADirWithoutARemoteIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Fail(1, 0, "acquire", 3, 4, "in-use", "local dir /data/shared is in use")
                  .End(20)
                  .Build(SharedDir(false));
  EXPECT_VERDICT(Check("prefix.exclusive-local", h), kInvalid);
}

// --------------------------------------------------------- prefix.progress

TEST(PrefixProgress, AcquiresWithinTheDeadlineAreValid) {
  History h =
      Trial()
          .Acquire(0, 0, 1, 900, 0)
          .Fail(1, 0, "acquire", 1, 1400, "timeout", "ranks missing")  // deadline 1000 + grace 500
          .Fds(0, 0, 901, 5)
          .End(2000)
          .Build(Meta());
  CheckResult r = Check("prefix.progress", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "acquire-timeout"));
}

TEST(PrefixProgress, AnAcquirePastDeadlinePlusGraceIsInvalid) {
  History h = Trial().Acquire(0, 1, 1, 1600, 0).End(2000).Build(Meta());
  CheckResult r = Check("prefix.progress", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"acquire of job 0 rank 1 (pid 1001)", "1599.000ms", "deadline 1000.000ms"}))
      << Dump(r);
}

TEST(PrefixProgress, TimeTheWorkerSpentStoppedIsNotCounted) {
  History h =
      Trial().Fault("sigstop", 0, 0, 100, 900).Acquire(0, 0, 1, 1600, 0).End(2000).Build(Meta());
  EXPECT_VERDICT(Check("prefix.progress", h), kValid);
}

TEST(PrefixProgress, AnAcquireStillOpenAtTheTrialTimeoutIsAHang) {
  History h = Trial()
                  .Open(0, 0, "acquire", 1)
                  .Killed(0, 0, 900, true, SIGKILL, /*teardown=*/true)
                  .End(1000, /*timed_out=*/true)
                  .Build(Meta());
  CheckResult r = Check("prefix.progress", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Reached(r, "hang-detected"));
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000)", "a hang"})) << Dump(r);
}

TEST(PrefixProgress, HoldingMoreFdsThanTheBoundIsInvalid) {
  History h = Trial().Acquire(0, 0, 1, 2, 0).Fds(0, 0, 3, 900).End(10).Build(Meta());
  CheckResult r = Check("prefix.progress", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000)", "900 fds", "bound 16"})) << Dump(r);
}

// ---------------------------------------------------------- barrier.safety

TEST(BarrierSafety, EveryoneEnteringBeforeAnyoneLeavesIsValid) {
  History h = Trial()
                  .Round(0, 0, 0, 1, 5)
                  .Round(0, 1, 0, 4, 5)
                  .Round(0, 0, 1, 6, 9)
                  .Round(0, 1, 1, 8, 9)
                  .End(10)
                  .Build(Meta({Job(2, 2)}));
  EXPECT_VERDICT(Check("barrier.safety", h), kValid);
}

TEST(BarrierSafety, LeavingARoundBeforeAPeerEnteredItIsInvalid) {
  History h = Trial()
                  .Round(0, 0, 0, 1, 2)  // left at 2
                  .Round(0, 1, 0, 3, 4)  // entered at 3
                  .End(10)
                  .Build(Meta({Job(2, 1)}));
  CheckResult r = Check("barrier.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(
      r, {"job 0 round 0", "rank 0 (pid 1000) left at +2.000ms", "rank 1 entered", "+3.000ms"}))
      << Dump(r);
}

TEST(BarrierSafety, LeavingARoundAPeerNeverEnteredIsInvalid) {
  History h = Trial()
                  .Round(0, 0, 0, 1, 2)
                  .Round(0, 1, 0, 1, 2)
                  .Round(0, 0, 1, 3, 4)  // rank 2 of the 3 never shows up
                  .Round(0, 1, 1, 3, 4)
                  .End(10)
                  .Build(Meta({Job(3, 2)}));
  CheckResult r = Check("barrier.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 round 0", "before rank 2 entered", "never entered"})) << Dump(r);
}

TEST(BarrierSafety, RanksReleasedByDifferentRoundsAreInvalid) {
  History h = Trial()
                  .Ok(0, 0, "barrier", 1, 5, {{"round", 7}}, {{"round", 0}})
                  .Ok(0, 1, "barrier", 1, 5, {{"round", 8}}, {{"round", 0}})
                  .End(10)
                  .Build(Meta({Job(2, 1)}));
  CheckResult r = Check("barrier.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"released by different rounds", "as round 7", "as round 8"})) << Dump(r);
}

TEST(BarrierSafety, AKilledParticipantBreakingTheRoundIsNotASafetyProblem) {
  History h = Trial()
                  .Round(0, 0, 0, 1, 2)
                  .Round(0, 1, 0, 1, 2)
                  .Open(0, 0, "barrier", 3, {{"round", 1}})
                  .Killed(0, 0, 4)
                  .Fail(0, 1, "barrier", 3, 5, "broken", "rank 0 died", {{"round", 1}})
                  .End(10)
                  .Build(Meta({Job(2, 2)}));
  CheckResult r = Check("barrier.safety", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "killed-in-barrier"));
}

// -------------------------------------------------------- barrier.liveness

TEST(BarrierLiveness, RoundsCompletingInTimeAreValid) {
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Ok(0, 1, "barrier_attach", 1, 2)
                  .Round(0, 0, 0, 3, 800)
                  .Round(0, 1, 0, 800, 800)
                  .End(1000)
                  .Build(Meta({Job(2, 1)}));
  EXPECT_VERDICT(Check("barrier.liveness", h), kValid);
}

TEST(BarrierLiveness, SurvivorsGettingABrokenErrorAfterADeathAreValid) {
  History h = Trial()
                  .Round(0, 0, 0, 1, 2)
                  .Round(0, 1, 0, 1, 2)
                  .Killed(0, 1, 3)
                  .Fail(0, 0, "barrier", 3, 110, "broken", "participant rank 1 (pid 1001) died",
                        {{"round", 1}})
                  .Exit(0, 0, 111, 1)
                  .End(200)
                  .Build(Meta({Job(2, 2)}));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "barrier-participant-died"));
  EXPECT_TRUE(Reached(r, "barrier-broken-detected"));
}

TEST(BarrierLiveness, ASurvivorStillWaitingAtTheTrialTimeoutIsAHang) {
  History h = Trial()
                  .Round(0, 0, 0, 1, 2)
                  .Round(0, 1, 0, 1, 2)
                  .Killed(0, 1, 3)
                  .Open(0, 0, "barrier", 3, {{"round", 1}})
                  .Killed(0, 0, 5000, true, SIGKILL, /*teardown=*/true)
                  .End(5001, /*timed_out=*/true)
                  .Build(Meta({Job(2, 2)}));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Reached(r, "hang-detected"));
  EXPECT_TRUE(
      Names(r, {"barrier of job 0 rank 0 (pid 1000)", "a hang", "rank 1 (pid 1001) was killed"}))
      << Dump(r);
}

TEST(BarrierLiveness, AnErrorLaterThanDeadlinePlusGraceIsInvalid) {
  History h = Trial()
                  .Killed(0, 1, 1)
                  .Fail(0, 0, "barrier", 2, 1800, "broken", "rank 1 died", {{"round", 0}})
                  .End(2000)
                  .Build(Meta({Job(2, 1)}));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000)", "failed after 1798.000ms", "grace 500.000ms"}))
      << Dump(r);
}

TEST(BarrierLiveness, ARoundFailingWithEveryoneInsideAndAliveIsInvalid) {
  History h = Trial()
                  .Fail(0, 0, "barrier", 1, 900, "timeout", "waited 900ms", {{"round", 0}})
                  .Fail(0, 1, "barrier", 2, 901, "timeout", "waited 900ms", {{"round", 0}})
                  .Exit(0, 0, 902, 1)
                  .Exit(0, 1, 902, 1)
                  .End(1000)
                  .Build(Meta({Job(2, 1)}));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000)", "round 0", "every participant had entered"}))
      << Dump(r);
}

TEST(BarrierLiveness, ATimeoutWhileAnEnteredPeerWaitedForACpuIsNotJudgedUnexplained) {
  // Rank 1 logged its round-0 invoke at 2 ms but waited 895 ms for a CPU in
  // that op: it may have arrived only at 897 ms, as rank 0 timed out at 900.
  History late = Trial()
                     .Fail(0, 0, "barrier", 1, 900, "timeout", "waited 900ms", {{"round", 0}})
                     .Fail(0, 1, "barrier", 2, 950, "broken", "rank 0 timed out", {{"round", 0}})
                     .CpuWait(10, 905)
                     .Exit(0, 0, 951, 1)
                     .Exit(0, 1, 952, 1)
                     .End(1000)
                     .Build(Meta({Job(2, 1)}));
  EXPECT_VERDICT(Check("barrier.liveness", late), kValid);
  // Its 50 ms of CPU wait put its arrival no later than 52 ms: rank 0 had
  // everyone inside for 848 ms and still timed out.
  History flaw = Trial()
                     .Fail(0, 0, "barrier", 1, 900, "timeout", "waited 900ms", {{"round", 0}})
                     .Fail(0, 1, "barrier", 2, 950, "broken", "rank 0 timed out", {{"round", 0}})
                     .CpuWait(10, 60)
                     .Exit(0, 0, 951, 1)
                     .Exit(0, 1, 952, 1)
                     .End(1000)
                     .Build(Meta({Job(2, 1)}));
  CheckResult r = Check("barrier.liveness", flaw);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000)", "every participant had entered"})) << Dump(r);
}

TEST(BarrierLiveness, ATimeoutBecauseAPeerWasStoppedIsValid) {
  History h = Trial()
                  .Fault("sigstop", 0, 1, 1, 1500)  // stopped before it reached the barrier
                  .Fail(0, 0, "barrier", 1, 900, "timeout", "rank 1 missing", {{"round", 0}})
                  .Fail(0, 1, "barrier", 1501, 1502, "broken", "rank 0 timed out", {{"round", 0}})
                  .End(2000)
                  .Build(Meta({Job(2, 1)}));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "barrier-participant-stopped"));
}

// --------------------------------------------------------- cleanup.no-leak

TEST(CleanupNoLeak, NothingLeftAfterTheCleanupStepIsValid) {
  History h = Trial().Audit(10).End(11).Build(Meta());
  EXPECT_VERDICT(Check("cleanup.no-leak", h), kValid);
}

TEST(CleanupNoLeak, ALeftoverSegmentOrLockIsInvalidAndNamed) {
  History h =
      Trial()
          .Audit(10, {"/shmstress.t3.000001_barrier"}, {"/run/locks/000001_barrier_filelock"})
          .End(11)
          .Build(Meta());
  CheckResult r = Check("cleanup.no-leak", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"/dev/shm", "/shmstress.t3.000001_barrier"})) << Dump(r);
  EXPECT_TRUE(Names(r, {"lock dir", "/run/locks/000001_barrier_filelock"})) << Dump(r);
}

TEST(CleanupNoLeak, AnotherUsersSeededEntryIsExpectedToStay) {
  History h = Trial()
                  .Fault("foreign-segment", -1, -1, 1, 1,
                         {{"foreign", true}, {"name", "/shm.000007_locals"}})
                  .Audit(10, {"/shm.000007_locals"})
                  .End(11)
                  .Build(Meta());
  CheckResult r = Check("cleanup.no-leak", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "foreign-entry-kept"));
}

TEST(CleanupNoLeak, WithoutAnAuditItIsUnknown) {
  EXPECT_VERDICT(Check("cleanup.no-leak", Trial().End(11).Build(Meta())), kUnknown);
}

TEST(CleanupNoLeak, WithoutACleanupStepLeftoversAreNotJudged) {
  TrialMeta m = Meta();
  m.cleanup_step = false;
  History h = Trial().Audit(10, {"/shm.000001_barrier"}).End(11).Build(m);
  EXPECT_VERDICT(Check("cleanup.no-leak", h), kValid);
}

// ---------------------------------------------------------- fault targets

TEST(FaultTargets, AKillOfAGhostsPidNeverAimsAtTheWorkerThatGetsTheNumberLater) {
  // reused-pid without a job: the ghost (pid 40) is killed and its number
  // handed on. A worker that forks into 40 afterwards is alive.
  Fault ghost;
  ghost.kind = "reused-pid";
  ghost.job = -1;
  ghost.pid = 40;
  ghost.signal = SIGKILL;
  ghost.start_t = 5;
  ghost.effect_t = 6;
  EXPECT_FALSE(checks::aims_at(ghost, 0, 0, 40));
  History h;
  h.faults.push_back(ghost);
  EXPECT_EQ(checks::dead_by(h, 0, 0, 40), checks::kNever);
}

TEST(FaultTargets, APidMatchesOnlyInsideItsJobBecausePidsArePerContainer) {
  // containers: job 0's pid 2 and job 1's pid 2 are different processes.
  Fault kill;
  kill.kind = "sigkill";
  kill.job = 0;
  kill.rank = 0;
  kill.pid = 2;
  kill.signal = SIGKILL;
  EXPECT_TRUE(checks::aims_at(kill, 0, 0, 2));
  EXPECT_FALSE(checks::aims_at(kill, 1, 0, 2));
  // A replacement of the same rank has another pid: the kill was not its.
  EXPECT_FALSE(checks::aims_at(kill, 0, 0, 3));
}

// ---------------------------------------------------------- cleanup.safety

TEST(CleanupSafety, NamePrefixFindsTheSixDigitToken) {
  EXPECT_EQ(checks::name_prefix("/shmstress.t3.000002_barrier"), 2);
  EXPECT_EQ(checks::name_prefix("/shm.000002_barrier"), 2);
  EXPECT_EQ(checks::name_prefix("/000010_locals"), 10);
  EXPECT_EQ(checks::name_prefix("/tmp/run.123456/locks/000011_barrier_filelock"), 11);
  EXPECT_EQ(checks::name_prefix("/shmstress.t3.registry"), -1);
  EXPECT_EQ(checks::name_prefix("/shm.1234567_barrier"), -1);
  EXPECT_EQ(checks::name_prefix(""), -1);
  EXPECT_TRUE(checks::is_registry_name("/shmstress.t3.registry"));
}

TEST(CleanupSafety, RemovingADeadJobsSegmentsIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Killed(0, 0, 4)
                  .Acquire(1, 0, 1, 2, 1)
                  .Clean(1, 0, 6, 7, {"/shm.000000_barrier", "/shm.000000_shard_states"},
                         {"/shm.000001_barrier"})
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "cleanup-removed-prefix-entry"));
  EXPECT_TRUE(Reached(r, "cleanup-while-owner-alive"));
}

TEST(CleanupSafety, RemovingALiveHoldersSegmentIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Clean(1, 0, 6, 7, {"/shm.000000_shard_states"})
                  .Release(0, 0, 10, 11)
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"cleanup by job 1 rank 0 (pid 1100)", "/shm.000000_shard_states",
                        "job 0 rank 0 (pid 1000)", "prefix 0"}))
      << Dump(r);
}

TEST(CleanupSafety, RemovingAStoppedHoldersSegmentIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Fault("sigstop", 0, 0, 3, 9)
                  .Clean(1, 0, 6, 7, {"/shm.000000_shard_states"})
                  .Release(0, 0, 10, 11)
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Reached(r, "cleanup-while-owner-stopped"));
  EXPECT_TRUE(Names(r, {"/shm.000000_shard_states", "stopped from +3.000ms to +9.000ms"}))
      << Dump(r);
}

TEST(CleanupSafety, KeepingAStoppedOwnersSegmentIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Fault("sigstop", 0, 0, 3, 9)
                  .Clean(1, 0, 6, 7, {}, {"/shm.000000_shard_states"})
                  .Release(0, 0, 10, 11)
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "cleanup-while-owner-stopped"));
}

TEST(CleanupSafety, ACleanupWhollyInsideAnotherJobsPauseReachesCleanupInsidePause) {
  History h = Trial()
                  .Fault("pause-at-point", 0, 0, 3, 9, {{"point", "lease/lock"}})
                  .Clean(1, 0, 5, 7, {"/shm.registry"})
                  .Acquire(0, 0, 1, 10, 0)
                  .Release(0, 0, 12, 13)
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kValid);  // the registry went before job 0's acquire returned
  EXPECT_TRUE(Reached(r, "cleanup-inside-pause"));
}

TEST(CleanupSafety, ACleanupOverlappingOnlyPartOfAPauseDoesNotReachCleanupInsidePause) {
  History h = Trial()
                  .Fault("pause-at-point", 0, 0, 3, 6, {{"point", "lease/lock"}})
                  .Clean(1, 0, 5, 7, {})
                  .Clean(0, 1, 4, 5, {})  // inside, but the paused process is of its own job
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_FALSE(Reached(r, "cleanup-inside-pause"));
}

TEST(CleanupSafety, RemovingTheRegistryUnderALiveHolderIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 3)
                  .Clean(1, 0, 6, 7, {"/shm.registry"})
                  .Release(0, 0, 10, 11)
                  .End(20)
                  .Build(Meta());
  EXPECT_VERDICT(Check("cleanup.safety", h), kInvalid);
}

TEST(CleanupSafety, RemovingAnotherUsersEntryIsInvalid) {
  History h = Trial()
                  .Fault("foreign-segment", -1, -1, 1, 1,
                         {{"foreign", true}, {"name", "/shm.000009_locals"}})
                  .Clean(0, 0, 6, 7, {"/shm.000009_locals"})
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"/shm.000009_locals", "another user"})) << Dump(r);
}

// "Another user's" is relative to the cleaner: uid 65534's cleanup may remove what a dead job of
// 65534 left (F13's non-root half), never uid 1000's; root's may remove neither.
TEST(CleanupSafety, AnotherUsersEntryIsJudgedByTheCleanersUid) {
  auto trial = [](int job, const std::string& removed) {
    return Trial()
        .Fault("unprivileged", 0, 0, 0, 0, {{"uid", 65534}})
        // The audit's listing of what 65534's workers left aims at nobody: root stays root.
        .Fault("unprivileged", -1, -1, 19, 19, {{"uid", 65534}, {"foreign", true}, {"names", {"/shm.x"}}})
        .Fault("stale-segment", -1, -1, 1, 1, {{"foreign", true}, {"uid", 65534}, {"name", "/shm.000001_locals"}})
        .Fault("stale-segment", -1, -1, 1, 1, {{"foreign", true}, {"uid", 1000}, {"name", "/shm.000000_locals"}})
        .Clean(job, 0, 6, 7, {removed})
        .End(20)
        .Build(Meta());
  };
  EXPECT_VERDICT(Check("cleanup.safety", trial(0, "/shm.000001_locals")), kValid);
  CheckResult other = Check("cleanup.safety", trial(0, "/shm.000000_locals"));
  EXPECT_VERDICT(other, kInvalid);
  EXPECT_TRUE(Names(other, {"/shm.000000_locals", "another user"})) << Dump(other);
  CheckResult root = Check("cleanup.safety", trial(1, "/shm.000001_locals"));
  EXPECT_VERDICT(root, kInvalid);
  EXPECT_TRUE(Names(root, {"/shm.000001_locals", "another user"})) << Dump(root);
}

// The release may have taken effect first: a valid order exists.
TEST(CleanupSafety, ACleanupRacingTheOwnersReleaseIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Release(0, 0, 5, 8)
                  .Clean(1, 0, 6, 7, {"/shm.000000_shard_states"})
                  .End(20)
                  .Build(Meta());
  EXPECT_VERDICT(Check("cleanup.safety", h), kValid);
}

// ------------------------------------------------------- worker.clean-exit

TEST(WorkerCleanExit, ReportedErrorsHarnessKillsAndCrashPointsAreClean) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Exit(0, 0, 3, 0)
                  .Fail(0, 1, "acquire", 1, 2, "timeout", "late")
                  .Exit(0, 1, 3, 1)
                  .Killed(0, 2, 3)
                  .Open(0, 3, "barrier", 2, {{"round", 0}})
                  .Point(0, 3, 2.5, "crash/barrier/wait/after-enter")
                  .Killed(0, 3, 3, /*by_harness=*/false)
                  .End(10)
                  .Build(Meta());
  CheckResult r = Check("worker.clean-exit", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "killed-at-crash-point"));
  EXPECT_TRUE(Reached(r, "killed-by-harness"));
  EXPECT_TRUE(Reached(r, "worker-reported-error"));
}

TEST(WorkerCleanExit, DyingOfSegvIsInvalid) {
  History h = Trial().Killed(0, 1, 3, /*by_harness=*/false, SIGSEGV).End(10).Build(Meta());
  CheckResult r = Check("worker.clean-exit", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 1 (pid 1001)", "SIGSEGV"})) << Dump(r);
}

TEST(WorkerCleanExit, ASignalNobodySentIsInvalid) {
  History h = Trial().Killed(0, 0, 3, /*by_harness=*/false, SIGKILL).End(10).Build(Meta());
  CheckResult r = Check("worker.clean-exit", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(
      Names(r, {"job 0 rank 0 (pid 1000)", "SIGKILL", "neither the harness nor a crash point"}))
      << Dump(r);
}

TEST(WorkerCleanExit, AnUncaughtExceptionIsInvalid) {
  History h = Trial().Exit(0, 0, 3, 70).End(10).Build(Meta());
  CheckResult r = Check("worker.clean-exit", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000)", "uncaught exception"})) << Dump(r);
}

TEST(WorkerCleanExit, AnExitCodeOtherThanZeroOrOneIsInvalid) {
  History h = Trial().Exit(0, 0, 3, 2).End(10).Build(Meta());
  CheckResult r = Check("worker.clean-exit", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000) exited 2"})) << Dump(r);
}

TEST(WorkerCleanExit, ExitingWithAnOpStillOpenIsInvalid) {
  History h = Trial().Open(0, 0, "release", 2).Exit(0, 0, 3, 0).End(10).Build(Meta());
  CheckResult r = Check("worker.clean-exit", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"exited 0", "release of job 0 rank 0 (pid 1000)", "still open"}))
      << Dump(r);
}

TEST(WorkerCleanExit, ExitOneWithoutAReportedFailureIsUnknown) {
  History h = Trial().Acquire(0, 0, 1, 2, 0).Exit(0, 0, 3, 1).End(10).Build(Meta());
  CheckResult r = Check("worker.clean-exit", h);
  EXPECT_VERDICT(r, kUnknown);
  EXPECT_TRUE(Names(r, {"exited 1", "without reporting a failed op"})) << Dump(r);
}

// ------------------------------------------------------- harness.no-orphans

TEST(HarnessNoOrphans, NoSurvivorsAfterTeardownIsValid) {
  History h = Trial().Acquire(0, 0, 1, 2, 0).Exit(0, 0, 3, 0).Audit(5).End(6).Build(Meta());
  EXPECT_VERDICT(Check("harness.no-orphans", h), kValid);
}

TEST(HarnessNoOrphans, AProcessAliveAfterTeardownIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Exit(0, 0, 3, 0)
                  .Audit(5, {}, {}, {1000, 4242})
                  .End(6)
                  .Build(Meta());
  CheckResult r = Check("harness.no-orphans", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"pid 1000 (job 0 rank 0)"})) << Dump(r);
  EXPECT_TRUE(Names(r, {"pid 4242 was still alive"})) << Dump(r);
}

TEST(HarnessNoOrphans, WithoutAnAuditItIsUnknown) {
  EXPECT_VERDICT(Check("harness.no-orphans", Trial().End(6).Build(Meta())), kUnknown);
}

TEST(HarnessNoOrphans, AWorkerNeverReapedIsUnknown) {
  History h = Trial().Acquire(0, 0, 1, 2, 0).Audit(5).End(6).Build(Meta());
  CheckResult r = Check("harness.no-orphans", h);
  EXPECT_VERDICT(r, kUnknown);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000)", "never reaped"})) << Dump(r);
}


// ------------------------------------------------------------ fault excuses

Op FailedOp(int job, int rank, const std::string& code, double t0 = 10, double t1 = 20) {
  Op op;
  op.job = job;
  op.rank = rank;
  op.pid = Pid(job, rank);
  op.op = "barrier";
  op.outcome = Outcome::kFail;
  op.error_code = code;
  op.invoke_t = static_cast<std::int64_t>(t0 * kMs);
  op.complete_t = static_cast<std::int64_t>(t1 * kMs);
  return op;
}

const Fault* Causes(const History& h, int job, int rank, const std::string& code) {
  return checks::fault_causing_failure(h, FailedOp(job, rank, code));
}

TEST(FaultExcuses, AKilledPeerExplainsATimeoutOrABrokenBarrierOnly) {
  History h = Trial().Killed(0, 1, 5).End(30).Build(Meta());
  EXPECT_NE(Causes(h, 0, 0, "timeout"), nullptr);
  EXPECT_NE(Causes(h, 0, 0, "broken"), nullptr);
  EXPECT_EQ(Causes(h, 0, 0, "permission"), nullptr);
  EXPECT_EQ(Causes(h, 0, 0, "mismatch"), nullptr);
  EXPECT_EQ(Causes(h, 1, 0, "timeout"), nullptr);  // another job: nothing
}

TEST(FaultExcuses, AStopExplainsATimeoutWhileItLastsNeverABrokenBarrier) {
  History h = Trial().Fault("sigstop", 0, 1, 12, 15).End(30).Build(Meta());
  EXPECT_NE(Causes(h, 0, 0, "timeout"), nullptr);
  EXPECT_NE(Causes(h, 0, 1, "timeout"), nullptr);  // the stopped rank's own deadline
  EXPECT_EQ(Causes(h, 0, 0, "broken"), nullptr);
  History before = Trial().Fault("sigstop", 0, 1, 1, 5).End(30).Build(Meta());
  EXPECT_EQ(Causes(before, 0, 0, "timeout"), nullptr);  // resumed before the op began
}

TEST(FaultExcuses, AnInjectedErrnoExplainsItsOwnCodeAndWhatPeersSeeOfIt) {
  History h =
      Trial().Fault("fiu-errno", 0, 1, 1, 1, {{"errno", EACCES}}).End(30).Build(Meta());
  EXPECT_NE(Causes(h, 0, 1, "permission"), nullptr);
  EXPECT_EQ(Causes(h, 0, 1, "io"), nullptr);
  EXPECT_EQ(Causes(h, 0, 1, "timeout"), nullptr);
  EXPECT_NE(Causes(h, 0, 0, "permission"), nullptr);  // a poisoned slot hands it on
  EXPECT_NE(Causes(h, 0, 0, "timeout"), nullptr);
  EXPECT_EQ(Causes(h, 0, 0, "in-use"), nullptr);
}

TEST(FaultExcuses, AWorldFaultExplainsItsCodeForEveryoneAndSeededLeftoversNothing) {
  History h = Trial()
                  .Fault("enospc", -1, -1, 1, 1, {{"shm_size", "1m"}})
                  .Fault("stale-segment", -1, -1, 1, 1, {{"name", "/shm.000000_locals"}})
                  .End(30)
                  .Build(Meta());
  EXPECT_NE(Causes(h, 3, 1, "exhausted"), nullptr);
  EXPECT_EQ(Causes(h, 3, 1, "corrupt"), nullptr);
  History seeded = Trial()
                       .Fault("stale-segment", -1, -1, 1, 1, {{"name", "/shm.000000_locals"}})
                       .End(30)
                       .Build(Meta());
  EXPECT_EQ(Causes(seeded, 0, 0, "corrupt"), nullptr);
  EXPECT_EQ(Causes(seeded, 0, 0, "timeout"), nullptr);
}

TEST(FaultExcuses, SignalOnEventIsJudgedByTheSignalItSent) {
  Trial t;
  t.Fault("signal-on-event", 0, 1, 5, 5, {{"after", "ok:acquire"}});
  History unknown_signal = t.End(30).Build(Meta());
  EXPECT_EQ(Causes(unknown_signal, 0, 0, "broken"), nullptr);  // neither kill nor stop
  // The supervisor logs the signal at the top of the event.
  std::vector<Json> events = {
      {{"t", 0}, {"type", "trial"}, {"phase", "start"}},
      {{"t", 5 * kMs}, {"type", "fault"}, {"kind", "signal-on-event"}, {"phase", "instant"},
       {"job", 0}, {"rank", 1}, {"pid", Pid(0, 1)}, {"signal", SIGKILL}},
      {{"t", 30 * kMs}, {"type", "trial"}, {"phase", "end"}}};
  std::vector<std::string> errors;
  History killed = build_history(events, Meta(), &errors);
  EXPECT_NE(Causes(killed, 0, 0, "broken"), nullptr);
  events[1]["signal"] = SIGSTOP;
  events[1]["phase"] = "start";
  History stopped = build_history(events, Meta(), &errors);
  EXPECT_EQ(Causes(stopped, 0, 0, "broken"), nullptr);
  EXPECT_NE(Causes(stopped, 0, 0, "timeout"), nullptr);
}

TEST(FaultExcuses, AKindWithoutARuleExcusesNothing) {
  History h = Trial().Fault("cosmic-ray", 0, 1, 1, 29).End(30).Build(Meta());
  EXPECT_EQ(Causes(h, 0, 0, "timeout"), nullptr);
  EXPECT_EQ(Causes(h, 0, 1, "io"), nullptr);
}

TEST(BarrierLiveness, AStoppedPeerDoesNotExcuseABrokenAboutAParticipantThatDidNotDie) {
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Ok(0, 1, "barrier_attach", 1, 2)
                  .Round(0, 1, 0, 3, 4)
                  .Fault("sigstop", 0, 1, 5, 400)
                  .Fail(0, 0, "barrier", 3, 500, "broken", "participant rank 1 (pid 1001) died",
                        {{"round", 0}})
                  .End(1000)
                  .Build(Meta({Job(2, 1)}));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000)", "failed round 0", "broken",
                        "no fault can cause it"}))
      << Dump(r);
}

TEST(BarrierLiveness, OfRanksAllTimingOutTogetherTheEarliestIsJudged) {
  History h = Trial()
                  .Fail(0, 0, "barrier", 1, 900, "timeout", "waited", {{"round", 0}})
                  .Fail(0, 1, "barrier", 2, 950, "timeout", "waited", {{"round", 0}})
                  .End(1000)
                  .Build(Meta({Job(2, 1)}));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000)", "failed round 0"})) << Dump(r);
  EXPECT_FALSE(Names(r, {"job 0 rank 1 (pid 1001)", "failed round 0"})) << Dump(r);
}

// ------------------------------------------- barrier.liveness: death latency

TrialMeta FastLiveness() {
  TrialMeta m = Meta({Job(2, 3)});
  m.liveness_ns = 200 * kMs;  // bound: 200 ms + kLivenessSlackNs (500 ms)
  m.barrier_deadline_ns = 3000 * kMs;
  return m;
}

TEST(BarrierLiveness, ASurvivorFailingWithinTheBoundOfADeathIsValid) {
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Ok(0, 1, "barrier_attach", 1, 2)
                  .Round(0, 0, 0, 3, 4)
                  .Round(0, 1, 0, 3, 4)
                  .Killed(0, 1, 10)
                  .Fail(0, 0, "barrier", 5, 160, "broken", "rank 1 died", {{"round", 1}})
                  .End(2000)
                  .Build(FastLiveness());
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "barrier-death-detected-in-time"));
}

TEST(BarrierLiveness, ASurvivorThatOnlyTimesOutAtItsDeadlineAfterADeathIsInvalid) {
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Ok(0, 1, "barrier_attach", 1, 2)
                  .Round(0, 0, 0, 3, 4)
                  .Round(0, 1, 0, 3, 4)
                  .Killed(0, 1, 10)
                  .Fail(0, 0, "barrier", 5, 3005, "timeout", "rank 1 missing", {{"round", 1}})
                  .End(4000)
                  .Build(FastLiveness());
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"barrier of job 0 rank 0 (pid 1000)", "failed (timeout)",
                        "2995.000ms after rank 1 (pid 1001) was killed (signal 9) at +10.000ms",
                        "without entering round 1", "past the death-detection bound 700.000ms"}))
      << Dump(r);
}

TEST(BarrierLiveness, ADeathInsideARoundMayCompleteThatRoundThenBreaksTheNext) {
  // Rank 1 entered round 1 and died in it: round 1 may complete (its arrival
  // counted); the next round must break in time.
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Ok(0, 1, "barrier_attach", 1, 2)
                  .Open(0, 1, "barrier", 3, {{"round", 1}})
                  .Killed(0, 1, 10)
                  .Round(0, 0, 1, 5, 300)
                  .Fail(0, 0, "barrier", 301, 400, "broken", "rank 1 died", {{"round", 2}})
                  .End(2000)
                  .Build(FastLiveness());
  EXPECT_VERDICT(Check("barrier.liveness", h), kValid);
}

// barrier-claim-ignored: rank 0 attached, entered round 0 and was killed; its
// peer attached after, found only a dead participant, reset the barrier as
// stale and waited for a seat nobody would take until its deadline.
TEST(BarrierLiveness, ASurvivorWaitingToItsDeadlineInARoundItsDeadPeerEnteredIsInvalid) {
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Open(0, 0, "barrier", 3, {{"round", 0}})
                  .Killed(0, 0, 10)
                  .Ok(0, 1, "barrier_attach", 400, 401)
                  .Fail(0, 1, "barrier", 402, 3402, "timeout", "1 never attached", {{"round", 0}})
                  .End(4000)
                  .Build(FastLiveness());
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"barrier of job 0 rank 1", "failed (timeout)", "was killed (signal 9) at +10.000ms",
                        "inside (every participant had entered) round 0",
                        "past the death-detection bound 700.000ms"}))
      << Dump(r);
  EXPECT_TRUE(Reached(r, "barrier-attached-after-peer-death"));
}

TEST(BarrierLiveness, ADeathInsideARoundDoesNotBoundItWhileAPeerHasNotEnteredIt) {
  // Three ranks: rank 2 never entered round 0, so round 0 rightly waits for
  // it whether or not the dead one's arrival counted.
  TrialMeta m = FastLiveness();
  m.jobs = {Job(3, 3)};
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Ok(0, 1, "barrier_attach", 1, 2)
                  .Ok(0, 2, "barrier_attach", 1, 2)
                  .Open(0, 0, "barrier", 3, {{"round", 0}})
                  .Killed(0, 0, 10)
                  .Fail(0, 1, "barrier", 20, 3020, "timeout", "rank 2 missing", {{"round", 0}})
                  .End(4000)
                  .Build(m);
  EXPECT_VERDICT(Check("barrier.liveness", h), kValid);
}

TEST(BarrierLiveness, ADeathInsideARoundDoesNotBoundItWhileAPeerOfTheJobIsStopped) {
  TrialMeta m = FastLiveness();
  m.jobs = {Job(3, 3)};
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Ok(0, 1, "barrier_attach", 1, 2)
                  .Ok(0, 2, "barrier_attach", 1, 2)
                  .Open(0, 0, "barrier", 3, {{"round", 0}})
                  .Killed(0, 0, 10)
                  .Open(0, 2, "barrier", 15, {{"round", 0}})
                  .Fault("sigstop", 0, 2, 16, 2900)
                  .Fail(0, 1, "barrier", 20, 3020, "timeout", "rank 2 [stopped]", {{"round", 0}})
                  .End(4000)
                  .Build(m);
  EXPECT_VERDICT(Check("barrier.liveness", h), kValid);
}

TEST(BarrierLiveness, ARankThatNeverAttachedDoesNotBoundTheOthers) {
  // Killed before attaching: the barrier cannot know it; its deadline decides.
  History h = Trial()
                  .Killed(0, 1, 1)
                  .Ok(0, 0, "barrier_attach", 2, 3)
                  .Fail(0, 0, "barrier", 4, 3004, "timeout", "rank 1 missing", {{"round", 0}})
                  .End(4000)
                  .Build(FastLiveness());
  EXPECT_VERDICT(Check("barrier.liveness", h), kValid);
}

TEST(BarrierLiveness, TimeTheSurvivorSpentStoppedIsNotCountedInTheDeathBound) {
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Ok(0, 1, "barrier_attach", 1, 2)
                  .Killed(0, 1, 10)
                  .Fault("sigstop", 0, 0, 11, 1500)
                  .Fail(0, 0, "barrier", 5, 1600, "broken", "rank 1 died", {{"round", 0}})
                  .End(2000)
                  .Build(FastLiveness());
  EXPECT_VERDICT(Check("barrier.liveness", h), kValid);
}

// The exit path of barrier-break-keeps-lock: rank 0 found rank 1 dead,
// failed its round in time, and its detach then waited 2 s for a lock.
History DetachAfterADeath(Trial t) {
  return t.Ok(0, 0, "barrier_attach", 1, 2)
      .Ok(0, 1, "barrier_attach", 1, 2)
      .Killed(0, 1, 10)
      .Fail(0, 0, "barrier", 5, 160, "broken", "rank 1 died", {{"round", 0}})
      .Fail(0, 0, "barrier_detach", 161, 2161, "timeout", "timed out locking the barrier")
      .End(3000)
      .Build(FastLiveness());
}

TEST(BarrierLiveness, ADetachTimingOutWhileNoProcessWasStoppedIsInvalid) {
  CheckResult r = Check("barrier.liveness", DetachAfterADeath(Trial()));
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(
      Names(r, {"barrier_detach of job 0 rank 0 (pid 1000)", "after 2000.000ms",
                "no process was stopped", "kept one after its op", "rank 1 (pid 1001) was killed"}))
      << Dump(r);
}

TEST(BarrierLiveness, ADetachTimingOutWhileAProcessWasStoppedIsValid) {
  // Any job's: a stopped cleaner may hold the init lock.
  History h = DetachAfterADeath(Trial().Fault("sigstop", 1, 0, 100, 2500));
  EXPECT_VERDICT(Check("barrier.liveness", h), kValid);
}

TEST(BarrierLiveness, ADetachTimingOutWhileAFaultHeldTheInitLockIsValid) {
  History h = DetachAfterADeath(Trial().Fault("init-lock", -1, -1, 100, 2500));
  EXPECT_VERDICT(Check("barrier.liveness", h), kValid);
}

TEST(BarrierLiveness, AStopThatEndedBeforeTheDetachDoesNotExcuseItsTimeout) {
  History h = DetachAfterADeath(Trial().Fault("sigstop", 1, 0, 20, 150));
  EXPECT_VERDICT(Check("barrier.liveness", h), kInvalid);
}

TrialMeta ReleaseBound(std::int64_t ms) {
  TrialMeta m = Meta({Job(3, 1)});
  m.barrier_deadline_ns = 3000 * kMs;
  m.release_ns = ms * kMs;
  return m;
}

// Round 0 of three ranks: rank 0 arrives last and leaves at 10 ms; rank 2
// leaves at `late_ms`.
Trial OneRound(double late_ms) {
  Trial t;
  t.Ok(0, 0, "barrier_attach", 1, 2)
      .Ok(0, 1, "barrier_attach", 1, 2)
      .Ok(0, 2, "barrier_attach", 1, 2);
  t.Round(0, 1, 0, 3, 10.5).Round(0, 2, 0, 4, late_ms).Round(0, 0, 0, 9, 10);
  return t;
}

TEST(BarrierLiveness, AWaiterLeavingPastTheReleaseBoundIsInvalid) {
  History h = OneRound(1010).End(2000).Build(ReleaseBound(500));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"barrier of job 0 rank 2 (pid 1002)", "left round 0 at +1010.000ms",
                        "1000.000ms after job 0 rank 0 (pid 1000) had left it at +10.000ms",
                        "past the release bound 500.000ms"}))
      << Dump(r);
}

TEST(BarrierLiveness, WaitersLeavingWithinTheReleaseBoundAreValid) {
  History h = OneRound(400).End(2000).Build(ReleaseBound(500));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "barrier-release-judged"));
}

TEST(BarrierLiveness, AWaiterLateWhileAFaultActedIsNotJudgedForReleaseLatency) {
  History h = OneRound(1010).Fault("sigstop", 0, 2, 300, 900).End(2000).Build(ReleaseBound(500));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "barrier-release-judged"));
}

// Any fault window open while the waiter was late excuses it, whoever it
// stopped: a stopped peer may hold the lock a slow-path waiter needs.
TEST(BarrierLiveness, APeerStoppedWhileAWaiterWasLateExcusesIt) {
  History h = OneRound(1010).Fault("sigstop", 0, 1, 600, 700).End(2000).Build(ReleaseBound(500));
  EXPECT_VERDICT(Check("barrier.liveness", h), kValid);
}

// The releaser stopped between its wake and its store (the window
// crash/barrier/woken widens) and was resumed before anyone left: what
// follows is the barrier's own doing.
TEST(BarrierLiveness, AStopThatEndedBeforeTheFirstLeaveDoesNotExcuseALateWaiter) {
  History h =
      OneRound(1010).Fault("pause-at-point", 0, 0, 9.2, 9.8).End(2000).Build(ReleaseBound(500));
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"barrier of job 0 rank 2 (pid 1002)", "past the release bound 500.000ms"}))
      << Dump(r);
}

TEST(BarrierLiveness, WithoutAReleaseBoundALateWaiterIsNotJudged) {
  History h = OneRound(1010).End(2000).Build(ReleaseBound(0));
  EXPECT_VERDICT(Check("barrier.liveness", h), kValid);
}

// ------------------------------------------------------------ worker.exits

TEST(WorkerExits, WorkersExitingSoonAfterTheirLastOpAreValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Release(0, 0, 3, 4)
                  .Exit(0, 0, 30, 0)
                  .End(40)
                  .Build(Meta());
  CheckResult r = Check("worker.exits", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "worker-exited-in-time"));
}

TEST(WorkerExits, AWorkerKilledAtTeardownWithNoOpOpenIsInvalidAndNamed) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Release(0, 0, 3, 4)
                  .Killed(0, 0, 5000, true, SIGKILL, /*teardown=*/true)
                  .End(5001, /*timed_out=*/true)
                  .Build(Meta());
  CheckResult r = Check("worker.exits", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000) did not exit after its last op",
                        "release of job 0 rank 0 (pid 1000)", "killed at teardown (+5000.000ms)"}))
      << Dump(r);
}

TEST(WorkerExits, AHungCleanIsThisInvariantsAndAHungBarrierIsNot) {
  History clean = Trial()
                      .Open(0, 0, "clean", 1)
                      .Killed(0, 0, 5000, true, SIGKILL, true)
                      .End(5001, true)
                      .Build(Meta());
  CheckResult r = Check("worker.exits", clean);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"was still inside clean of job 0 rank 0 (pid 1000)"})) << Dump(r);
  History barrier = Trial()
                        .Open(0, 0, "barrier", 1, {{"round", 0}})
                        .Killed(0, 0, 5000, true, SIGKILL, true)
                        .End(5001, true)
                        .Build(Meta({Job(1, 1)}));
  EXPECT_VERDICT(Check("worker.exits", barrier), kValid);
  EXPECT_VERDICT(Check("barrier.liveness", barrier), kInvalid);
}

TEST(WorkerExits, ExitingLongAfterTheLastOpIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Release(0, 0, 3, 4)
                  .Exit(0, 0, 1000, 0)
                  .End(1001)
                  .Build(Meta());  // grace 500 ms
  CheckResult r = Check("worker.exits", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"job 0 rank 0 (pid 1000) exited 996.000ms after its last op ended "
                        "(release, at +4.000ms)"}))
      << Dump(r);
}

TEST(WorkerExits, ATimedOutTrialWithNobodyKilledAtTeardownIsNeverValid) {
  History h = Trial().Acquire(0, 0, 1, 2, 0).Exit(0, 0, 3, 0).End(5001, true).Build(Meta());
  CheckResult r = Check("worker.exits", h);
  EXPECT_VERDICT(r, kUnknown);
  EXPECT_TRUE(Names(r, {"the trial timed out, yet no worker is recorded as killed at teardown"}));
}

TEST(PrefixProgress, AReleaseStillOpenAtTheTrialTimeoutIsAHang) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Open(0, 0, "release", 3)
                  .Killed(0, 0, 5000, true, SIGKILL, true)
                  .End(5001, true)
                  .Build(Meta());
  CheckResult r = Check("prefix.progress", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"release of job 0 rank 0 (pid 1000)", "a hang"})) << Dump(r);
}

// ------------------------------------------------ cleanup.safety: witnesses

TEST(CleanupSafety, ASegmentWitnessedIntactByItsHolderIsValid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Segment(0, 0, 3, 4, "/shm.000000_shard_states", 11)
                  .Witness(0, 0, 8, 9, {{"/shm.000000_shard_states", 11}})
                  .Release(0, 0, 10, 11)
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "witness-segment-intact"));
}

TEST(CleanupSafety, ASegmentGoneUnderItsLiveHolderIsInvalidWhoeverRemovedIt) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Segment(0, 0, 3, 4, "/shm.000000_shard_states", 11)
                  .Witness(0, 0, 8, 9, {{"/shm.000000_shard_states", 0}})
                  .Release(0, 0, 10, 11)
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"segment /shm.000000_shard_states that job 0 rank 0 (pid 1000) created "
                        "at +4.000ms while holding prefix 0 was gone",
                        "no cleanup reported removing it"}))
      << Dump(r);
}

TEST(CleanupSafety, ASegmentReplacedUnderItsLiveHolderIsInvalidAndNamesTheCleanup) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Segment(0, 0, 3, 4, "/shm.000000_shard_states", 11)
                  .Clean(1, 0, 5, 6, {"/shm.000000_shard_states"})
                  .Witness(0, 0, 8, 9, {{"/shm.000000_shard_states", 12}})
                  .Release(0, 0, 10, 11)
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"(dev 7 ino 11) was another object (dev 7 ino 12)",
                        "the cleanup by job 1 rank 0 (pid 1100) (+5.000ms to +6.000ms) reported "
                        "removing it"}))
      << Dump(r);
}

TEST(CleanupSafety, AWitnessAfterItsOwnReleaseIsNotJudged) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Segment(0, 0, 3, 4, "/shm.000000_shard_states", 11)
                  .Release(0, 0, 5, 6)
                  .Witness(0, 0, 8, 9, {{"/shm.000000_shard_states", 0}})
                  .End(20)
                  .Build(Meta());
  EXPECT_VERDICT(Check("cleanup.safety", h), kValid);
}

// The release of another dataset of the same process does not end the hold
// its witness speaks for.
TEST(CleanupSafety, ASegmentGoneAfterAnotherDatasetsReleaseIsInvalid) {
  History h = Trial()
                  .Ok(0, 0, "acquire", 1, 2, {{"prefix", 0}}, {{"dataset", 0}})
                  .Ok(0, 0, "acquire", 3, 4, {{"prefix", 0}}, {{"dataset", 1}})
                  .Ok(0, 0, "segment", 5, 6,
                      {{"name", "/shm.000000_shard_states"}, {"dev", 7}, {"ino", 11}},
                      {{"name", "/shm.000000_shard_states"}, {"dataset", 0}})
                  .Ok(0, 0, "release", 10, 11, Json::object(), {{"dataset", 1}})
                  .Ok(0, 0, "witness", 20, 21,
                      {{"segments", {{{"name", "/shm.000000_shard_states"}, {"missing", true}}}}},
                      {{"when", "release"}, {"dataset", 0}})
                  .Ok(0, 0, "release", 22, 23, Json::object(), {{"dataset", 0}})
                  .End(30)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"segment /shm.000000_shard_states that job 0 rank 0 (pid 1000) created "
                        "at +6.000ms while holding prefix 0 was gone"}))
      << Dump(r);
}

TEST(CleanupSafety, AWitnessThatCouldNotLookOrWasTruncatedIsUnknown) {
  History error = Trial()
                      .Acquire(0, 0, 1, 2, 0)
                      .Segment(0, 0, 3, 4, "/shm.000000_shard_states", 11)
                      .Witness(0, 0, 8, 9, {{"/shm.000000_shard_states", -1}})
                      .End(20)
                      .Build(Meta());
  EXPECT_VERDICT(Check("cleanup.safety", error), kUnknown);
  History cut = Trial()
                    .Acquire(0, 0, 1, 2, 0)
                    .Segment(0, 0, 3, 4, "/shm.000000_shard_states", 11)
                    .Witness(0, 0, 8, 9, {{"/shm.000000_shard_states", 11}}, /*truncated=*/true)
                    .End(20)
                    .Build(Meta());
  CheckResult r = Check("cleanup.safety", cut);
  EXPECT_VERDICT(r, kUnknown);
  EXPECT_TRUE(Names(r, {"was truncated"})) << Dump(r);
}

TEST(CleanupSafety, ATruncatedCleanupReportIsUnknownNotValid) {
  Trial t;
  t.Acquire(0, 0, 1, 2, 0);
  History h = t.Ok(1, 0, "clean", 5, 6,
                   {{"removed", {"/shm.000003_x"}}, {"kept", Json::array()}, {"truncated", true}})
                  .End(20)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kUnknown);
  EXPECT_TRUE(Names(r, {"report of the cleanup by job 1 rank 0 (pid 1100)", "truncated"}))
      << Dump(r);
}

// A hold that began during the cleanup: if nothing of the prefix existed
// before it, whatever the cleanup removed under it was the new holder's.
TEST(CleanupSafety, RemovingTheSegmentOfAHoldBegunDuringTheCleanupIsInvalid) {
  History h = Trial()
                  .Clean(1, 0, 1, 20, {"/shm.000000_shard_states"})
                  .Acquire(0, 0, 2, 3, 0)
                  .Segment(0, 0, 4, 5, "/shm.000000_shard_states", 11)
                  .Release(0, 0, 30, 31)
                  .End(40)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"removed /shm.000000_shard_states",
                        "the hold began during the cleanup, and nothing of prefix 0 existed "
                        "before it"}))
      << Dump(r);
}

TEST(CleanupSafety, AHoldBegunDuringTheCleanupOfAPrefixWithAPastIsNotJudgedByName) {
  // A dead job held prefix 0 before: the removed name may have been its.
  History h = Trial()
                  .Acquire(2, 0, 0.1, 0.2, 0)
                  .Killed(2, 0, 0.5)
                  .Clean(1, 0, 1, 20, {"/shm.000000_shard_states"})
                  .Acquire(0, 0, 2, 3, 0)
                  .Release(0, 0, 30, 31)
                  .End(40)
                  .Build(Meta());
  EXPECT_VERDICT(Check("cleanup.safety", h), kValid);
}

// crash-points (catalog, seed 20261121, trial 2, seen once in CI): job 0's
// rank 0 acquired prefix 0, created its barrier and was killed; rank 1 of the
// same job had begun its acquire before that death and completed it inside a
// cleanup that removed the barrier. The name was the dead rank's, removed
// after its death (rank 1 was not in the slot yet, or the slot was live and
// nothing was removed): the same job's earlier hold is the prefix's past.
TEST(CleanupSafety, AHoldBegunDuringTheCleanupAfterItsOwnJobsDeadRankIsNotJudgedByName) {
  History h = Trial()
                  .Acquire(0, 0, 0.1, 0.2, 0)
                  .Segment(0, 0, 0.3, 0.4, "/shm.000000_barrier", 11)
                  .Ok(0, 1, "acquire", 0.45, 3, {{"prefix", 0}})
                  .Killed(0, 0, 2)
                  .Clean(1, 0, 1, 20, {"/shm.000000_barrier"})
                  .Release(0, 1, 30, 31)
                  .End(40)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kValid) << Dump(r);
}

// Its own job's other rank beginning later changes nothing: the first new
// holder's name was still removed under it.
TEST(CleanupSafety, ALaterRankOfTheSameJobDoesNotExcuseTheFirstNewHolder) {
  History h = Trial()
                  .Clean(1, 0, 1, 20, {"/shm.000000_barrier"})
                  .Acquire(0, 0, 2, 3, 0)
                  .Segment(0, 0, 4, 5, "/shm.000000_barrier", 11)
                  .Acquire(0, 1, 6, 7, 0)
                  .Release(0, 0, 30, 31)
                  .Release(0, 1, 30, 31)
                  .End(40)
                  .Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"while job 0 rank 0 (pid 1000) (acquired +3.000ms",
                        "the hold began during the cleanup"}))
      << Dump(r);
}

// --------------------------------------- prefix.unique: present as evidence

TEST(PrefixUnique, AGrantListingTheDeadHoldersOwnSegmentIsInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Segment(0, 0, 3, 4, "/shm.000000_shard_states", 11)
                  .Killed(0, 0, 10)
                  .Ok(1, 0, "acquire", 20, 21,
                      {{"prefix", 0},
                       {"present", Json::array({{{"name", "/shm.000000_shard_states"},
                                                 {"dev", 7},
                                                 {"ino", 11}}})}})
                  .Release(1, 0, 30, 31)
                  .End(40)
                  .Build(Meta());
  CheckResult r = Check("prefix.unique", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Reached(r, "prefix-granted-over-dead-holder"));
  EXPECT_TRUE(Names(r, {"prefix 0 was granted to job 1 rank 0 (pid 1100) at +21.000ms",
                        "segment /shm.000000_shard_states of job 0", "was still there"}))
      << Dump(r);
}

TEST(PrefixUnique, AGrantListingAnotherObjectOfTheSameNameShowsNothing) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Segment(0, 0, 3, 4, "/shm.000000_shard_states", 11)
                  .Killed(0, 0, 10)
                  .Ok(1, 0, "acquire", 20, 21,
                      {{"prefix", 0},
                       {"present", Json::array({{{"name", "/shm.000000_shard_states"},
                                                 {"dev", 7},
                                                 {"ino", 99}}})}})
                  .Release(1, 0, 30, 31)
                  .End(40)
                  .Build(Meta());
  EXPECT_VERDICT(Check("prefix.unique", h), kUnknown);
}

TEST(PrefixUnique, WithoutInodesANameTheNewJobHadNotCreatedYetIsEvidence) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Segment(0, 0, 3, 4, "/shm.000000_shard_states", 11)
                  .Killed(0, 0, 10)
                  .Ok(1, 0, "acquire", 20, 21,
                      {{"prefix", 0}, {"present", Json::array({"/shm.000000_shard_states"})}})
                  .Release(1, 0, 30, 31)
                  .End(40)
                  .Build(Meta());
  EXPECT_VERDICT(Check("prefix.unique", h), kInvalid);
}

TEST(PrefixExclusiveLocal, ATruncatedRefusalMessageIsUnknownNotInvalid) {
  std::vector<Json> events;  // a refusal whose writer cut its message and said so
  std::vector<std::string> errors;
  events.push_back({{"t", 0}, {"type", "trial"}, {"phase", "start"}});
  auto ev = [&](Json e) { events.push_back(std::move(e)); };
  ev({{"t", 1 * kMs}, {"type", "invoke"}, {"op", "acquire"}, {"id", 1}, {"job", 0}, {"rank", 0},
      {"pid", Pid(0, 0)}});
  ev({{"t", 2 * kMs}, {"type", "ok"}, {"op", "acquire"}, {"id", 1}, {"job", 0}, {"rank", 0},
      {"pid", Pid(0, 0)}, {"value", {{"prefix", 0}}}});
  ev({{"t", 3 * kMs}, {"type", "invoke"}, {"op", "acquire"}, {"id", 1}, {"job", 1}, {"rank", 0},
      {"pid", Pid(1, 0)}});
  ev({{"t", 4 * kMs}, {"type", "fail"}, {"op", "acquire"}, {"id", 1}, {"job", 1}, {"rank", 0},
      {"pid", Pid(1, 0)}, {"truncated", true},
      {"error", {{"code", "in-use"}, {"message", "local dir /da..."}}}});
  ev({{"t", 10 * kMs}, {"type", "invoke"}, {"op", "release"}, {"id", 2}, {"job", 0}, {"rank", 0},
      {"pid", Pid(0, 0)}});
  ev({{"t", 11 * kMs}, {"type", "ok"}, {"op", "release"}, {"id", 2}, {"job", 0}, {"rank", 0},
      {"pid", Pid(0, 0)}});
  ev({{"t", 20 * kMs}, {"type", "trial"}, {"phase", "end"}});
  History cut = build_history(events, Meta({Job(1, 0, {"/data/x"}), Job(1, 0, {"/data/x"})}),
                              &errors);
  EXPECT_TRUE(errors.empty());
  CheckResult r = Check("prefix.exclusive-local", cut);
  EXPECT_VERDICT(r, kUnknown);
  EXPECT_TRUE(Names(r, {"truncated message"})) << Dump(r);
}


TEST(FaultExcuses, APauseAtAPointIsAStopAndAReplacementAlsoAKill) {
  History pause = Trial().Fault("pause-at-point", 0, 1, 12, 15).End(30).Build(Meta());
  EXPECT_NE(Causes(pause, 0, 0, "timeout"), nullptr);
  EXPECT_EQ(Causes(pause, 0, 0, "broken"), nullptr);
  History replaced = Trial().Fault("replacement", 0, 1, 2, 5).End(30).Build(Meta());
  EXPECT_NE(Causes(replaced, 0, 0, "broken"), nullptr);  // the victim was killed at the end
  EXPECT_EQ(Causes(replaced, 0, 0, "mismatch"), nullptr);
  History ghost = Trial().Fault("reused-pid", -1, -1, 1, 29).End(30).Build(Meta());
  EXPECT_EQ(Causes(ghost, 0, 0, "timeout"), nullptr);
}

TEST(CleanupSafety, AHeldLockStaysProtectedForItsWholeWindowWhateverItsEndSays) {
  std::vector<Json> events = {
      {{"t", 0}, {"type", "trial"}, {"phase", "start"}},
      {{"t", 1 * kMs}, {"type", "fault"}, {"kind", "init-lock"}, {"phase", "start"}, {"job", -1},
       {"rank", -1}, {"detail", {{"protect", true}, {"path", "/locks/shm.init.lock"}, {"held_by", "stopped"}}}},
      {{"t", 5 * kMs}, {"type", "invoke"}, {"op", "clean"}, {"id", 1}, {"job", 0}, {"rank", 0},
       {"pid", Pid(0, 0)}},
      {{"t", 6 * kMs}, {"type", "ok"}, {"op", "clean"}, {"id", 1}, {"job", 0}, {"rank", 0},
       {"pid", Pid(0, 0)}, {"value", {{"removed", {"/locks/shm.init.lock"}}, {"kept", Json::array()}}}},
      {{"t", 9 * kMs}, {"type", "fault"}, {"kind", "init-lock"}, {"phase", "end"}, {"job", -1},
       {"rank", -1}, {"detail", {{"protect", false}}}},
      {{"t", 20 * kMs}, {"type", "trial"}, {"phase", "end"}}};
  std::vector<std::string> errors;
  History h = build_history(events, Meta(), &errors);
  EXPECT_TRUE(errors.empty());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"removed /locks/shm.init.lock while it was held by a live process (stopped)"}))
      << Dump(r);
}

TEST(CleanupSafety, ACleanupThatWaitedForAHeldLockAndRemovedItAfterTheReleaseIsValid) {
  // The cleanup blocked on the held init lock, took it once the holder let go
  // (+9 ms) and removed it then: a valid order exists.
  std::vector<Json> events = {
      {{"t", 0}, {"type", "trial"}, {"phase", "start"}},
      {{"t", 1 * kMs}, {"type", "fault"}, {"kind", "init-lock"}, {"phase", "start"}, {"job", -1},
       {"rank", -1}, {"detail", {{"protect", true}, {"name", "/shm.init.lock"}, {"held_by", "stopped"}}}},
      {{"t", 5 * kMs}, {"type", "invoke"}, {"op", "clean"}, {"id", 1}, {"job", 0}, {"rank", 0},
       {"pid", Pid(0, 0)}},
      {{"t", 9 * kMs}, {"type", "fault"}, {"kind", "init-lock"}, {"phase", "end"}, {"job", -1},
       {"rank", -1}, {"detail", {{"protect", false}}}},
      {{"t", 10 * kMs}, {"type", "ok"}, {"op", "clean"}, {"id", 1}, {"job", 0}, {"rank", 0},
       {"pid", Pid(0, 0)}, {"value", {{"removed", {"/shm.init.lock"}}, {"kept", Json::array()}}}},
      {{"t", 20 * kMs}, {"type", "trial"}, {"phase", "end"}}};
  std::vector<std::string> errors;
  History h = build_history(events, Meta(), &errors);
  EXPECT_VERDICT(Check("cleanup.safety", h), kValid);
}

TEST(BarrierLiveness, TheDeathBoundStartsWhenTheKillWasSeenNotWhenTheBodyWasReaped) {
  // The supervisor saw the SIGKILL take effect at +10 ms, and reaped it (a
  // preempted supervisor) only at +900 ms: the survivor's 400 ms is late.
  std::vector<Json> events = {
      {{"t", 0}, {"type", "trial"}, {"phase", "start"}},
      {{"t", 1 * kMs}, {"type", "invoke"}, {"op", "barrier_attach"}, {"id", 1}, {"job", 0}, {"rank", 0}, {"pid", Pid(0, 0)}},
      {{"t", 2 * kMs}, {"type", "ok"}, {"op", "barrier_attach"}, {"id", 1}, {"job", 0}, {"rank", 0}, {"pid", Pid(0, 0)}},
      {{"t", 1 * kMs}, {"type", "invoke"}, {"op", "barrier_attach"}, {"id", 1}, {"job", 0}, {"rank", 1}, {"pid", Pid(0, 1)}},
      {{"t", 2 * kMs}, {"type", "ok"}, {"op", "barrier_attach"}, {"id", 1}, {"job", 0}, {"rank", 1}, {"pid", Pid(0, 1)}},
      {{"t", 3 * kMs}, {"type", "invoke"}, {"op", "barrier"}, {"id", 2}, {"job", 0}, {"rank", 0}, {"pid", Pid(0, 0)}, {"args", {{"round", 0}}}},
      {{"t", 9 * kMs}, {"type", "fault"}, {"kind", "sigkill"}, {"phase", "instant"}, {"job", 0}, {"rank", 1},
       {"pid", Pid(0, 1)}, {"signal", SIGKILL}, {"sent_t", 9 * kMs}, {"effect", "exited"}, {"effect_t", 10 * kMs}},
      {{"t", 910 * kMs}, {"type", "fail"}, {"op", "barrier"}, {"id", 2}, {"job", 0}, {"rank", 0}, {"pid", Pid(0, 0)},
       {"error", {{"code", "broken"}, {"message", "rank 1 died"}}}},
      {{"t", 900 * kMs}, {"type", "exit"}, {"job", 0}, {"rank", 1}, {"pid", Pid(0, 1)}, {"signal", SIGKILL}, {"by_harness", true}},
      {{"t", 2000 * kMs}, {"type", "trial"}, {"phase", "end"}}};
  std::vector<std::string> errors;
  TrialMeta m = Meta({Job(2, 1)});
  m.liveness_ns = 200 * kMs;
  m.barrier_deadline_ns = 3000 * kMs;
  History h = build_history(events, m, &errors);
  EXPECT_TRUE(errors.empty()) << errors.front();
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"900.000ms after rank 1 (pid 1001) was killed (signal 9) at +10.000ms"})) << Dump(r);
}

// ---------------------------------- timing: time spent waiting for a CPU
//
// On an oversubscribed machine a process that is runnable may wait for a CPU
// (the kernel's run_delay, logged as cpu_wait_ns): that is the machine's
// delay, not the subject's latency, and it is not counted against a bound.
// What the subject itself took past a bound is still a violation.

TEST(PrefixProgress, TimeTheWorkerWaitedForACpuIsNotCounted) {
  // 1599 ms against deadline 1000 + grace 500, of which 300 ms runnable
  // but not running: 1299 ms of the subject's own.
  History h = Trial().Acquire(0, 0, 1, 1600, 0).CpuWait(40, 340).End(2000).Build(Meta());
  EXPECT_VERDICT(Check("prefix.progress", h), kValid);
}

TEST(PrefixProgress, AnAcquireLateBeyondItsCpuWaitIsStillInvalid) {
  History h = Trial().Acquire(0, 0, 1, 1600, 0).CpuWait(40, 90).End(2000).Build(Meta());
  CheckResult r = Check("prefix.progress", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"acquire of job 0 rank 0 (pid 1000)", "after 1599.000ms",
                        "50.000ms waiting for a CPU, not counted"}))
      << Dump(r);
}

TEST(BarrierLiveness, ASurvivorLateOnlyForWantOfACpuMeetsTheDeathBound) {
  // Killed at 10 ms; the survivor's error comes 990 ms later against a bound
  // of 700 ms, but 400 ms of its round it was runnable and not running.
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Ok(0, 1, "barrier_attach", 1, 2)
                  .Killed(0, 1, 10)
                  .Fail(0, 0, "barrier", 5, 1000, "broken", "rank 1 died", {{"round", 0}})
                  .CpuWait(20, 420)
                  .End(2000)
                  .Build(FastLiveness());
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "barrier-death-detected-in-time"));
}

TEST(BarrierLiveness, ASurvivorWaitingForItsDeadlineIsCaughtDespiteItsCpuWait) {
  // The flaw the bound is for: no death detection, the survivor times out at
  // its deadline. Its 400 ms of CPU wait do not hide the 2.6 s it slept.
  History h = Trial()
                  .Ok(0, 0, "barrier_attach", 1, 2)
                  .Ok(0, 1, "barrier_attach", 1, 2)
                  .Killed(0, 1, 10)
                  .Fail(0, 0, "barrier", 5, 3005, "timeout", "rank 1 missing", {{"round", 0}})
                  .CpuWait(20, 420)
                  .End(4000)
                  .Build(FastLiveness());
  CheckResult r = Check("barrier.liveness", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"failed (timeout)", "2595.000ms after rank 1 (pid 1001)",
                        "400.000ms waiting for a CPU, not counted",
                        "past the death-detection bound 700.000ms"}))
      << Dump(r);
}

TEST(BarrierLiveness, ARoundPastItsDeadlineOnlyForWantOfACpuIsValid) {
  TrialMeta m = Meta({Job(1, 1)});  // deadline 1000 + grace 500
  History late = Trial().Ok(0, 0, "barrier_attach", 1, 2).Round(0, 0, 0, 3, 1803).CpuWait(5, 505).End(2000).Build(m);
  EXPECT_VERDICT(Check("barrier.liveness", late), kValid);
  History slow = Trial().Ok(0, 0, "barrier_attach", 1, 2).Round(0, 0, 0, 3, 1803).CpuWait(5, 105).End(2000).Build(m);
  CheckResult r = Check("barrier.liveness", slow);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"completed after 1800.000ms", "100.000ms waiting for a CPU, not counted"})) << Dump(r);
}

TEST(WorkerExits, AnExitSeenLateForWantOfACpuIsValid) {
  // Released at 4 ms, seen exiting at 1000 ms (grace 500): from its last
  // completion (cpu_wait 10 ms) to its zombie (310 ms) it waited 300 ms for a
  // CPU, and the supervisor that reaped it 300 ms more.
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Release(0, 0, 3, 4)
                  .CpuWait(5, 10)
                  .Exit(0, 0, 1000, 0)
                  .ExitWaits(310, 300)
                  .End(1001)
                  .Build(Meta());
  EXPECT_VERDICT(Check("worker.exits", h), kValid);
}

TEST(WorkerExits, AnExitLateBeyondTheMeasuredWaitsIsStillInvalid) {
  History h = Trial()
                  .Acquire(0, 0, 1, 2, 0)
                  .Release(0, 0, 3, 4)
                  .CpuWait(5, 10)
                  .Exit(0, 0, 2000, 0)
                  .ExitWaits(310, 300)
                  .End(2001)
                  .Build(Meta());
  CheckResult r = Check("worker.exits", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"exited 1396.000ms after its last op ended",
                        "600.000ms waiting for a CPU, not counted"}))
      << Dump(r);
}

TEST(CpuWait, AClaimPastWhatTheKernelRecordedByTheExitIsAHistoryErrorAndExcusesNothing) {
  // The worker claims 900 ms of CPU wait; the supervisor read 20 ms from its
  // zombie. The claim is dropped: the acquire is judged on its full 1599 ms.
  std::vector<std::string> errors;
  History h = Trial()
                  .Acquire(0, 0, 1, 1600, 0)
                  .CpuWait(0, 900)
                  .Exit(0, 0, 1601, 0)
                  .ExitWaits(20, 0)
                  .End(2000)
                  .BuildWithErrors(Meta(), &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("claims cpu_wait_ns 900000000, more than the 20000000 the kernel recorded"),
            std::string::npos)
      << errors[0];
  EXPECT_VERDICT(Check("prefix.progress", h), kInvalid);
}

TEST(CpuWait, AWaitThatGoesDownOrIsNotANumberIsAHistoryError) {
  std::vector<std::string> errors;
  History h = Trial()
                  .Acquire(0, 0, 1, 1600, 0)
                  .CpuWait(500, 100)
                  .End(2000)
                  .BuildWithErrors(Meta(), &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("cpu_wait_ns went down"), std::string::npos) << errors[0];
  EXPECT_VERDICT(Check("prefix.progress", h), kInvalid);
  errors.clear();
  History bad = Trial().Acquire(0, 0, 1, 1600, 0).CpuWait(-1, 300).End(2000).BuildWithErrors(Meta(), &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("cpu_wait_ns must be a non-negative integer"), std::string::npos) << errors[0];
  EXPECT_VERDICT(Check("prefix.progress", bad), kInvalid);
}

// ------------------------------------------------------- pool subjects (joblib)

const std::string kDir0 = "/dev/shm/joblib_memmapping_folder_1000_a_b";
const std::string kFile0 = kDir0 + "/1000-1-c.pkl";
const std::string kDir1 = "/dev/shm/joblib_memmapping_folder_1100_d_e";

Json Made(const std::string& name, int ino, unsigned mode) {
  return {{"name", name}, {"dev", 7}, {"ino", ino}, {"mode", mode}};
}
Json Seen(std::vector<std::pair<std::string, int>> seen) {
  Json list = Json::array();
  for (const auto& [name, ino] : seen) {
    list.push_back(ino > 0 ? Json{{"name", name}, {"dev", 7}, {"ino", ino}} : Json{{"name", name}, {"missing", true}});
  }
  return {{"segments", list}};
}
const Json kLive = {{"when", "live"}};

// A pool of job `job` from t0 to t1 that created its folder (and a file) early on.
Trial& Pool(Trial& t, int job, double t0, double t1, const std::string& dir, int ino, bool file = false) {
  t.Ok(job, 0, "pool", t0, t1).Ok(job, 0, "folder", t0 + 1, t0 + 2, Made(dir, ino, 0700), {{"name", dir}});
  if (file) t.Ok(job, 0, "file", t0 + 3, t0 + 4, Made(dir + "/1000-1-c.pkl", ino + 1, 0600), {{"name", dir + "/1000-1-c.pkl"}});
  return t;
}

TEST(PoolSubjects, ALivePoolsFolderAndFileWitnessedIntactIsValid) {
  Trial t;
  Pool(t, 0, 1, 100, kDir0, 5, true).Ok(0, 0, "witness", 50, 51, Seen({{kDir0, 5}, {kFile0, 6}}), kLive);
  History h = t.Exit(0, 0, 200, 0).Audit(300).End(301).Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "pool-witness-intact")) << Dump(r);
}

TEST(PoolSubjects, AnotherPoolsDeleteOfALivePoolsFolderIsInvalidAndNamed) {
  Trial t;
  Pool(t, 0, 1, 100, kDir0, 5);
  Pool(t, 1, 1, 100, kDir1, 9);
  t.Ok(1, 0, "remove", 30, 31, {{"removed", {kDir0}}}, {{"name", kDir0}})
      .Ok(0, 0, "witness", 50, 51, Seen({{kDir0, 0}}), kLive);
  History h = t.Exit(0, 0, 200, 0).Exit(1, 0, 200, 0).Audit(300).End(301).Build(Meta());
  CheckResult r = Check("cleanup.safety", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"folder " + kDir0, "its pool still running", "delete by job 1 rank 0 (pid 1100)"})) << Dump(r);
  EXPECT_TRUE(Reached(r, "pools-overlapped")) << Dump(r);
}

TEST(PoolSubjects, APoolsOwnCleanupIsNotARemovalUnderIt) {
  Trial t;
  Pool(t, 0, 1, 100, kDir0, 5, true)
      .Ok(0, 0, "track", 60, 60.5, Json::object(), {{"cmd", "maybe_unlink"}, {"name", kFile0}, {"rtype", "file"}})
      .Ok(0, 0, "remove", 61, 70, {{"removed", {kDir0, kFile0}}}, {{"name", kDir0}})
      .Ok(0, 0, "witness", 65, 66, Seen({{kDir0, 0}, {kFile0, 0}}), kLive);
  History h = t.Exit(0, 0, 200, 0).Audit(300).End(301).Build(Meta());
  EXPECT_VERDICT(Check("cleanup.safety", h), kValid);
}

TEST(PoolSubjects, AWitnessAfterThePoolEndedPromisesNothing) {
  Trial t;
  Pool(t, 0, 1, 50, kDir0, 5).Ok(0, 0, "witness", 60, 61, Seen({{kDir0, 0}}), {{"when", "end"}});
  History h = t.Exit(0, 0, 200, 0).Audit(300).End(301).Build(Meta());
  EXPECT_VERDICT(Check("cleanup.safety", h), kValid);
}

TEST(CleanupNoLeak, WhatAKilledPoolLeftIsCleanedWithinTheBound) {
  Trial t;
  t.Open(0, 0, "pool", 1).Ok(0, 0, "folder", 2, 3, Made(kDir0, 5, 0700), {{"name", kDir0}});
  History h = t.Killed(0, 0, 100).AuditWaited(40000, 45000, true, 35000).End(40001).Build(Meta());
  CheckResult r = Check("cleanup.no-leak", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "cleaned-after-holder-killed")) << Dump(r);
  EXPECT_TRUE(Reached(r, "cleaned-eventually")) << Dump(r);
  EXPECT_TRUE(Reached(r, "stragglers-exited-in-bound")) << Dump(r);
}

TEST(CleanupNoLeak, WhatAKilledPoolLeftPastTheBoundIsALeakNamingItsCreator) {
  Trial t;
  t.Open(0, 0, "pool", 1).Ok(0, 0, "folder", 2, 3, Made(kDir0, 5, 0700), {{"name", kDir0}});
  History h = t.Killed(0, 0, 100)
                  .AuditWaited(45200, 45000, false, 0, {"joblib_memmapping_folder_1000_a_b"})
                  .End(45201)
                  .Build(Meta());
  CheckResult r = Check("cleanup.no-leak", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"joblib_memmapping_folder_1000_a_b", "folder by job 0 rank 0 (pid 1000)", "killed at",
                        "45000.000ms for the trial's remaining processes", "killed at its end"}))
      << Dump(r);
  EXPECT_FALSE(Reached(r, "cleaned-after-holder-killed")) << Dump(r);
}

TEST(ResourcePrivate, AFolderAndFileCreatedPrivateAreValid) {
  Trial t;
  Pool(t, 0, 1, 100, kDir0, 5, true);
  History h = t.Exit(0, 0, 200, 0).End(301).Build(Meta());
  CheckResult r = Check("resource.private", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(Reached(r, "resource-created-private")) << Dump(r);
}

TEST(ResourcePrivate, AFolderLeftListableAndAFileReadableUntilItsChmodAreInvalid) {
  // joblib 1.2.0 in /dev/shm: the folder is made 0755 and never chmodded (the
  // reducer's makedirs finds it there, EEXIST, and skips its chmod); the file is
  // written 0644 and chmodded 0600 after the whole dump.
  Trial t;
  t.Ok(0, 0, "pool", 1, 100)
      .Ok(0, 0, "folder", 2, 3, Made(kDir0, 5, 0755), {{"name", kDir0}})
      .Ok(0, 0, "file", 4, 8, Made(kFile0, 6, 0644), {{"name", kFile0}})
      .Ok(0, 0, "chmod", 9, 9.5, Made(kFile0, 6, 0600), {{"name", kFile0}, {"mode", 0600}});
  History h = t.Exit(0, 0, 200, 0).End(301).Build(Meta());
  CheckResult r = Check("resource.private", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"folder " + kDir0, "mode 0755", "its group and other users may list it",
                        "never made private (still so at the end"}))
      << Dump(r);
  EXPECT_TRUE(Names(r, {"file " + kFile0, "mode 0644", "its group and other users may read it",
                        "in folder " + kDir0, "written from +4.000ms", "until its chmod to 0600 began at +9.000ms",
                        "1.000ms readable"}))
      << Dump(r);
  EXPECT_TRUE(Reached(r, "folder-never-private")) << Dump(r);
  EXPECT_TRUE(Reached(r, "file-readable-before-chmod")) << Dump(r);
}

TEST(ResourcePrivate, AFolderListableOnlyUntilItsChmodIsStillInvalidButAFileInsideItThenIsNot) {
  // joblib 1.2.0 in the temp dir: makedirs (0755) then chmod 0700 at once; the
  // file is written 0644 inside the 0700 folder: nobody else gets to it.
  Trial t;
  t.Ok(0, 0, "pool", 1, 100)
      .Ok(0, 0, "folder", 2, 3, Made(kDir0, 5, 0755), {{"name", kDir0}})
      .Ok(0, 0, "chmod", 3.1, 3.2, Made(kDir0, 5, 0700), {{"name", kDir0}, {"mode", 0700}})
      .Ok(0, 0, "file", 4, 8, Made(kFile0, 6, 0644), {{"name", kFile0}})
      .Ok(0, 0, "chmod", 9, 9.5, Made(kFile0, 6, 0600), {{"name", kFile0}, {"mode", 0600}});
  History h = t.Exit(0, 0, 200, 0).End(301).Build(Meta());
  CheckResult r = Check("resource.private", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"folder " + kDir0, "mode 0755", "until its chmod to 0700 began at +3.100ms"})) << Dump(r);
  EXPECT_EQ(r.problems.size(), 1u) << Dump(r);
  EXPECT_FALSE(Names(r, {kFile0})) << Dump(r);
  EXPECT_TRUE(Reached(r, "folder-readable-before-chmod")) << Dump(r);
  EXPECT_TRUE(Reached(r, "resource-chmod-after-create")) << Dump(r);
}

TEST(ResourcePrivate, AFolderNeverMadePrivateIsJudgedUntilItsCreatorRemovesIt) {
  Trial t;
  t.Ok(0, 0, "pool", 1, 100)
      .Ok(0, 0, "folder", 2, 3, Made(kDir0, 5, 0750), {{"name", kDir0}})
      .Ok(0, 0, "remove", 150, 151, {{"removed", {kDir0}}}, {{"name", kDir0}});
  History h = t.Exit(0, 0, 200, 0).End(301).Build(Meta());
  CheckResult r = Check("resource.private", h);
  EXPECT_VERDICT(r, kInvalid);
  EXPECT_TRUE(Names(r, {"mode 0750", "its group may list it", "until its removal began at +150.000ms (147.000ms)"}))
      << Dump(r);
}

TEST(ResourcePrivate, ObjectsReportedWithoutAModeAreNotJudged) {
  History h = Trial().Acquire(0, 0, 1, 2, 0).Segment(0, 0, 3, 4, "/shm.000000_x", 5).End(10).Build(Meta());
  CheckResult r = Check("resource.private", h);
  EXPECT_VERDICT(r, kValid);
  EXPECT_TRUE(r.reached.empty()) << Dump(r);
}

}  // namespace
}  // namespace harness
