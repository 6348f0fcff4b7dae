#include "shmcoord/barrier.h"

#include <fiu-control.h>
#include <fiu.h>
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <optional>
#include <set>

#include "records.h"
#include "shmcoord/cleanup.h"
#include "shmcoord/failpoint.h"
#include "shmcoord/registry.h"
#include "test_util.h"

namespace shmcoord {
namespace {

using testing::ShmTest;
using namespace std::chrono_literals;

class BarrierTest : public ShmTest {
 protected:
  BarrierOptions opt(std::chrono::milliseconds timeout = 5000ms) {
    BarrierOptions o;
    o.timeout = timeout;
    return o;
  }
  // A participant of `claim` takes a seat of a 2-process barrier "b" and is
  // SIGKILLed before anyone else attaches.
  void attach_then_die(std::uint64_t claim) {
    auto& dead = fork_child([&](int out) {
      auto o = opt();
      o.claim = claim;
      auto b = Barrier::attach(ns, "b", 2, o);
      report(out, b ? "in" : b.error().to_string());
      ::raise(SIGKILL);
      return 0;
    });
    ASSERT_EQ(read_line(dead), "in");
    wait_child(dead);
  }
  static std::string outcome(const Result<std::uint32_t>& r) {
    return r ? "ok" : std::string(code_name(r.error().code)) + ":" + r.error().message;
  }
  // A participant of the `num_procs`-process barrier "b" arrives in round 0
  // and is SIGKILLed there: its arrival counts, its seat stays taken.
  void arrive_then_die(int num_procs) {
    auto& victim = fork_child([&](int) {
      if (!failpoint::set_pause_spec("crash/barrier/wait/before-sleep:1").empty()) return 2;
      auto b = Barrier::attach(ns, "b", num_procs, opt());
      (void)b->wait();
      return 0;
    });
    ASSERT_TRUE(wait_stopped(victim)) << "the victim never arrived";
    kill_child(victim);
  }
  // A newcomer attaches to "b" and reports "refused <code>: <why>", or
  // "attached" and then its first wait's outcome.
  testing::ChildProc& newcomer(int num_procs, std::chrono::milliseconds timeout) {
    return fork_child([this, num_procs, timeout](int out) {
      auto b = Barrier::attach(ns, "b", num_procs, opt(timeout));
      if (!b) {
        report(out, "refused " + std::string(code_name(b.error().code)) + ": " + b.error().message);
        return 0;
      }
      report(out, "attached");
      report(out, outcome(b->wait()));
      return 0;
    });
  }
};

TEST_F(BarrierTest, ParticipantsCrossManyRoundsTogether) {
  constexpr int kProcs = 4, kRounds = 200;
  std::vector<testing::ChildProc*> kids;
  for (int i = 0; i < kProcs; ++i) {
    kids.push_back(&fork_child([&](int out) {
      auto b = Barrier::attach(ns, "b", kProcs, opt());
      if (!b) {
        report(out, b.error().to_string());
        return 2;
      }
      for (int r = 0; r < kRounds; ++r) {
        auto g = b->wait();
        if (!g) {
          report(out, g.error().to_string());
          return 1;
        }
      }
      report(out, "done");
      return 0;
    }));
  }
  for (auto* k : kids) EXPECT_EQ(read_line(*k), "done");
  for (auto* k : kids) EXPECT_EQ(wait_child(*k), 0);
  EXPECT_TRUE(testing::shm_names_with(ns.root).size() <= 0) << "the last detach unlinks the barrier";
}

// Safety: nobody leaves round r before all entered it. A slow participant
// records its entry time; the fast ones record their exit time.
TEST_F(BarrierTest, NobodyLeavesARoundBeforeEveryoneEnteredIt) {
  auto& slow = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 3, opt());
    ::usleep(200000);
    auto t = std::chrono::steady_clock::now().time_since_epoch().count();
    report(out, std::to_string(t));
    return b && b->wait() ? 0 : 1;
  });
  std::vector<testing::ChildProc*> fast;
  for (int i = 0; i < 2; ++i) {
    fast.push_back(&fork_child([&](int out) {
      auto b = Barrier::attach(ns, "b", 3, opt());
      bool ok = b && b->wait();
      report(out, std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
      return ok ? 0 : 1;
    }));
  }
  long long entered = std::stoll(read_line(slow));
  for (auto* f : fast) EXPECT_GE(std::stoll(read_line(*f)), entered);
  for (auto* f : fast) EXPECT_EQ(wait_child(*f), 0);
  EXPECT_EQ(wait_child(slow), 0);
}

