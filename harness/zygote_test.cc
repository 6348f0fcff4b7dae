// The run's zygote (zygote.h): a worker it forks is what an exec'd one is.
// Each case runs real trials of the stock worker, once with the zygote and
// once with every worker exec'd (--exec-workers), each worker printing the
// process state it starts with (SHMSTRESS_PROBE, worker.cc), and compares.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "events.h"
#include "run.h"
#include "scenario.h"

namespace harness {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Job 0 as a trial starts it; job 1 dropped to another uid with few fds,
// its ranks as a fault's settings make them.
constexpr char kScenario[] = R"(description = "no-op ranks that say what they start as"
trials = 2
timeout = "20s"
final_cleanup = false

[[job]]
ranks = 2
[job.workload]
acquire = false
release = false

[[job]]
ranks = 2
[job.workload]
acquire = false
release = false

[[fault]]
kind = "unprivileged"
job = 1
uid = 65534

[[fault]]
kind = "emfile"
job = 1
limit = 40
)";

class ZygoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0)
      GTEST_SKIP() << "a trial's own pid namespace (which the zygote needs) needs root";
    char tmpl[] = "/tmp/shmstress-zygote-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);  // the uid-dropped ranks read their own dirs
    ASSERT_EQ(::setenv("SHMSTRESS_PROBE", "1", 1), 0);
  }
  void TearDown() override {
    ::unsetenv("SHMSTRESS_PROBE");
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // label ("job0-rank1", trial index) -> the probe of that worker, from a
  // run of kScenario kept whole.
  std::map<std::pair<std::string, int>, Json> probes(bool zygote, const std::string& exe = "") {
    const std::string file = dir_ + "/zygote.toml";
    std::ofstream(file) << kScenario;
    std::vector<Scenario> s;
    std::string err;
    EXPECT_TRUE(load_and_validate({file}, &s, &err)) << err;
    if (s.empty()) return {};
    RunOptions opt;
    opt.exe = exe.empty() ? std::string(SHMSTRESS_BUILD_DIR) + "/shmstress-worker" : exe;
    opt.invocation = std::string(SHMSTRESS_BUILD_DIR) + "/shmstress";
    opt.sometimes = false;
    opt.zygote = zygote;
    opt.parallel = 1;
    opt.keep_passing = true;
    opt.seed = 5;
    opt.out_dir = dir_ + (zygote ? "/zygote" : "/exec") + (exe.empty() ? "" : "-other");
    RunResult r = run(s, opt);
    EXPECT_EQ(r.exit_code(), 0) << r.error;
    std::map<std::pair<std::string, int>, Json> out;
    for (const auto& t : fs::recursive_directory_iterator(opt.out_dir)) {
      if (t.path().filename() != "stdout.log") continue;
      const std::string label = t.path().parent_path().filename().string();
      const std::string trial_dir =
          t.path().parent_path().parent_path().filename().string();  // trial-N
      std::ifstream in(t.path());
      std::string line;
      std::getline(in, line);
      Json j = Json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << t.path() << ": " << line;
      out[{label, std::stoi(trial_dir.substr(trial_dir.find('-') + 1))}] = j;
    }
    return out;
  }

  std::string dir_;
};

TEST_F(ZygoteTest, AForkedWorkerStartsAsAnExecdOneDoes) {
  const auto forked = probes(true);
  const auto execd = probes(false);
  ASSERT_EQ(forked.size(), 8u);  // 2 trials x 4 ranks
  ASSERT_EQ(execd.size(), 8u);
  for (const auto& [key, probe] : forked) {
    SCOPED_TRACE(key.first + " of trial " + std::to_string(key.second));
    ASSERT_TRUE(execd.contains(key));
    Json f = probe, e = execd.at(key);
    // What a trial's worker is, either way.
    EXPECT_EQ(f["ppid"], 1) << "the supervisor's child (the trial's init)";
    EXPECT_EQ(f["leads_group"], true);
    EXPECT_EQ(f["pdeathsig"], 9);
    EXPECT_EQ(f["dumpable"], 1) << "its /proc entries its own, as after an exec";
    EXPECT_EQ(f["fd3_cloexec"], false);
    // Forked from the zygote indeed (zygote.h: its cmdline says so), the
    // other run's exec'd: a silent fallback would compare exec with exec.
    EXPECT_TRUE(f["cmdline"].get<std::string>().ends_with(" zygote ")) << f["cmdline"];
    EXPECT_TRUE(e["cmdline"].get<std::string>().ends_with(" worker ")) << e["cmdline"];
    EXPECT_EQ(f["fds"], Json::array({0, 1, 2, 3}));
    EXPECT_EQ(f["blocked"], Json::array());
    EXPECT_EQ(f["not_default"], Json::array());
    EXPECT_TRUE(f["cwd"].get<std::string>().ends_with("/" + key.first));
    const bool dropped = key.first.starts_with("job1");
    EXPECT_EQ(f["uid"], dropped ? 65534 : 0);
    EXPECT_EQ(f["gid"], dropped ? 65534 : 0);
    if (dropped) {
      EXPECT_EQ(f["groups"], 0);
    } else {
      EXPECT_EQ(f["ns_of_init"], Json({{"mnt", true}, {"pid", true}, {"net", true}}));
    }
    // And the same as the exec'd worker of the same rank and trial, but for
    // what names the run (its dir) or the process (its pid).
    for (const char* k : {"cwd", "pid", "cmdline"}) f.erase(k), e.erase(k);
    EXPECT_EQ(f, e);
  }
  // The limited ranks really run with few fds (the emfile fault's setting).
  EXPECT_EQ(forked.at({"job1-rank0", 0})["nofile"], Json::array({40, 40}));
}

// A worker binary that knows no zygote (an older build: `zygote` is not a
// command it has) never says hello: the run goes on with every worker
// exec'd, and no trial is a harness error for it.
TEST_F(ZygoteTest, AWorkerBinaryWithoutAZygoteIsExecdWithoutAnError) {
  const std::string script = dir_ + "/older-worker";
  std::ofstream(script) << "#!/bin/sh\n[ \"$1\" = worker ] && exec " << SHMSTRESS_BUILD_DIR
                        << "/shmstress-worker worker\nexit 0\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  const auto execd = probes(true, script);  // exit code 0 asserted inside: no harness error
  ASSERT_EQ(execd.size(), 8u);
  for (const auto& [key, probe] : execd) {
    EXPECT_TRUE(probe["cmdline"].get<std::string>().ends_with(" worker ")) << key.first << ": " << probe["cmdline"];
  }
}

}  // namespace
}  // namespace harness
