#include "lease.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>

#include "shmcoord/failpoint.h"
#include "test_util.h"

namespace shmcoord {
namespace {

using testing::ShmTest;
using namespace std::chrono_literals;

class LeaseTest : public ShmTest {
 protected:
  void SetUp() override {
    ShmTest::SetUp();
    failpoint::set_lease_first_fit(true);
  }
  void TearDown() override {
    failpoint::set_lease_first_fit(false);
    ShmTest::TearDown();
  }
};

// Cells are disjoint: the two first holders of a namespace packed lowest-first
// sit in cells 0 and 1, and the second's token written into its cell leaves
// the first alive to every other process's probe. (With cells narrower than
// a token, the second write lands on the first's token and a live holder is
// judged dead: its prefixes reclaimed, its locks taken over.) The second is
// dead to a probe once it is killed, its neighbour alive or not.
TEST_F(LeaseTest, AdjacentHoldersAreEachAliveToTheOtherAndADeadOneIsDead) {
  if (!failpoint::compiled_in()) GTEST_SKIP() << "lowest-first needs failpoints compiled in";
  auto mine = LeaseRef::take(ns, Deadline::after(5000ms));
  ASSERT_TRUE(mine) << mine.error().to_string();
  ASSERT_EQ(mine->owner().lease_cell, 0u) << "lowest-first: the first holder takes cell 0";
  const records::Owner parent = mine->owner();
  ShmTest::Gate done;
  auto& child = fork_child([&](int out) {
    auto theirs = LeaseRef::take(ns, Deadline::after(5000ms));
    if (!theirs) {
      report(out, theirs.error().to_string());
      return 1;
    }
    bool parent_alive = false;
    {
      LeaseProbe probe(ns);
      parent_alive = probe.alive(parent);
    }
    char line[128];
    std::snprintf(line, sizeof line, "%" PRIu32 " %" PRIu64 " %s", theirs->owner().lease_cell,
                  theirs->owner().lease_token, parent_alive ? "alive" : "dead");
    report(out, line);
    done.wait_go();
    return 0;
  });
  const std::string said = read_line(child);
  records::Owner neighbour{};
  char verdict[16] = {};
  ASSERT_EQ(std::sscanf(said.c_str(), "%" SCNu32 " %" SCNu64 " %15s", &neighbour.lease_cell,
                        &neighbour.lease_token, verdict),
            3)
      << said;
  EXPECT_EQ(neighbour.lease_cell, 1u) << "lowest-first: the second holder takes the next cell";
  EXPECT_STREQ(verdict, "alive")
      << "the neighbour's token write must not touch the first holder's cell";
  {
    LeaseProbe probe(ns);
    EXPECT_TRUE(probe.alive(neighbour));
  }
  kill_child(child);
  LeaseProbe probe(ns);
  EXPECT_FALSE(probe.alive(neighbour)) << "a killed holder's cell is unlocked: dead";
}

}  // namespace
}  // namespace shmcoord