// The original: a participant that died before entering left the others spinning forever.
TEST_F(BarrierTest, ParticipantKilledBeforeEnteringBreaksSurvivorsWithinOneSecond) {
  testing::ShmTest::Gate never;
  auto& victim = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 3, opt());
    report(out, b ? "attached" : b.error().to_string());
    never.wait_go();
    return 0;
  });
  ASSERT_EQ(read_line(victim), "attached");
  std::vector<testing::ChildProc*> survivors;
  for (int i = 0; i < 2; ++i) {
    survivors.push_back(&fork_child([&](int out) {
      if (!failpoint::set_pause_spec("crash/barrier/wait/before-sleep:1").empty()) return 2;
      auto b = Barrier::attach(ns, "b", 3, opt(30000ms));
      report(out, "in");
      auto r = b->wait();
      report(out, outcome(r));
      report(out, std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
      return 0;
    }));
  }
  for (auto* s : survivors) ASSERT_EQ(read_line(*s), "in");
  // Both have entered round 0 before the victim dies.
  for (auto* s : survivors) ASSERT_TRUE(wait_stopped(*s));
  for (auto* s : survivors) ::kill(s->pid, SIGCONT);
  auto killed_at = std::chrono::steady_clock::now().time_since_epoch().count();
  kill_child(victim);
  for (auto* s : survivors) {
    std::string r = read_line(*s);
    EXPECT_EQ(r.rfind("broken:", 0), 0u) << r;
    EXPECT_NE(r.find("pid"), std::string::npos) << "names the dead participant: " << r;
    EXPECT_NE(r.find("died before entering round 0"), std::string::npos) << r;
    long long t = std::stoll(read_line(*s));
    EXPECT_LT(t - killed_at, 1'000'000'000LL) << "released within 1 s of the death";
  }
}

// The original: a death after entering let that round finish and hung the next.
TEST_F(BarrierTest, ParticipantKilledAfterEnteringCompletesThatRoundThenBreaksTheNext) {
  testing::ShmTest::Gate go;
  auto& survivor = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 2, opt(20000ms));
    report(out, "in");
    go.wait_go();  // the victim has entered round 0 and died there
    report(out, outcome(b->wait()));
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(survivor), "in");
  auto& victim = fork_child([&](int) {
    fiu_init(0);
    fiu_enable("crash/barrier/wait/before-sleep", 1, nullptr, 0);
    auto b = Barrier::attach(ns, "b", 2, opt());
    (void)b->wait();
    return 0;
  });
  EXPECT_EQ(wait_child(victim), 128 + SIGKILL);
  go.open_all();
  EXPECT_EQ(read_line(survivor), "ok");
  std::string second = read_line(survivor, 5000ms);
  EXPECT_EQ(second.rfind("broken:", 0), 0u) << second;
  EXPECT_NE(second.find("died before entering round 1"), std::string::npos) << second;
}

// A seated participant killed inside the barrier's lock (here in a liveness
// check of its wait) breaks the barrier, naming it. (A process that dies in
// the lock before its seat is written breaks nothing: issue 19 flaws 9, 10.)
TEST_F(BarrierTest, ParticipantKilledHoldingTheLockBreaksTheBarrier) {
  auto& survivor = fork_child([&](int out) {
    BarrierOptions o = opt(20000ms);
    o.liveness_interval = 20ms;
    auto b = Barrier::attach(ns, "b", 3, o);
    report(out, "in");
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(survivor), "in");
  auto& victim = fork_child([&](int) {
    fiu_init(0);
    fiu_enable("crash/barrier/wait/check-locked", 1, nullptr, 0);
    BarrierOptions o = opt();
    o.liveness_interval = 20ms;
    auto b = Barrier::attach(ns, "b", 3, o);
    if (b) (void)b->wait();  // the third never comes: its first check dies holding the lock
    return 0;
  });
  EXPECT_EQ(wait_child(victim), 128 + SIGKILL);
  std::string r = read_line(survivor, 5000ms);
  EXPECT_EQ(r.rfind("broken:", 0), 0u) << r;
  EXPECT_NE(r.find("participant 1"), std::string::npos) << "names the dead participant: " << r;
  EXPECT_NE(r.find("died holding the barrier lock"), std::string::npos) << r;
}

// The last to arrive died after every arrival was marked, before releasing
// the round. Every participant entered the round, so leaving it is safe: a
// survivor releases it, and the next round breaks naming the dead one.
TEST_F(BarrierTest, ReleaserKilledBeforeReleasingTheRoundCompletesItAndBreaksTheNext) {
  auto& survivor = fork_child([&](int out) {
    if (!failpoint::set_pause_spec("crash/barrier/wait/before-sleep:1").empty()) return 2;
    auto b = Barrier::attach(ns, "b", 2, opt(20000ms));
    report(out, "in");
    report(out, outcome(b->wait()));
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(survivor), "in");
  ASSERT_TRUE(wait_stopped(survivor));  // it entered round 0 first
  ::kill(survivor.pid, SIGCONT);
  auto& victim = fork_child([&](int) {
    auto b = Barrier::attach(ns, "b", 2, opt());
    fiu_init(0);
    fiu_enable("crash/barrier/wait/before-release", 1, nullptr, 0);
    (void)b->wait();
    return 0;
  });
  EXPECT_EQ(wait_child(victim), 128 + SIGKILL);
  EXPECT_EQ(read_line(survivor, 5000ms), "ok");
  std::string r = read_line(survivor, 5000ms);
  EXPECT_EQ(r.rfind("broken:", 0), 0u) << r;
  EXPECT_NE(r.find("died before entering round 1"), std::string::npos) << r;
}

// A stopped participant is not dead: the others wait until their deadline.
TEST_F(BarrierTest, StoppedParticipantIsWaitedForUntilTheDeadline) {
  testing::ShmTest::Gate never;
  auto& stopped = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 2, opt());
    report(out, "attached");
    never.wait_go();
    return 0;
  });
  ASSERT_EQ(read_line(stopped), "attached");
  kill_child(stopped, SIGSTOP);
  auto t0 = std::chrono::steady_clock::now();
  auto b = Barrier::attach(ns, "b", 2, opt(700ms));
  ASSERT_TRUE(b);
  auto r = b->wait();
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kTimeout);
  EXPECT_NE(r.error().message.find("[stopped]"), std::string::npos) << r.error().message;
  EXPECT_GE(took, 700ms);
  EXPECT_LT(took, 2000ms);
}

TEST_F(BarrierTest, DisagreeingProcessCountsAreAClearErrorForEveryone) {
  auto& first = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 2, opt());
    report(out, "in");
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(first), "in");
  auto b = Barrier::attach(ns, "b", 3, opt());
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, Code::kMismatch);
  EXPECT_NE(b.error().message.find("says 3"), std::string::npos) << b.error().message;
  std::string r = read_line(first);
  EXPECT_EQ(r.rfind("mismatch:", 0), 0u) << r;
}

