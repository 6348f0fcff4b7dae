// The run loop's order of work (run.cc; docs/architecture.md): a trial that
// ended is checked before the next trial starts. Each case runs real trials
// of the stock worker.
#include "run.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_events.h"
#include "scenario.h"

namespace harness {
namespace {

namespace fs = std::filesystem;

constexpr char kScenario[] = R"(description = "one no-op rank"
trials = 3
timeout = "20s"

[[job]]
ranks = 1
[job.workload]
acquire = false
release = false
)";

// Records what the run loop told it, in order. When trial 1 starts, it
// waits (without reaping it: its pidfd turns readable at its exit) until
// trial 0's supervisor has exited: from then on the loop has a trial to
// check, and what it does first - check it, or start the next - is what the
// order shows. A supervisor still there after a minute (its trial's timeout
// is 20 s) is recorded, and the test fails rather than hangs.
class OrderRecorder : public RunSubscriber {
 public:
  void trial_started(const TrialStart& t) override {
    events.push_back("start " + std::to_string(t.trial));
    if (t.trial == 0) first_ = t.supervisor;
    // Trial 0 already checked (it ended before this start): nothing to hold.
    if (t.trial != 1 || first_ == 0 ||
        std::find(events.begin(), events.end(), "finish 0") != events.end())
      return;
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, first_, 0));
    if (fd < 0) {
      events.push_back("no pidfd for trial 0");
      return;
    }
    struct pollfd p {
      fd, POLLIN, 0
    };
    int n = 0;
    while ((n = ::poll(&p, 1, 60'000)) < 0 && errno == EINTR) {  // a tick (SIGALRM) may interrupt
    }
    if (n != 1) events.push_back("trial 0 did not exit");
    ::close(fd);
  }
  void trial_finished(const TrialResult& t, const RunResult&) override {
    events.push_back("finish " + std::to_string(t.trial));
  }
  std::vector<std::string> events;

 private:
  pid_t first_ = 0;  // trial 0's supervisor
};

class RunLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/shmstress-run-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

TEST_F(RunLoopTest, ATrialThatEndedIsCheckedBeforeTheNextStarts) {
  const std::string file = dir_ + "/one.toml";
  std::ofstream(file) << kScenario;
  std::vector<Scenario> s;
  std::string err;
  ASSERT_TRUE(load_and_validate({file}, &s, &err)) << err;
  auto rec = std::make_shared<OrderRecorder>();
  RunOptions opt;
  opt.exe = std::string(SHMSTRESS_BUILD_DIR) + "/shmstress-worker";
  opt.invocation = std::string(SHMSTRESS_BUILD_DIR) + "/shmstress";
  opt.sometimes = false;
  opt.parallel = 3;  // room for all three at once: only the order of work holds trial 2 back
  opt.seed = 7;
  opt.out_dir = dir_ + "/run";
  opt.subscribers.push_back(rec);
  RunResult r = run(s, opt);
  EXPECT_EQ(r.exit_code(), 0) << r.error;
  ASSERT_EQ(rec->events.size(), 6u) << ::testing::PrintToString(rec->events);
  // Before, the loop started every trial it had room for before it waited
  // for any: start 0, 1 and 2, and only then a finish. (Which trial is
  // checked first is the kernel's: trial 1 may have ended too.)
  const auto at = [&](const std::string& e) {
    return std::find(rec->events.begin(), rec->events.end(), e) - rec->events.begin();
  };
  const auto first_finish = std::min({at("finish 0"), at("finish 1"), at("finish 2")});
  EXPECT_LT(first_finish, at("start 2")) << ::testing::PrintToString(rec->events);
}

}  // namespace
}  // namespace harness
