// SpareDirs: passing trials' dirs reused. What a reused dir may hold is the
// promise the next trial (and anyone reading a kept trial) relies on.
// TrialScratch: trials on the run's own tmpfs, which nobody else sees and
// which never outlives the run; move_trial_dir: how a kept one leaves it.
#include "trial_dirs.h"

#include <gtest/gtest.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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
      std::string rel = e.path().lexically_relative(d).string();
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

// Lines of a mountinfo file that mount at `path`.
int mounts_at(const std::string& mountinfo, const std::string& path) {
  std::ifstream in(mountinfo);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, devno, root, at;
    f >> id >> parent >> devno >> root >> at;
    n += at == path ? 1 : 0;
  }
  return n;
}

using TrialScratchTest = SpareDirsTest;

// The inode of a /proc mount-namespace link.
ino_t ns_of(const std::string& link) {
  struct stat st {};
  return ::stat(link.c_str(), &st) == 0 ? st.st_ino : 0;
}

TEST_F(TrialScratchTest, IsATmpfsOfTheRunsOwnThatTheHostNeverSeesAndGoesWithIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "a mount of our own needs root";
  base_ = fs::canonical(base_);  // as mountinfo names it
  const std::string root = (base_ / ".trials").string();
  // A process forked before the run's namespace exists stays where the run
  // started: the host's view, whatever pid 1's is.
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t host = ::fork();
  if (host == 0) {
    char c;
    ::close(go[1]);
    (void)!::read(go[0], &c, 1);
    ::_exit(0);
  }
  ::close(go[0]);
  const std::string host_mountinfo = "/proc/" + std::to_string(host) + "/mountinfo";
  {
    std::string why;
    auto scratch = TrialScratch::make(base_.string(), &why);
    ASSERT_NE(scratch, nullptr) << why;
    EXPECT_EQ(scratch->root(), root);
    struct statfs sf {};
    ASSERT_EQ(::statfs(root.c_str(), &sf), 0);
    EXPECT_EQ(sf.f_type, TMPFS_MAGIC);
    EXPECT_NE(ns_of("/proc/thread-self/ns/mnt"),
              ns_of("/proc/" + std::to_string(host) + "/ns/mnt"));
    EXPECT_EQ(mounts_at("/proc/self/mountinfo", root), 1);
    EXPECT_EQ(mounts_at(host_mountinfo, root), 0);
    std::ofstream(root + "/history.jsonl") << "{}";
  }
  EXPECT_EQ(mounts_at("/proc/self/mountinfo", root), 0);
  EXPECT_FALSE(fs::exists(root));
  ::close(go[1]);
  ::waitpid(host, nullptr, 0);
}

TEST_F(TrialScratchTest, AThreadOutsideTheRunsNamespaceGetsNoMountAtAll) {
  if (::geteuid() != 0) GTEST_SKIP() << "a mount of our own needs root";
  if (ns_of("/proc/thread-self/ns/mnt") !=
      ns_of("/proc/" + std::to_string(::getppid()) + "/ns/mnt"))
    GTEST_SKIP() << "this process entered its namespace in an earlier test (run each test alone, "
                    "as ctest does)";
  // A thread that exists before the first make() stays in the host's
  // namespace when the caller moves (unshare moves one thread).
  std::promise<void> made;
  std::string elsewhere_why;
  bool elsewhere_mounted = true;
  std::thread other([&] {
    made.get_future().wait();
    elsewhere_mounted = TrialScratch::make((base_ / "scen").string(), &elsewhere_why) != nullptr;
  });
  std::string why;
  auto scratch = TrialScratch::make(base_.string(), &why);
  ASSERT_NE(scratch, nullptr) << why;
  made.set_value();
  other.join();
  EXPECT_FALSE(elsewhere_mounted);
  EXPECT_EQ(elsewhere_why, "no mount namespace of our own: Invalid argument");
  EXPECT_FALSE(fs::exists(base_ / "scen" / ".trials"));
}

TEST_F(TrialScratchTest, AnEmptyDirAKilledRunLeftIsTakenAgain) {
  if (::geteuid() != 0) GTEST_SKIP() << "a mount of our own needs root";
  fs::create_directories(base_ / ".trials");
  std::string why;
  auto scratch = TrialScratch::make(base_.string(), &why);
  EXPECT_NE(scratch, nullptr) << why;
}

TEST_F(TrialScratchTest, WhatIsNotAnEmptyDirOfOursIsLeftAlone) {
  if (::geteuid() != 0) GTEST_SKIP() << "a mount of our own needs root";
  fs::create_directories(base_ / ".trials");
  std::ofstream(base_ / ".trials" / "a user's") << "kept";
  std::string why;
  EXPECT_EQ(TrialScratch::make(base_.string(), &why), nullptr);
  EXPECT_EQ(why,
            (base_ / ".trials").string() + " exists and is not an empty dir: not ours, left alone");
  EXPECT_TRUE(fs::exists(base_ / ".trials" / "a user's"));
  EXPECT_EQ(mounts_at("/proc/self/mountinfo", (base_ / ".trials").string()), 0);

  fs::remove_all(base_ / ".trials");
  fs::create_directory_symlink(base_ / "scen", base_ / ".trials");
  EXPECT_EQ(TrialScratch::make(base_.string(), &why), nullptr);
  EXPECT_TRUE(fs::is_symlink(base_ / ".trials"));
}