// The original: a late constructor reset the counters mid-round: hang.
TEST_F(BarrierTest, LateJoinerNeverResetsARoundInProgress) {
  std::vector<testing::ChildProc*> early;
  for (int i = 0; i < 2; ++i) {
    early.push_back(&fork_child([&](int out) {
      // Stops right after arriving in round 0: the parent's handshake.
      if (!failpoint::set_pause_spec("crash/barrier/wait/before-sleep:1").empty()) return 2;
      auto b = Barrier::attach(ns, "b", 3, opt());
      if (!b) return 3;
      auto r = b->wait();
      report(out, r ? "ok " + std::to_string(*r) : outcome(r));
      return 0;
    }));
  }
  // Both have entered round 0 (they stop only after their arrival is counted).
  for (auto* e : early) ASSERT_TRUE(wait_stopped(*e));
  for (auto* e : early) ::kill(e->pid, SIGCONT);
  auto late = Barrier::attach(ns, "b", 3, opt());
  ASSERT_TRUE(late) << late.error().to_string();
  auto r = late->wait();
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(*r, 0u) << "the late joiner completed round 0, not a reset one";
  for (auto* e : early) EXPECT_EQ(read_line(*e), "ok 0");
}

// A forked child inherits a participant's fds. Were liveness a flock or OFD
// lock (both inherited across fork), the child would keep the dead
// participant's lease - and the barrier - alive for as long as it lives.
// The lease is a process-owned record lock, which fork does not inherit.
TEST_F(BarrierTest, ForgottenChildWithInheritedFdsCannotKeepADeadParticipantAlive) {
  auto b = Barrier::attach(ns, "b", 2, opt(10000ms));
  ASSERT_TRUE(b) << b.error().to_string();
  auto& parent = fork_child([&](int out) {
    auto mine = Barrier::attach(ns, "b", 2, opt());
    if (!mine) {
      report(out, mine.error().to_string());
      return 1;
    }
    pid_t child = ::fork();
    if (child == 0) {  // forgotten child: lives on with every inherited fd, the lease's included
      ::sleep(30);
      ::_exit(0);
    }
    report(out, std::to_string(child));
    ::raise(SIGKILL);
    return 0;
  });
  const pid_t forgotten = std::stoi(read_line(parent));
  ASSERT_GT(forgotten, 0);
  EXPECT_EQ(wait_child(parent), 128 + SIGKILL);
  auto t0 = std::chrono::steady_clock::now();
  auto r = b->wait();
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(::kill(forgotten, 0), 0) << "the child holding the inherited fds was alive throughout";
  ::kill(forgotten, SIGKILL);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kBroken) << r.error().message;
  EXPECT_NE(r.error().message.find("died before entering round 0"), std::string::npos) << r.error().message;
  EXPECT_LT(took, 1500ms);
}

// The same with a seat still empty (issue 20 §1, found by a soak): A and B
// of 3 attached, B arrived and was SIGKILLed, and C - B's replacement, come
// before the third participant attached - took the empty seat. B's arrival
// and C's completed round 0 with A's, without the third participant. While a
// participant lies dead in its seat, no newcomer joins, empty seat or not.
TEST_F(BarrierTest, NoNewcomerTakesAnEmptySeatWhileADeadParticipantsArrivalCounts) {
  testing::ShmTest::Gate a_go;
  auto& a = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 3, opt(1500ms));
    report(out, b ? "attached" : b.error().to_string());
    a_go.wait_go();
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(a), "attached");
  arrive_then_die(3);  // B has entered round 0
  if (HasFatalFailure()) return;
  auto& c = newcomer(3, 1500ms);
  std::string got = read_line(c);
  EXPECT_EQ(got.rfind("refused broken: ", 0), 0u) << got;
  EXPECT_NE(got.find("died holding its seat"), std::string::npos) << got;
  a_go.open_all();
  if (got == "attached") (void)read_line(c);
  EXPECT_NE(read_line(a), "ok") << "A left round 0 although the third participant never entered it";
}

// Arrivals were counted, not participants: A attached, B arrived and was
// SIGKILLed, C attached in a fresh slot and waited - and left round 0 although
// the live A never entered it. A replacement for a dead participant is refused.
TEST_F(BarrierTest, ReplacementForADeadParticipantIsRefusedAndReleasesNoRound) {
  testing::ShmTest::Gate a_go;
  auto& a = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 2, opt(5000ms));
    report(out, b ? "attached" : b.error().to_string());
    a_go.wait_go();
    report(out, outcome(b->wait()));
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(a), "attached");
  arrive_then_die(2);  // B has entered round 0
  if (HasFatalFailure()) return;
  auto& c = newcomer(2, 2000ms);
  std::string got = read_line(c);
  EXPECT_EQ(got.rfind("refused broken: ", 0), 0u) << got;
  EXPECT_NE(got.find("died holding its seat"), std::string::npos) << got;
  if (got == "attached") {
    EXPECT_NE(read_line(c), "ok") << "C left round 0 although A never entered it";
  }
  a_go.open_all();
  EXPECT_EQ(read_line(a), "ok") << "A's round 0 completes: B entered it before dying";
  std::string next = read_line(a);
  EXPECT_EQ(next.rfind("broken:", 0), 0u) << next;
  EXPECT_NE(next.find("died before entering round 1"), std::string::npos) << next;
}

