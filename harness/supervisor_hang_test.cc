// What the supervisor's early end of a hung trial works from: OpenOps, the
// ops each process still has open as the history grows, and Worker::stops,
// the stops it leaves out of an op's time.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "supervisor_internal.h"

namespace harness::supervision {
namespace {

namespace fs = std::filesystem;

class OpenOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("shmstress-openops-" + std::to_string(::getpid()) + ".jsonl")).string();
    std::ofstream(path_, std::ios::trunc).flush();
  }
  void TearDown() override { fs::remove(path_); }
  void append(const std::string& text) { std::ofstream(path_, std::ios::app) << text; }
  std::string path_;
};

TEST_F(OpenOpsTest, AnOpStaysOpenUntilItsCompletionWhateverLinesComeBetween) {
  OpenOps ops;
  append(R"({"t":10,"type":"invoke","op":"acquire","id":1,"pid":7,"job":0,"rank":0,"cpu_wait_ns":5})" "\n"
         R"({"t":11,"type":"fault","kind":"sigkill","phase":"instant","job":0,"rank":1,"pid":8})" "\n"
         R"({"t":12,"type":"invoke","op":"barrier","id":1,"pid":9,"job":0,"rank":1,"args":{"round":0}})" "\n");
  ops.update(path_);
  ASSERT_EQ(ops.open().at(7).size(), 1u);
  EXPECT_EQ(ops.open().at(7).at(1).op, "acquire");
  EXPECT_EQ(ops.open().at(7).at(1).invoke_t, 10);
  EXPECT_EQ(ops.open().at(7).at(1).cpu_wait_ns, 5);
  EXPECT_EQ(ops.open().at(9).at(1).cpu_wait_ns, -1);  // not reported: never judged overdue
  // A result split over continuation lines completes its op at the first.
  append(R"({"t":20,"type":"ok","op":"acquire","id":1,"pid":7,"continues":true,"value":{"present":["/a"]}})" "\n"
         R"({"t":20,"type":"ok","op":"acquire","id":1,"pid":7,"value":{"present":["/b"]}})" "\n");
  ops.update(path_);
  EXPECT_TRUE(ops.open().at(7).empty());
  EXPECT_EQ(ops.open().at(9).size(), 1u);
}

TEST_F(OpenOpsTest, AHalfWrittenLineWaitsForItsEndAndGarbageIsSkipped) {
  OpenOps ops;
  append("{\"t\":1,\"type\":\"invoke\",\"op\":\"barrier\",\"id\":3,\"pi");
  ops.update(path_);
  EXPECT_TRUE(ops.open().empty());
  append("d\":4,\"cpu_wait_ns\":0}\nnot json \"invoke\"\n{\"type\":\"invoke\",\"id\":\"x\",\"pid\":4}\n");
  ops.update(path_);
  ASSERT_EQ(ops.open().at(4).size(), 1u);
  EXPECT_EQ(ops.open().at(4).at(3).op, "barrier");
  append(R"({"t":2,"type":"fail","op":"barrier","id":3,"pid":4,"error":{"code":"broken"}})" "\n");
  ops.update(path_);
  EXPECT_TRUE(ops.open().at(4).empty());
}

// The hang watcher leaves a worker's own stops out of its op's time, as
// checks::stopped_ns does: only the part of each stop inside [a, b) counts.
TEST(WorkerStops, OnlyThePartOfEachStopInsideTheOpCountsAndAnOpenOneRunsToTheLook) {
  Worker w;
  w.stop_began(100);
  w.stop_began(120);  // already stopped: the window keeps its start
  EXPECT_TRUE(w.stopped_now());
  w.stop_ended(150);
  w.stop_ended(160);  // not stopped: nothing to end
  EXPECT_FALSE(w.stopped_now());
  w.stop_began(300);
  EXPECT_EQ(w.stopped_within(0, 1000), 50 + 700);
  EXPECT_EQ(w.stopped_within(120, 310), 30 + 10);
  EXPECT_EQ(w.stopped_within(150, 300), 0);
  w.stop_ended(400);
  EXPECT_EQ(w.stopped_within(0, 1000), 50 + 100);
}

}  // namespace
}  // namespace harness::supervision