TEST_F(TrialScratchTest, AKeptTrialLeavesTheTmpfsWholeAndTheTmpfsKeepsNothingOfIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "a mount of our own needs root";
  std::string why;
  auto scratch = TrialScratch::make(base_.string(), &why);
  ASSERT_NE(scratch, nullptr) << why;
  // A trial made on disk, moved onto the tmpfs, then kept on the disk again:
  // two moves across filesystems, each a copy.
  const std::string on_disk = trial("trial-0");
  std::set<std::string> files = tree(on_disk);
  // A FIFO a subject left: not copied, and no reason to lose the rest.
  ASSERT_EQ(::mkfifo((fs::path(on_disk) / "job0-rank0" / "pipe").c_str(), 0644), 0);
  const std::string running = scratch->root() + "/trial-0";
  ASSERT_FALSE(move_trial_dir(on_disk, running));
  EXPECT_FALSE(fs::exists(on_disk));
  const std::string kept = (base_ / "scen" / "kept").string();
  ASSERT_FALSE(move_trial_dir(running, kept));
  EXPECT_FALSE(fs::exists(running));
  EXPECT_EQ(tree(kept), files);
  EXPECT_TRUE(fs::is_symlink(fs::path(kept) / "job0-rank1" / "stderr.log"));
  std::ifstream h(fs::path(kept) / "history.jsonl");
  std::string text((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "something");
}

TEST_F(TrialScratchTest, ACopyThatFailsLeavesNoPartOfItAndTheSourceWhole) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounts need root";
  std::string why;
  auto scratch = TrialScratch::make(base_.string(), &why);  // and our namespace for the small disk
  ASSERT_NE(scratch, nullptr) << why;
  const fs::path small = base_ / "small";
  fs::create_directories(small);
  ASSERT_EQ(::mount("small", small.c_str(), "tmpfs", 0, "size=64k"), 0);
  const std::string from = scratch->root() + "/trial-0";
  fs::create_directories(from + "/job0-rank0");
  std::ofstream(from + "/history.jsonl") << "{}";
  std::ofstream(from + "/job0-rank0/stdout.log") << std::string(256 * 1024, 'x');
  const std::string to = (small / "trial-0").string();
  // libstdc++'s copy_file says EIO for the short write ENOSPC cut.
  EXPECT_EQ(move_trial_dir(from, to), std::make_error_code(std::errc::io_error));
  EXPECT_TRUE(fs::is_empty(small));  // neither `to` nor the hidden copy
  EXPECT_EQ(fs::file_size(from + "/job0-rank0/stdout.log"), 256u * 1024);
  ::umount2(small.c_str(), MNT_DETACH);
}

void on_tick(int) {}

// The run ticks (SIGALRM every 250 ms) with a handler that does not restart,
// so the tick interrupts its waitpid(). A copy it cut short was a kept trial
// lost (libstdc++'s copy_file reports sendfile()'s EINTR, and does not
// retry). Here the tick comes every 20 us: without the signals held off,
// most of these copies fail.
TEST_F(TrialScratchTest, ATickWithoutRestartNeverCutsACopyShort) {
  if (::geteuid() != 0) GTEST_SKIP() << "a mount of our own needs root";
  std::string why;
  auto scratch = TrialScratch::make(base_.string(), &why);
  ASSERT_NE(scratch, nullptr) << why;
  const std::string running = scratch->root() + "/trial-0";
  const std::string kept = (base_ / "scen" / "trial-0").string();
  fs::create_directories(running + "/job0-rank0");
  std::ofstream(running + "/job0-rank0/stdout.log") << std::string(4 << 20, 'x');
  struct sigaction tick {
  }, before{};
  tick.sa_handler = on_tick;  // no SA_RESTART, as the run's
  ASSERT_EQ(::sigaction(SIGALRM, &tick, &before), 0);
  itimerval every{{0, 20}, {0, 20}}, off{};
  ::setitimer(ITIMER_REAL, &every, nullptr);
  std::vector<std::error_code> errors;
  for (int i = 0; i < 10; ++i) {
    errors.push_back(move_trial_dir(running, kept));  // the disk
    errors.push_back(move_trial_dir(kept, running));  // the tmpfs
  }
  ::setitimer(ITIMER_REAL, &off, nullptr);
  // The signals held off during each copy come back after it.
  sigset_t now;
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, nullptr, &now), 0);
  EXPECT_FALSE(::sigismember(&now, SIGALRM));
  EXPECT_FALSE(::sigismember(&now, SIGINT));
  ::sigaction(SIGALRM, &before, nullptr);
  EXPECT_EQ(errors, std::vector<std::error_code>(20)) << "e.g. " << [&] {
    for (const auto& e : errors)
      if (e) return e.message();
    return std::string();
  }();
  EXPECT_EQ(fs::file_size(running + "/job0-rank0/stdout.log"), 4u << 20);
}

TEST_F(TrialScratchTest, AMoveOntoAnythingThereFailsAndLeavesBoth) {
  const std::string from = trial("trial-0");
  const std::string onto = trial("trial-1");
  fs::create_directories(base_ / "empty");
  for (const std::string& to : {onto, (base_ / "empty").string(), outside().string()}) {
    EXPECT_EQ(move_trial_dir(from, to), std::make_error_code(std::errc::file_exists)) << to;
    EXPECT_TRUE(fs::exists(fs::path(from) / "history.jsonl"));
  }
  EXPECT_TRUE(fs::is_empty(base_ / "empty"));
}

}  // namespace
}  // namespace harness