// A departed participant's seat goes to a newcomer only between rounds.
TEST_F(BarrierTest, DepartedSeatIsTakenOnlyBetweenRounds) {
  // Between rounds: the newcomer takes the seat and crosses a round with us.
  {
    auto a = Barrier::attach(ns, "between", 2, opt(3000ms));
    ASSERT_TRUE(a);
    auto& leaver = fork_child([&](int out) {
      auto b = Barrier::attach(ns, "between", 2, opt());
      bool ok = b && b->wait() && b->detach();
      report(out, ok ? "left" : "failed");
      return 0;
    });
    ASSERT_TRUE(a->wait());
    ASSERT_EQ(read_line(leaver), "left");
    auto& newcomer = fork_child([&](int out) {
      auto b = Barrier::attach(ns, "between", 2, opt());
      report(out, b ? "attached" : "refused " + b.error().to_string());
      if (b) report(out, outcome(b->wait()));
      return 0;
    });
    ASSERT_EQ(read_line(newcomer), "attached");
    ASSERT_TRUE(a->wait());
    EXPECT_EQ(read_line(newcomer), "ok");
  }
  // Mid-round: refused, naming the round; the departure breaks that round.
  auto& a = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "mid", 2, opt(3000ms));
    if (!b || !b->wait()) return 2;
    report(out, "crossed");
    // Stop once inside round 1, which the departed participant will never enter.
    if (!failpoint::set_pause_spec("crash/barrier/wait/before-sleep:1").empty()) return 3;
    report(out, outcome(b->wait()));
    return 0;
  });
  auto& leaver = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "mid", 2, opt());
    bool ok = b && b->wait() && b->detach();
    report(out, ok ? "left" : "failed");
    return 0;
  });
  ASSERT_EQ(read_line(a), "crossed");
  ASSERT_EQ(read_line(leaver), "left");
  ASSERT_TRUE(wait_stopped(a));  // A has entered round 1
  auto late = Barrier::attach(ns, "mid", 2, opt());
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, Code::kBroken);
  EXPECT_NE(late.error().message.find("round 1 is in progress"), std::string::npos) << late.error().message;
  ::kill(a.pid, SIGCONT);
  std::string r = read_line(a);
  EXPECT_NE(r.find("detached before entering round 1"), std::string::npos) << r;
}

#ifdef SHMCOORD_FAILPOINTS
// break_locked and detach woke waiters without changing the futex word, so a
// waiter between its check and FUTEX_WAIT slept a whole liveness interval.
TEST_F(BarrierTest, BreakWakesAWaiterThatWasAboutToSleep) {
  auto& waiter = fork_child([&](int out) {
    if (!failpoint::set_pause_spec("crash/barrier/wait/before-sleep:1").empty()) return 2;
    BarrierOptions o = opt(20000ms);
    o.liveness_interval = 5000ms;  // a missed wake would cost this much
    auto b = Barrier::attach(ns, "b", 2, o);
    auto r = b->wait();
    report(out, outcome(r));
    return 0;
  });
  ASSERT_TRUE(wait_stopped(waiter));  // checked "not broken", not yet asleep
  auto bad = Barrier::attach(ns, "b", 3, opt());  // disagrees: breaks the barrier
  ASSERT_FALSE(bad);
  ASSERT_EQ(bad.error().code, Code::kMismatch);
  auto t0 = std::chrono::steady_clock::now();
  ::kill(waiter.pid, SIGCONT);
  std::string r = read_line(waiter);
  EXPECT_EQ(r.rfind("mismatch:", 0), 0u) << r;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1000ms) << "the waiter slept through the break";
}

// The slow path locked with the whole wait deadline: behind a stopped lock
// holder, a waiter timed out on a round that had completed.
TEST_F(BarrierTest, WaiterBehindAStoppedLockHolderStillSeesItsRoundComplete) {
  auto& p1 = fork_child([&](int out) {
    // Its 2nd lock (1st: attach) is the liveness check of its wait: stop just before it.
    if (!failpoint::set_pause_spec("mutex/lock:2").empty()) return 2;
    auto b = Barrier::attach(ns, "b", 2, opt(1500ms));
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_TRUE(wait_stopped(p1));
  auto p2 = Barrier::attach(ns, "b", 2, opt(5000ms));
  ASSERT_TRUE(p2);
  // A third process takes the barrier lock and stops holding it.
  auto& holder = fork_child([&](int) {
    if (!failpoint::set_pause_spec("crash/barrier/attach/after-lock:1").empty()) return 2;
    (void)Barrier::attach(ns, "b", 2, opt());
    return 0;
  });
  ASSERT_TRUE(wait_stopped(holder));
  ::kill(p1.pid, SIGCONT);  // into a lock held by a stopped process
  ASSERT_TRUE(p2->wait());  // completes round 0
  EXPECT_EQ(read_line(p1), "ok");
}
#endif

// Participants in two pid namespaces that share /dev/shm: each used to judge
// the other dead (its pid is not in our /proc) and break the barrier.
TEST_F(BarrierTest, ParticipantsInTwoPidNamespacesCrossRoundsTogether) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for pid namespaces";
  std::vector<testing::ChildProc*> kids;
  for (int i = 0; i < 2; ++i) {
    testing::next_clock_tick();  // distinct start times: pid 2 and pid 2 are told apart
    kids.push_back(&fork_in_pid_namespace([&](int out) {
      BarrierOptions o = opt(5000ms);
      o.liveness_interval = 20ms;  // many liveness checks per round
      auto b = Barrier::attach(ns, "b", 2, o);
      if (!b) {
        report(out, b.error().to_string());
        return 1;
      }
      for (int r = 0; r < 5; ++r) {
        ::usleep(50000);  // let the other's checks run while we are away
        auto g = b->wait();
        if (!g) {
          report(out, g.error().to_string());
          return 1;
        }
      }
      report(out, "done, seat " + std::to_string(b->slot()));
      return 0;
    }));
  }
  std::set<std::string> got;
  for (auto* k : kids) {
    std::string line = read_line(*k);
    if (line.rfind("unshare", 0) == 0) GTEST_SKIP() << line;
    got.insert(line);
  }
  // Two seats: neither took the other for dead and reset the barrier under it.
  EXPECT_EQ(got, (std::set<std::string>{"done, seat 0", "done, seat 1"}));
}

TEST_F(BarrierTest, BarrierOfDeadParticipantsIsResetByTheNextAttach) {
  auto& dead = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 5, opt());
    report(out, "in");
    ::raise(SIGKILL);
    return 0;
  });
  ASSERT_EQ(read_line(dead), "in");
  wait_child(dead);
  auto b = Barrier::attach(ns, "b", 1, opt());
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_TRUE(b->wait());
}

