#include "worker_exe.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace harness {
namespace {

namespace fs = std::filesystem;

// A directory standing in for shmstress's own: `self` in it, and whatever
// shmstress-worker a case puts beside it. Removed whatever the case did.
class Dir {
 public:
  Dir() {
    char tmpl[] = "/tmp/shmstress-worker-exe-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string self() const { return (path_ / "shmstress").string(); }
  std::string sibling() const { return (path_ / "shmstress-worker").string(); }
  void script(const std::string& body, mode_t mode = 0755) const {
    std::ofstream(sibling()) << "#!/bin/sh\n" << body << "\n";
    ::chmod(sibling().c_str(), mode);
  }

 private:
  fs::path path_;
};

TEST(StockWorkerExe, NoSiblingMeansShmstressItselfWithoutANote) {
  Dir d;
  WorkerExe w = stock_worker_exe(d.self());
  EXPECT_EQ(w.exe, d.self());
  EXPECT_EQ(w.note, "");
}

TEST(StockWorkerExe, ASiblingAnsweringThisBuildsTokenIsExeced) {
  Dir d;
  d.script(std::string("[ \"$1\" = --build-token ] && echo ") + worker_build_token());
  WorkerExe w = stock_worker_exe(d.self());
  EXPECT_EQ(w.exe, d.sibling());
  EXPECT_EQ(w.note, "");
}

TEST(StockWorkerExe, AnotherBuildsSiblingIsPassedOverSayingWhy) {
  Dir d;
  d.script("echo 0123456789abcdef0123456789abcdef");
  WorkerExe w = stock_worker_exe(d.self());
  EXPECT_EQ(w.exe, d.self());
  EXPECT_NE(w.note.find("is from another build (its token 0123456789abcdef0123456789abcdef, this build's " +
                        std::string(worker_build_token()) + ")"),
            std::string::npos)
      << w.note;
  EXPECT_NE(w.note.find("workers run as " + d.self() + " worker"), std::string::npos) << w.note;
}

TEST(StockWorkerExe, ASiblingThatCannotBeRunIsPassedOver) {
  Dir d;
  d.script(std::string("echo ") + worker_build_token(), 0644);
  WorkerExe w = stock_worker_exe(d.self());
  EXPECT_EQ(w.exe, d.self());
  EXPECT_NE(w.note.find(d.sibling() + ": not executable"), std::string::npos) << w.note;
  // A directory of that name.
  Dir e;
  fs::create_directory(e.sibling());
  WorkerExe dir = stock_worker_exe(e.self());
  EXPECT_EQ(dir.exe, e.self());
  EXPECT_NE(dir.note.find(e.sibling() + ": not a regular file"), std::string::npos) << dir.note;
}

TEST(StockWorkerExe, ASiblingThatFailsOrSaysNothingIsPassedOver) {
  Dir d;
  d.script(std::string("echo ") + worker_build_token() + "; exit 3");
  WorkerExe failed = stock_worker_exe(d.self());
  EXPECT_EQ(failed.exe, d.self());
  EXPECT_NE(failed.note.find("--build-token failed (exit 3)"), std::string::npos) << failed.note;
  d.script("exit 0");
  EXPECT_NE(stock_worker_exe(d.self()).note.find("is unusable (it printed no token)"), std::string::npos);
}

TEST(StockWorkerExe, ASiblingThatHangsIsKilledAtTheLimit) {
  Dir d;
  d.script("exec sleep 30");
  const auto t0 = std::chrono::steady_clock::now();
  WorkerExe w = stock_worker_exe(d.self(), std::chrono::milliseconds(200));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(w.exe, d.self());
  EXPECT_NE(w.note.find("did not answer --build-token within 200 ms"), std::string::npos) << w.note;
}

// The real pair: the shmstress-worker this build made answers this build's token.
TEST(StockWorkerExe, TheBuiltWorkerIsThisBuilds) {
  const std::string self = std::string(SHMSTRESS_BUILD_DIR) + "/shmstress";
  WorkerExe w = stock_worker_exe(self);
  EXPECT_EQ(w.exe, std::string(SHMSTRESS_BUILD_DIR) + "/shmstress-worker");
  EXPECT_EQ(w.note, "");
}

}  // namespace
}  // namespace harness
