#include "shmcoord/barrier.h"

#include <fiu-control.h>
#include <fiu.h>
#include <gtest/gtest.h>

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
  static std::string outcome(const Result<std::uint32_t>& r) {
    return r ? "ok" : std::string(code_name(r.error().code)) + ":" + r.error().message;
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
      auto b = Barrier::attach(ns, "b", 3, opt(30000ms));
      report(out, "in");
      auto r = b->wait();
      report(out, outcome(r));
      report(out, std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
      return 0;
    }));
  }
  for (auto* s : survivors) ASSERT_EQ(read_line(*s), "in");
  ::usleep(100000);
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
  auto& survivor = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 2, opt(20000ms));
    report(out, "in");
    ::usleep(300000);  // the victim enters first, so it is asleep in the round when it dies
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
  EXPECT_EQ(read_line(survivor), "ok");
  std::string second = read_line(survivor, 5000ms);
  EXPECT_EQ(second.rfind("broken:", 0), 0u) << second;
  EXPECT_NE(second.find("died before entering round 1"), std::string::npos) << second;
  EXPECT_EQ(wait_child(victim), 128 + SIGKILL);
}

TEST_F(BarrierTest, ParticipantKilledHoldingTheLockBreaksTheBarrier) {
  auto& survivor = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 2, opt(20000ms));
    report(out, "in");
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(survivor), "in");
  auto& victim = fork_child([&](int) {
    fiu_init(0);
    fiu_enable("crash/barrier/attach/locked", 1, nullptr, 0);
    (void)Barrier::attach(ns, "b", 2, opt());
    return 0;
  });
  EXPECT_EQ(wait_child(victim), 128 + SIGKILL);
  std::string r = read_line(survivor, 5000ms);
  EXPECT_EQ(r.rfind("broken:", 0), 0u) << r;
  EXPECT_NE(r.find("died holding the barrier lock"), std::string::npos) << r;
}

// The last to arrive died after every arrival was marked, before releasing the round.
TEST_F(BarrierTest, ReleaserKilledBeforeReleasingTheRoundBreaksTheBarrier) {
  auto& survivor = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 2, opt(20000ms));
    report(out, "in");
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(survivor), "in");
  auto& victim = fork_child([&](int) {
    auto b = Barrier::attach(ns, "b", 2, opt());
    ::usleep(100000);  // the survivor is asleep in the round
    fiu_init(0);
    fiu_enable("crash/barrier/wait/before-release", 1, nullptr, 0);
    (void)b->wait();
    return 0;
  });
  EXPECT_EQ(wait_child(victim), 128 + SIGKILL);
  std::string r = read_line(survivor, 5000ms);
  EXPECT_EQ(r.rfind("broken:", 0), 0u) << r;
  EXPECT_NE(r.find("died releasing round 0"), std::string::npos) << r;
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
  auto& early = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 3, opt());
    report(out, "in");
    report(out, outcome(b->wait()));
    return 0;
  });
  auto& early2 = fork_child([&](int out) {
    auto b = Barrier::attach(ns, "b", 3, opt());
    report(out, "in");
    report(out, outcome(b->wait()));
    return 0;
  });
  ASSERT_EQ(read_line(early), "in");
  ASSERT_EQ(read_line(early2), "in");
  ::usleep(100000);
  auto late = Barrier::attach(ns, "b", 3, opt());
  ASSERT_TRUE(late);
  EXPECT_TRUE(late->wait());
  EXPECT_EQ(read_line(early), "ok");
  EXPECT_EQ(read_line(early2), "ok");
}

// A forked child that inherited a participant's fds must not keep the barrier stuck.
TEST_F(BarrierTest, ForgottenChildWithInheritedFdsCannotBlockTheBarrier) {
  auto b = Barrier::attach(ns, "b", 2, opt(10000ms));
  ASSERT_TRUE(b) << b.error().to_string();
  auto& parent = fork_child([&](int out) {
    auto mine = Barrier::attach(ns, "b", 2, opt());
    if (::fork() == 0) {  // forgotten child: sleeps holding every inherited fd
      ::sleep(3);
      ::_exit(0);
    }
    report(out, mine ? "in" : mine.error().to_string());
    ::raise(SIGKILL);
    return 0;
  });
  ASSERT_EQ(read_line(parent), "in");
  auto t0 = std::chrono::steady_clock::now();
  auto r = b->wait();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Code::kBroken) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
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

}  // namespace
}  // namespace shmcoord