// kill-after-acquire, trial 62 at --parallel 16: rank 0 attached and was
// killed before rank 1 attached. rank 1 found only dead participants, reset the
// barrier as stale and waited for a seat nobody would take until its deadline
// ("1 never attached"). With the job's claim the dead one is a peer.
TEST_F(BarrierTest, PeerKilledRightAfterAttachingBreaksTheOthersOfItsClaimWithinOneSecond) {
  attach_then_die(7);
  auto o = opt(30000ms);
  o.claim = 7;
  auto b = Barrier::attach(ns, "b", 2, o);
  ASSERT_TRUE(b) << b.error().to_string();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = b->wait();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(outcome(r).rfind("broken:", 0), 0u) << outcome(r);
  EXPECT_NE(outcome(r).find("participant 0"), std::string::npos) << "names the dead peer: " << outcome(r);
  EXPECT_NE(outcome(r).find("died before entering round 0"), std::string::npos) << outcome(r);
  EXPECT_LT(took, 1s) << "broken within the liveness interval, not at the 30 s deadline";
}

TEST_F(BarrierTest, BarrierOfDeadParticipantsOfAnotherClaimIsResetByTheNextAttach) {
  attach_then_die(7);
  auto o = opt();
  o.claim = 8;  // the prefix granted anew
  auto b = Barrier::attach(ns, "b", 1, o);
  ASSERT_TRUE(b) << b.error().to_string();
  EXPECT_TRUE(b->wait());
}

TEST_F(BarrierTest, LiveParticipantsOfAnotherClaimAreAMismatchAndKeepTheirBarrier) {
  auto o = opt();
  o.claim = 7;
  auto a = Barrier::attach(ns, "b", 2, o);
  ASSERT_TRUE(a) << a.error().to_string();
  auto& other = fork_child([&](int out) {
    auto o2 = opt();
    o2.claim = 9;
    auto b = Barrier::attach(ns, "b", 2, o2);
    report(out, b ? "ok" : std::string(code_name(b.error().code)) + ":" + b.error().message);
    return 0;
  });
  std::string r = read_line(other);
  EXPECT_EQ(r.rfind("mismatch:", 0), 0u) << r;
  EXPECT_NE(r.find("another holding"), std::string::npos) << r;
  wait_child(other);
  // Unchanged for its own: a peer of claim 7 still completes a round with us.
  auto& peer = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 2, o);
    report(out, b && b->wait() ? "ok" : "failed");
    return 0;
  });
  EXPECT_TRUE(a->wait());
  EXPECT_EQ(read_line(peer), "ok");
}

TEST_F(BarrierTest, TooManyParticipantsIsAMismatch) {
  auto a = Barrier::attach(ns, "b", 1, opt());
  ASSERT_TRUE(a);
  auto& other = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 1, opt());
    report(out, b ? "ok" : std::string(code_name(b.error().code)));
    return 0;
  });
  EXPECT_EQ(read_line(other), "mismatch");
}

// ---------------------------------------------------------------- issue 19
// The flaws a review found under the real process model: loader workers forked
// from ranks, containers with colliding pids, exhaustion, retries, odd options.

