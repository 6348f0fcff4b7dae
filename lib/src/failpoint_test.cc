#include "shmcoord/failpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "shmcoord/registry.h"
#include "test_util.h"

namespace shmcoord {
namespace {

using testing::ShmTest;
using namespace std::chrono_literals;

static_assert(failpoint::known("crash/registry/joined"));
static_assert(!failpoint::known("crash/registry/nope"));

// The table is what the harness validates scenario names against, so it must
// name exactly the points the library passes: every failpoint literal in
// lib/src is in it, and everything in it is in lib/src.
TEST(Failpoint, TableNamesExactlyThePointsTheSourcesPass) {
  const std::regex literal("\"((?:shm|lock|mutex|lease|crash)/[a-z0-9/_-]+)\"");
  std::set<std::string> in_sources;
  for (const auto& f : std::filesystem::directory_iterator(SHMCOORD_SOURCE_DIR "/src")) {
    const std::string name = f.path().filename().string();
    if (f.path().extension() != ".cc" || name.ends_with("_test.cc")) continue;
    std::ifstream in(f.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (std::sregex_iterator it(s.begin(), s.end(), literal), end; it != end; ++it) in_sources.insert((*it)[1]);
  }
  std::set<std::string> in_table;
  for (const auto& p : failpoint::points()) {
    EXPECT_TRUE(in_table.insert(std::string(p.name)).second) << "listed twice: " << p.name;
    EXPECT_FALSE(p.where.empty()) << p.name;
    EXPECT_EQ(p.kind == failpoint::Kind::kWindow, p.name.starts_with("crash/")) << p.name;
  }
  for (const auto& n : in_sources) EXPECT_TRUE(in_table.contains(n)) << "passed by the library, missing from kPoints: " << n;
  for (const auto& n : in_table) EXPECT_TRUE(in_sources.contains(n)) << "listed, but no code passes it: " << n;
}

TEST(Failpoint, SpecsWithUnknownPointsOrBadCountsAreRefusedWithAReason) {
  EXPECT_NE(failpoint::set_pause_spec("crash/registry/nope:1").find("not a shmcoord failpoint"), std::string::npos);
  EXPECT_NE(failpoint::set_pause_spec("crash/registry/joined:0").find("positive integer"), std::string::npos);
  EXPECT_NE(failpoint::set_pause_spec("crash/registry/joined:x").find("positive integer"), std::string::npos);
  EXPECT_NE(failpoint::set_crash_spec("shm/registry/opn:2").find("not a shmcoord failpoint"), std::string::npos);
  EXPECT_EQ(failpoint::set_pause_spec("crash/registry/joined:3,mutex/lock"), "");
  EXPECT_EQ(failpoint::set_pause_spec(""), "");  // disarmed again for the other tests
  EXPECT_EQ(failpoint::set_crash_spec(""), "");
}

#ifdef SHMCOORD_FAILPOINTS
class FailpointProcess : public ShmTest {};

int g_out = -1;
void tell(const char* point, std::uint64_t hit) {
  std::string line = std::string("at ") + point + " hit " + std::to_string(hit) + "\n";
  (void)!::write(g_out, line.data(), line.size());
}

JobSpec one_rank(std::string key) {
  JobSpec s;
  s.job_key = std::move(key);
  s.local_rank = 0;
  s.local_world_size = 1;
  s.timeout = 5000ms;
  return s;
}

TEST_F(FailpointProcess, PauseStopsTheProcessAtTheNthPassAndResumesThere) {
  auto& c = fork_child([&](int out) {
    g_out = out;
    failpoint::set_pause_observer(&tell);
    if (!failpoint::set_pause_spec("crash/registry/joined:2").empty()) return 2;
    auto reg = Registry::open(ns);
    auto a = reg->acquire(one_rank("a"));
    report(out, a ? "first" : a.error().to_string());
    auto b = reg->acquire(one_rank("b"));  // stops here, in the window
    report(out, b ? "second " + std::to_string(b->prefix) : b.error().to_string());
    return 0;
  });
  EXPECT_EQ(read_line(c), "first");
  ASSERT_TRUE(wait_stopped(c));
  EXPECT_EQ(read_line(c).rfind("at crash/registry/joined hit ", 0), 0u);
  ::kill(c.pid, SIGCONT);
  EXPECT_EQ(read_line(c), "second 1");
  EXPECT_EQ(wait_child(c), 0);
}

TEST_F(FailpointProcess, NamedCrashKillsAtTheNthPassAfterTellingTheObserver) {
  auto& c = fork_child([&](int out) {
    g_out = out;
    failpoint::set_observer(&tell);
    if (!failpoint::set_crash_spec("crash/registry/joined:2").empty()) return 2;
    auto reg = Registry::open(ns);
    auto a = reg->acquire(one_rank("a"));
    report(out, a ? "first" : a.error().to_string());
    (void)reg->acquire(one_rank("b"));
    report(out, "survived");
    return 0;
  });
  EXPECT_EQ(read_line(c), "first");
  EXPECT_EQ(read_line(c).rfind("at crash/registry/joined hit ", 0), 0u);
  EXPECT_EQ(wait_child(c), 128 + SIGKILL);
}

TEST_F(FailpointProcess, ADisarmedProcessPassesItsCrashAndPausePointsUntouched) {
  auto& c = fork_child([&](int out) {
    g_out = out;
    failpoint::set_observer(&tell);
    failpoint::set_pause_observer(&tell);
    if (!failpoint::set_crash_spec("crash/registry/joined:1").empty()) return 2;
    if (!failpoint::set_pause_spec("crash/registry/claim-half-written:1").empty()) return 2;
    failpoint::disarm();  // as a forked resource tracker's atfork handler does
    auto reg = Registry::open(ns);
    auto a = reg->acquire(one_rank("a"));
    report(out, a ? "acquired " + std::to_string(a->prefix) : a.error().to_string());
    return 0;
  });
  EXPECT_EQ(read_line(c), "acquired 0");  // no "at ..." line: neither trigger fired
  EXPECT_EQ(wait_child(c), 0);
}

// Runs this test binary again, only `test` (Suite.Name), as the child of an
// environment test, with `env` ("VAR=value ...") set; its output, and *rc.
std::string rerun_with(const std::string& env, const std::string& test, int* rc) {
  const std::string cmd = "SHMCOORD_FAILPOINT_ENV_CHILD=1 " + env + " /proc/" +
                          std::to_string(::getpid()) + "/exe --gtest_filter=" + test + " 2>&1";
  std::string out;
  *rc = -1;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "popen failed";
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  *rc = ::pclose(p);
  return out;
}

// SHMCOORD_PAUSE_AT is read once, at the first point: a malformed value is
// refused loudly. Runs this test binary again with the variable set.
TEST(FailpointEnv, MalformedEnvironmentIsRefusedAndReported) {
  if (std::getenv("SHMCOORD_FAILPOINT_ENV_CHILD")) {
    EXPECT_EQ(failpoint::hits(), 0u);
    (void)failpoint::check("mutex/lock");  // first point: reads the environment
    std::string err = failpoint::env_error();
    EXPECT_NE(err.find("SHMCOORD_PAUSE_AT: 'no/such/point' is not a shmcoord failpoint"), std::string::npos) << err;
    EXPECT_NE(err.find("SHMCOORD_CRASH_AT"), std::string::npos) << err;
    EXPECT_NE(err.find("SHMCOORD_LEASE_FIRST_FIT: 'yes': must be 1 or 0"), std::string::npos)
        << err;
    EXPECT_FALSE(failpoint::lease_first_fit()) << "a refused value leaves the random start";
    return;
  }
  int rc = 0;
  const std::string out = rerun_with(
      "SHMCOORD_PAUSE_AT=no/such/point:1 SHMCOORD_CRASH_AT=crash/registry/joined:0 "
      "SHMCOORD_LEASE_FIRST_FIT=yes",
      "FailpointEnv.MalformedEnvironmentIsRefusedAndReported", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("shmcoord: ignoring SHMCOORD_PAUSE_AT"), std::string::npos) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

// SHMCOORD_LEASE_FIRST_FIT=1 is what the harness sets in the trials that pack
// leases (injectors/sometimes.cc): read once, like the triggers.
TEST(FailpointEnv, LeaseFirstFitIsReadFromTheEnvironment) {
  if (std::getenv("SHMCOORD_FAILPOINT_ENV_CHILD")) {
    EXPECT_TRUE(failpoint::lease_first_fit());
    EXPECT_EQ(failpoint::env_error(), "");
    return;
  }
  EXPECT_FALSE(failpoint::lease_first_fit()) << "off unless asked for";
  int rc = 0;
  const std::string out = rerun_with("SHMCOORD_LEASE_FIRST_FIT=1",
                                     "FailpointEnv.LeaseFirstFitIsReadFromTheEnvironment", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}
#endif

}  // namespace
}  // namespace shmcoord
