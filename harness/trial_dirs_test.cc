// SpareDirs: passing trials' dirs reused. What a reused dir may hold is the
// promise the next trial (and anyone reading a kept trial) relies on.
#include "trial_dirs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace harness {
namespace {

namespace fs = std::filesystem;

class SpareDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / ("shmstress-spares-" + std::to_string(::getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_ / "scen");
  }
  void TearDown() override { fs::remove_all(base_); }

  // A finished trial's dir: its files, two workers with logs and files of
  // their own, a lock dir with a lock, and a worker's symlink out of it.
  std::string trial(const std::string& name) {
    fs::path d = base_ / "scen" / name;
    fs::create_directories(d / "job0-rank0");
    fs::create_directories(d / "job0-rank1" / "sub");
    fs::create_directories(d / "locks");
    fs::create_directories(d / "cleanup");
    for (const char* f : {"history.jsonl", "scenario.toml", "schedule.json", "verdict.json", "locks/x.lock",
                          "job0-rank0/stdout.log", "job0-rank0/stderr.log", "job0-rank0/data.bin",
                          "job0-rank1/stdout.log", "cleanup/stdout.log"}) {
      std::ofstream(d / f) << "something";
    }
    std::ofstream(outside()) << "not the trial's";
    fs::create_symlink(outside(), d / "job0-rank1" / "stderr.log");
    return d.string();
  }
  fs::path outside() const { return base_ / "outside.txt"; }

  // Every path under `d`, relative, with "/" after dirs.
  std::set<std::string> tree(const fs::path& d) {
    std::set<std::string> out;
    for (auto& e : fs::recursive_directory_iterator(d)) {
      std::string rel = fs::relative(e.path(), d).string();
      out.insert(fs::is_directory(fs::symlink_status(e.path())) ? rel + "/" : rel);
    }
    return out;
  }
  fs::path base_;
};

TEST_F(SpareDirsTest, AGivenDirHoldsOnlyEmptyWorkerLogsAndIsNoTrialDir) {
  SpareDirs spares((base_ / ".spare").string(), 4);
  const std::string d = trial("trial-0");
  spares.give(d);
  EXPECT_FALSE(fs::exists(d));
  ASSERT_EQ(spares.size(), 1u);
  const fs::path spare = base_ / ".spare" / "0";
  EXPECT_EQ(tree(spare), (std::set<std::string>{"job0-rank0/", "job0-rank0/stdout.log", "job0-rank0/stderr.log",
                                                "job0-rank1/", "job0-rank1/stdout.log"}));
  EXPECT_EQ(fs::file_size(spare / "job0-rank0" / "stdout.log"), 0u);
  EXPECT_TRUE(fs::exists(outside())) << "a symlink's target is never touched";
  EXPECT_EQ(fs::file_size(outside()), 15u);
}

TEST_F(SpareDirsTest, ATakenDirKeepsOnlyTheNamedWorkersAndIsOurs) {
  SpareDirs spares((base_ / ".spare").string(), 4);
  spares.give(trial("trial-0"));
  const std::string next = (base_ / "scen" / "trial-1").string();
  ASSERT_TRUE(spares.take(next, {"job0-rank1", "job3-rank0"}));
  EXPECT_EQ(tree(next), (std::set<std::string>{"job0-rank1/", "job0-rank1/stdout.log"}));
  struct stat st {};
  ASSERT_EQ(::stat((next + "/job0-rank1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(spares.size(), 0u);
  EXPECT_FALSE(spares.take((base_ / "scen" / "trial-2").string(), {})) << "no spare left: make it yourself";
}

// A worker run as another uid (the unprivileged fault) leaves its dir and
// logs its own, and any worker may chmod them: the next trial's worker of
// that label, maybe root, maybe another uid, must find them as a new dir's.
TEST_F(SpareDirsTest, WhatAWorkerChownedOrChmoddedIsOursAndStockAgain) {
  if (::geteuid() != 0) GTEST_SKIP() << "chown to another uid needs root";
  SpareDirs spares((base_ / ".spare").string(), 4);
  const std::string d = trial("trial-0");
  const fs::path w = fs::path(d) / "job0-rank0";
  ASSERT_EQ(::chown(w.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(w.c_str(), 0700), 0);
  ASSERT_EQ(::chown((w / "stdout.log").c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod((w / "stdout.log").c_str(), 0600), 0);
  ASSERT_EQ(::chmod((w / "stderr.log").c_str(), 0666), 0);
  ASSERT_EQ(::chmod(d.c_str(), 0700), 0);
  spares.give(d);
  const std::string next = (base_ / "scen" / "trial-1").string();
  ASSERT_TRUE(spares.take(next, {"job0-rank0"}));
  struct stat st {};
  for (const auto& [rel, mode] : {std::pair<std::string, mode_t>{"", 0755}, {"job0-rank0", 0755},
                                  {"job0-rank0/stdout.log", 0644}, {"job0-rank0/stderr.log", 0644}}) {
    ASSERT_EQ(::lstat((next + "/" + rel).c_str(), &st), 0) << rel;
    EXPECT_EQ(st.st_mode & 07777, mode) << rel;
    EXPECT_EQ(st.st_uid, ::geteuid()) << rel;
    EXPECT_EQ(st.st_gid, ::getegid()) << rel;
    if (S_ISREG(st.st_mode)) {
      EXPECT_EQ(st.st_size, 0) << rel;
    }
  }
}

TEST_F(SpareDirsTest, BeyondItsCapAGivenDirIsRemoved) {
  SpareDirs spares((base_ / ".spare").string(), 1);
  spares.give(trial("trial-0"));
  const std::string second = trial("trial-1");
  spares.give(second);
  EXPECT_EQ(spares.size(), 1u);
  EXPECT_FALSE(fs::exists(second));
}

TEST_F(SpareDirsTest, TakingOntoAnExistingDirFailsAndLeavesItAlone) {
  SpareDirs spares((base_ / ".spare").string(), 4);
  spares.give(trial("trial-0"));
  const fs::path taken = base_ / "scen" / "mine";
  fs::create_directories(taken);
  std::ofstream(taken / "keep.txt") << "a user's";
  EXPECT_FALSE(spares.take(taken.string(), {}));
  EXPECT_TRUE(fs::exists(taken / "keep.txt"));
}

TEST_F(SpareDirsTest, TheRootGoesWithTheSpares) {
  {
    SpareDirs spares((base_ / ".spare").string(), 4);
    spares.give(trial("trial-0"));
    EXPECT_TRUE(fs::exists(base_ / ".spare"));
  }
  EXPECT_FALSE(fs::exists(base_ / ".spare"));
}

}  // namespace
}  // namespace harness