// 5. The kernel's robust-futex exit handling marks a robust mutex owner-died
// when a thread dies *blocked* on it if the owner tid in the futex word equals
// the dying thread's tid in its own namespace: a pid twin in another container
// dying in the queue made the next locker break a barrier nobody had died in.
TEST_F(BarrierTest, PidTwinDyingBlockedOnTheBarrierLockDoesNotBreakIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for pid namespaces";
  auto& p = fork_child([&](int out) {
    BarrierOptions o = opt(600ms);
    o.liveness_interval = 20ms;
    auto b = Barrier::attach(ns, "b", 3, o);
    if (!b) return 2;
    ::raise(SIGSTOP);  // (not a gate: the stopped holder below would keep a gate open)
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_TRUE(wait_stopped(p));
  // a: a participant, pid 2 of its namespace, stops holding the barrier lock
  // in the liveness check of its wait.
  auto& a = fork_in_pid_namespace([&](int out) {
    report(out, std::to_string(::getpid()));
    if (!failpoint::set_pause_spec("crash/barrier/wait/check-locked:1").empty()) return 2;
    BarrierOptions o = opt(30000ms);
    o.liveness_interval = 20ms;
    auto b = Barrier::attach(ns, "b", 3, o);
    if (b) (void)b->wait();
    return 0;
  });
  std::string got = read_line(a);
  if (got.rfind("unshare", 0) == 0) GTEST_SKIP() << got;
  ASSERT_EQ(got, "2");
  ASSERT_EQ(read_line(a), "stopped");
  testing::next_clock_tick();
  auto& twin = fork_in_pid_namespace([&](int out) {
    report(out, std::to_string(::getpid()));
    (void)Barrier::attach(ns, "b", 3, opt(30000ms));  // blocks on the lock a holds
    return 0;
  });
  ASSERT_EQ(read_line(twin), "2") << "the same tid as the lock holder";
  const pid_t twin_outer = testing::first_child_of(twin.ns_init);
  ASSERT_GT(twin_outer, 0);
  ASSERT_TRUE(testing::wait_in_futex(twin_outer)) << "the twin never blocked on the lock";
  ::kill(twin.ns_init, SIGKILL);  // the twin dies blocked on the lock
  twin.ns_init = -1;
  wait_child(twin);
  ::kill(p.pid, SIGCONT);
  std::string r = read_line(p);
  EXPECT_EQ(r.rfind("timeout:", 0), 0u) << "the lock's holder is alive (stopped): " << r;
  EXPECT_EQ(r.find("died holding the barrier lock"), std::string::npos) << r;
}

// 6. A barrier named like one of the namespace's own objects rebuilt the live
// registry as a barrier ("registry" is no barrier of ours to create).
TEST_F(BarrierTest, SuffixNamingTheNamespacesOwnObjectsOrCarryingADotIsRefused) {
  auto reg = Registry::open(ns);
  ASSERT_TRUE(reg);
  JobSpec spec;
  spec.job_key = "live";
  spec.local_rank = 0;
  spec.local_world_size = 1;
  auto l = reg->acquire(spec);
  ASSERT_TRUE(l) << l.error().to_string();
  for (const char* suffix : {"registry", "leases", "init.lock", "b.c", ""}) {
    auto b = Barrier::attach(ns, suffix, 1, opt(500ms));
    ASSERT_FALSE(b) << "attached a barrier named '" << suffix << "'";
    EXPECT_EQ(b.error().code, Code::kInvalidArgument) << suffix << ": " << b.error().message;
  }
  auto snap = reg->snapshot();
  ASSERT_TRUE(snap) << snap.error().to_string();
  ASSERT_EQ(snap->size(), 1u) << "the live registry lost its slot";
  EXPECT_EQ((*snap)[0].job_key, "live");
  ASSERT_TRUE(reg->release(*l));
}

#ifdef SHMCOORD_FAILPOINTS
// 7. A wait whose lock failed (here EIO) returned with its arrival still
// counted: retried, it counted twice and completed round 0 alone.
TEST_F(BarrierTest, WaitRetriedAfterItsLockFailedNeverCompletesARoundAlone) {
  auto peer = Barrier::attach(ns, "b", 2, opt(5000ms));  // attached, never enters
  ASSERT_TRUE(peer);
  auto& r = fork_child([&](int out) {
    fiu_init(0);
    static int calls = 0;  // the attach's lock works, every later one fails
    fiu_enable_external("mutex/lock", 1, reinterpret_cast<void*>(EIO), 0,
                        [](const char*, int*, void**, unsigned*) { return ++calls > 1 ? 1 : 0; });
    BarrierOptions o = opt(400ms);
    o.liveness_interval = 20ms;
    auto b = Barrier::attach(ns, "b", 2, o);
    if (!b) return 2;
    report(out, "first " + outcome(b->wait()));
    fiu_disable("mutex/lock");
    report(out, "retry " + outcome(b->wait()));
    return 0;
  });
  std::string first = read_line(r);
  EXPECT_EQ(first.rfind("first io:", 0), 0u) << first;
  std::string retry = read_line(r);
  EXPECT_EQ(retry.rfind("retry timeout:", 0), 0u) << "round 0 completed although participant 0 never entered it: "
                                                  << retry;
}

// 7. The same abandoned arrival, not retried: the peer left round 0 on it,
// although the wait that made it had failed ("did not happen").
TEST_F(BarrierTest, PeerNeverCompletesARoundOnTheArrivalOfAFailedWait) {
  testing::ShmTest::Gate hold;
  auto& r = fork_child([&](int out) {
    fiu_init(0);
    static int calls = 0;
    fiu_enable_external("mutex/lock", 1, reinterpret_cast<void*>(EIO), 0,
                        [](const char*, int*, void**, unsigned*) { return ++calls > 1 ? 1 : 0; });
    BarrierOptions o = opt(5000ms);
    o.liveness_interval = 20ms;
    auto b = Barrier::attach(ns, "b", 2, o);
    if (!b) return 2;
    report(out, outcome(b->wait()));
    hold.wait_go();  // alive, handling its error
    return 0;
  });
  auto peer = Barrier::attach(ns, "b", 2, opt(300ms));
  ASSERT_TRUE(peer);
  std::string failed = read_line(r);
  ASSERT_EQ(failed.rfind("io:", 0), 0u) << failed;
  auto got = peer->wait();
  EXPECT_FALSE(got) << "left round 0 on the arrival of a wait that failed";
  if (!got) {
    EXPECT_EQ(got.error().code, Code::kTimeout) << got.error().message;
  }
  hold.open_all();
}
#endif

// 8. Loader workers fork from a rank that holds a seat: a worker's copy of the
// Barrier, destroyed when it exits, detached the rank's seat (here: as the
// last participant, it retired and unlinked the rank's barrier).
TEST_F(BarrierTest, ForkedChildsCopyOfABarrierNeverActsForTheParent) {
  auto& rank = fork_child([&](int out) {
    std::optional<Barrier> b;
    if (auto a = Barrier::attach(ns, "b", 2, opt(2000ms))) {
      b.emplace(std::move(*a));
    } else {
      report(out, a.error().to_string());
      return 1;
    }
    pid_t worker = ::fork();
    if (worker == 0) {
      auto w = b->wait();
      auto d = b->detach();
      std::string got = std::string(w ? "wait ok" : std::string(code_name(w.error().code)) + ": " + w.error().message) +
                        " | " + (d ? "detach ok" : std::string(code_name(d.error().code)) + ": " + d.error().message);
      report(out, got);
      b.reset();  // the copy's destructor, as a worker's exit runs it
      ::_exit(0);
    }
    int st = 0;
    ::waitpid(worker, &st, 0);
    report(out, "rank " + std::to_string(::getpid()));
    report(out, outcome(b->wait()));
    return 0;
  });
  const std::string worker = read_line(rank);
  const std::string rank_pid = read_line(rank);
  ASSERT_EQ(rank_pid.rfind("rank ", 0), 0u) << rank_pid;
  EXPECT_EQ(worker.rfind("invalid-argument: ", 0), 0u) << worker;
  EXPECT_NE(worker.find("pid " + rank_pid.substr(5)), std::string::npos) << "names the attaching pid: " << worker;
  EXPECT_NE(worker.find("| invalid-argument: "), std::string::npos) << worker;
  auto peer = Barrier::attach(ns, "b", 2, opt(2000ms));
  ASSERT_TRUE(peer) << peer.error().to_string();
  auto r = peer->wait();
  EXPECT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(read_line(rank), "ok");
}

// 9. Any EOWNERDEAD on the barrier's lock broke it: here a third attacher of
// a full barrier (it would have been refused) killed inside the lock broke a
// barrier whose participants were all alive.
TEST_F(BarrierTest, RefusedAttacherKilledInsideTheLockLeavesALiveBarrierWhole) {
  testing::ShmTest::Gate go;
  auto& p1 = fork_child([&](int out) {
    BarrierOptions o = opt(5000ms);
    o.liveness_interval = 20ms;
    auto b = Barrier::attach(ns, "b", 2, o);
    if (!b) return 2;
    report(out, "in");
    go.wait_go();  // the intruder is dead
    // Its first liveness check holds the lock the intruder died in: stop there.
    if (!failpoint::set_pause_spec("crash/barrier/wait/check-locked:1").empty()) return 3;
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(p1), "in");
  auto p2 = Barrier::attach(ns, "b", 2, opt(5000ms));
  ASSERT_TRUE(p2);
  auto& intruder = fork_child([&](int) {
    fiu_init(0);
    fiu_enable("crash/barrier/attach/after-lock", 1, nullptr, 0);
    (void)Barrier::attach(ns, "b", 2, opt());
    return 0;
  });
  EXPECT_EQ(wait_child(intruder), 128 + SIGKILL);
  go.open_all();
  ASSERT_TRUE(wait_stopped(p1)) << "participant 0 never checked";
  ::kill(p1.pid, SIGCONT);
  auto r = p2->wait();
  EXPECT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(read_line(p1), "ok");
}

// 9. The same for a cleanup killed while it judges a live barrier under its
// lock: its death is no participant's.
TEST_F(BarrierTest, CleanupKilledInsideALiveBarriersLockLeavesItWhole) {
  BarrierOptions o = opt(5000ms);
  o.liveness_interval = 20ms;
  auto p1 = Barrier::attach(ns, "b", 2, o);
  ASSERT_TRUE(p1);
  auto& cleaner = fork_child([&](int) {
    fiu_init(0);
    fiu_enable("crash/cleanup/barrier-locked", 1, nullptr, 0);
    (void)clean_stale(ns);
    return 0;
  });
  EXPECT_EQ(wait_child(cleaner), 128 + SIGKILL);
  auto& p2 = fork_child([&](int out) {
    // Its first liveness check takes the lock the cleanup died in.
    if (!failpoint::set_pause_spec("crash/barrier/wait/check-locked:1").empty()) return 2;
    auto b = Barrier::attach(ns, "b", 2, o);
    report(out, b ? outcome(b->wait()) : "attach " + b.error().to_string());
    return 0;
  });
  ASSERT_TRUE(wait_stopped(p2)) << read_line(p2);
  ::kill(p2.pid, SIGCONT);
  auto r = p1->wait();
  EXPECT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(read_line(p2), "ok");
}

// 10. The first attacher of a new barrier killed before its seat was written:
// the barrier was broken with no seat used, never stale, unusable until a cleanup.
TEST_F(BarrierTest, FirstAttacherKilledBeforeItsSeatIsWrittenLeavesTheNameUsable) {
  auto& victim = fork_child([&](int) {
    fiu_init(0);
    fiu_enable("crash/barrier/attach/locked", 1, nullptr, 0);
    (void)Barrier::attach(ns, "b", 2, opt());
    return 0;
  });
  EXPECT_EQ(wait_child(victim), 128 + SIGKILL);
  auto& peer = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 2, opt(2000ms));
    report(out, b ? outcome(b->wait()) : "attach " + b.error().to_string());
    return 0;
  });
  auto b = Barrier::attach(ns, "b", 2, opt(2000ms));
  ASSERT_TRUE(b) << b.error().to_string();
  auto r = b->wait();
  EXPECT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(read_line(peer), "ok");
}

TEST_F(BarrierTest, AttacherKilledHalfWayThroughResettingAStaleBarrierLeavesTheNameUsable) {
  // A stale barrier: its only participant entered round 0 and died there.
  auto& dead = fork_child([&](int) {
    if (!failpoint::set_pause_spec("crash/barrier/wait/before-sleep:1").empty()) return 2;
    auto b = Barrier::attach(ns, "b", 2, opt());
    if (b) (void)b->wait();
    return 0;
  });
  ASSERT_TRUE(wait_stopped(dead)) << "the first group's participant never entered round 0";
  kill_child(dead);
  auto& victim = fork_child([&](int) {
    fiu_init(0);
    fiu_enable("crash/barrier/attach/half-reset", 1, nullptr, 0);
    (void)Barrier::attach(ns, "b", 2, opt());
    return 0;
  });
  EXPECT_EQ(wait_child(victim), 128 + SIGKILL);
  // The next group finds no seat used: the barrier starts afresh, so round 0
  // needs both of it (the dead group's arrival does not count) and completes.
  auto& peer = fork_child([&](int out) {
    auto mine = Barrier::attach(ns, "b", 2, opt(3000ms));
    if (!mine) {
      report(out, "attach " + mine.error().to_string());
      return 0;
    }
    report(out, "attached");
    ::raise(SIGSTOP);  // attached, not yet entered
    report(out, outcome(mine->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(peer), "attached");
  ASSERT_TRUE(wait_stopped(peer));
  auto b = Barrier::attach(ns, "b", 2, opt(3000ms));
  ASSERT_TRUE(b) << b.error().to_string();
  ::kill(peer.pid, SIGCONT);
  auto r = b->wait();
  EXPECT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(read_line(peer), "ok")
      << "one of the two completed round 0 alone on the dead group's arrival";
}

// 13. milliseconds::max() overflowed now() + d: every wait failed at once
// with "timed out after 9223372036854775807 ms". It means "no deadline".
TEST_F(BarrierTest, MaxTimeoutMeansNoDeadline) {
  auto& p = fork_child([&](int out) {
    if (!failpoint::set_pause_spec("crash/barrier/wait/before-sleep:1").empty()) return 2;
    BarrierOptions o;
    o.timeout = std::chrono::milliseconds::max();
    auto b = Barrier::attach(ns, "b", 2, o);
    report(out, b ? outcome(b->wait()) : "attach " + b.error().to_string());
    return 0;
  });
  ASSERT_TRUE(wait_stopped(p)) << read_line(p);
  auto peer = Barrier::attach(ns, "b", 2, opt(5000ms));
  ASSERT_TRUE(peer) << peer.error().to_string();
  ::kill(p.pid, SIGCONT);
  const std::string early = read_line(p, 300ms);
  EXPECT_EQ(early, "<timeout>") << "a wait without a deadline returned before its peer came";
  auto r = peer->wait();
  EXPECT_TRUE(r) << r.error().to_string();
  if (early == "<timeout>") {
    EXPECT_EQ(read_line(p), "ok");
  }
}

TEST_F(BarrierTest, BadOptionsAreRefused) {
  for (auto [timeout, interval] : {std::pair{-1, 100}, std::pair{1000, 0}, std::pair{1000, -5}}) {
    BarrierOptions o;
    o.timeout = std::chrono::milliseconds(timeout);
    o.liveness_interval = std::chrono::milliseconds(interval);
    auto b = Barrier::attach(ns, "b", 1, o);
    ASSERT_FALSE(b) << "timeout " << timeout << " interval " << interval;
    EXPECT_EQ(b.error().code, Code::kInvalidArgument) << b.error().message;
  }
}

// 15. Rebuilding a zero-length barrier held five fds at once (the lease, the
// fast path's, the init lock, the old and the new segment).
TEST_F(BarrierTest, RebuildingAZeroLengthBarrierNeedsAtMostThreeFds) {
  int fd = ::shm_open(ns.shm_name("b").c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto& c = fork_child([&](int out) {
    out = testing::leave_free_fds(out, 3);
    if (out < 0) return 2;
    auto b = Barrier::attach(ns, "b", 1, opt(2000ms));
    report(out, b ? outcome(b->wait()) : b.error().to_string());
    return 0;
  });
  EXPECT_EQ(read_line(c), "ok");
}

// Exhaustion in a follower's attach (RLIMIT_AS: the mapping fails) is the
// follower's error alone: the barrier and its participants are untouched.
TEST_F(BarrierTest, FollowerAttachWithoutAddressSpaceFailsAloneAndLeavesTheBarrierWhole) {
  if (testing::kAsan) GTEST_SKIP() << "RLIMIT_AS and AddressSanitizer's shadow memory do not mix";
  auto first = Barrier::attach(ns, "b", 2, opt(3000ms));
  ASSERT_TRUE(first);
  auto& f = fork_child([&](int out) {
    if (!testing::limit_address_space(0)) return 2;
    auto b = Barrier::attach(ns, "b", 2, opt(1000ms));
    report(out, b ? "attached" : b.error().to_string());
    return 0;
  });
  const std::string got = read_line(f);
  EXPECT_EQ(got.rfind("exhausted: ", 0), 0u) << got;
  EXPECT_EQ(wait_child(f), 0);
  auto& peer = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 2, opt(3000ms));
    report(out, b ? outcome(b->wait()) : b.error().to_string());
    return 0;
  });
  auto r = first->wait();
  EXPECT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(read_line(peer), "ok");
}

// The generation wrapped at 2^32 to 0, and "arrived in round gen" was
// arrived_gen == gen + 1 == 0: a newcomer that never entered counted as
// arrived, so its death was not seen as a death before entering.
TEST_F(BarrierTest, NewcomerWhoDiesAtTheGenerationWrapIsSeenNotToHaveEntered) {
  BarrierOptions o = opt(5000ms);
  o.liveness_interval = 20ms;
  auto b = Barrier::attach(ns, "b", 2, o);
  ASSERT_TRUE(b);
  {
    int fd = ::shm_open(ns.shm_name("b").c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    void* p = ::mmap(nullptr, sizeof(records::BarrierLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    ASSERT_NE(p, MAP_FAILED);
    static_cast<records::BarrierLayout*>(p)->round = std::uint64_t{0xFFFFFFFFu} << 32;  // round 2^32 - 1, nobody in it yet
    ::munmap(p, sizeof(records::BarrierLayout));
  }
  auto& newcomer = fork_child([&](int out) {
    auto mine = Barrier::attach(ns, "b", 2, opt());
    report(out, mine ? "in" : mine.error().to_string());
    ::raise(SIGKILL);
    return 0;
  });
  ASSERT_EQ(read_line(newcomer), "in");
  wait_child(newcomer);
  auto r = b->wait();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kBroken) << r.error().message;
  EXPECT_NE(r.error().message.find("died before entering round 4294967295"), std::string::npos) << r.error().message;
}

// A non-last detach took the init lock (2 s at most) to tidy the namespace:
// behind a stopped cleanup that holds it, every detach took 2 s.
TEST_F(BarrierTest, NonLastDetachDoesNotWaitBehindAStoppedCleanup) {
  auto stays = Barrier::attach(ns, "b", 2, opt());
  ASSERT_TRUE(stays);
  auto leaves = Barrier::attach(ns, "b", 2, opt());
  ASSERT_TRUE(leaves);
  auto& cleaner = fork_child([&](int out) {
    if (!failpoint::set_pause_spec("crash/cleanup/init-locked:1").empty()) return 2;
    auto r = clean_stale(ns);
    report(out, r ? "ok" : r.error().to_string());
    return 0;
  });
  ASSERT_TRUE(wait_stopped(cleaner));
  const auto t0 = std::chrono::steady_clock::now();
  auto d = leaves->detach();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(d) << d.error().to_string();
  EXPECT_LT(took, 500ms) << "a detach that leaves others behind waited for the init lock";
  ::kill(cleaner.pid, SIGCONT);
  EXPECT_EQ(read_line(cleaner), "ok");
}

}  // namespace
}  // namespace shmcoord
