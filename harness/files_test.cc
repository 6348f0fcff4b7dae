// read_regular_file (files.h): what the harness reads someone else wrote, so
// a FIFO, a device, a directory or a huge file is refused with a reason, at
// once, without blocking and without reading it all. write_output: the one
// place that opens an output path never replaces what is not a regular file.
#include "files.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace harness {
namespace {

namespace fs = std::filesystem;

// A scratch dir removed after the test, whatever happens in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "shmstress-files-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name, const std::string& text) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ReadRegularFile, ReadsARegularFileWholeWithNulBytes) {
  ScratchDir d;
  const std::string text("a\0b\nc", 5);
  std::string why;
  auto got = read_regular_file(d.file("f", text), 100, &why);
  ASSERT_TRUE(got) << why;
  EXPECT_EQ(*got, text);
}

TEST(ReadRegularFile, AFileOfExactlyTheCapIsReadOneByteMoreIsRefused) {
  ScratchDir d;
  std::string why;
  EXPECT_TRUE(read_regular_file(d.file("at", std::string(64, 'x')), 64, &why));
  EXPECT_FALSE(read_regular_file(d.file("over", std::string(65, 'x')), 64, &why));
  EXPECT_EQ(why, "is 65 bytes, over the 64 bytes limit");
}

TEST(ReadRegularFile, OverTheCapSaysTheLimitInMiB) {
  ScratchDir d;
  const std::string p = d.path() + "/big";
  { std::ofstream(p) << "x"; }
  fs::resize_file(p, (std::size_t{16} << 20) + 1);  // sparse: no 16 MiB written
  std::string why;
  EXPECT_FALSE(read_regular_file(p, kMaxUserFileBytes, &why));
  EXPECT_EQ(why, "is 16777217 bytes, over the 16 MiB limit");
}

TEST(ReadRegularFile, AFifoIsRefusedAtOnceWithoutAWriter) {
  ScratchDir d;
  const std::string p = d.path() + "/fifo";
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  std::string why;
  EXPECT_FALSE(read_regular_file(p, kMaxUserFileBytes, &why));
  EXPECT_EQ(why, "is a FIFO, not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

TEST(ReadRegularFile, ASymlinkToDevZeroIsRefusedAsADevice) {
  ScratchDir d;
  const std::string p = d.path() + "/zero.toml";
  fs::create_symlink("/dev/zero", p);
  std::string why;
  EXPECT_FALSE(read_regular_file(p, kMaxUserFileBytes, &why));
  EXPECT_EQ(why, "is a character device, not a regular file");
}

TEST(ReadRegularFile, ADirectoryIsRefused) {
  ScratchDir d;
  std::string why;
  EXPECT_FALSE(read_regular_file(d.path(), kMaxUserFileBytes, &why));
  EXPECT_EQ(why, "is a directory, not a regular file");
}

TEST(ReadRegularFile, AMissingFileSaysSo) {
  std::string why;
  EXPECT_FALSE(read_regular_file("/nonexistent/shmstress/x", kMaxUserFileBytes, &why));
  EXPECT_EQ(why, "No such file or directory");
}

TEST(ReadRegularFile, ASymlinkLoopSaysSo) {
  ScratchDir d;
  const std::string p = d.path() + "/loop";
  fs::create_symlink(p, p);
  std::string why;
  EXPECT_FALSE(read_regular_file(p, kMaxUserFileBytes, &why));
  EXPECT_EQ(why, "Too many levels of symbolic links");
}

TEST(ReadRegularFile, AProcFileThatSaysSizeZeroIsReadToTheEnd) {
  std::string why;
  auto got = read_regular_file("/proc/self/status", kMaxUserFileBytes, &why);
  ASSERT_TRUE(got) << why;
  EXPECT_NE(got->find("Pid:"), std::string::npos);
  // ... and still capped while reading.
  EXPECT_FALSE(read_regular_file("/proc/self/status", 16, &why));
  EXPECT_EQ(why, "is over the 16 bytes limit");
}

TEST(ReadRegularFile, APathWithANulByteIsRefused) {
  std::string why;
  EXPECT_FALSE(read_regular_file(std::string("/etc/hostname\0x", 15), 100, &why));
  EXPECT_EQ(why, "the path holds a NUL byte");
}


// --- write_output ------------------------------------------------------------

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

int entries_in(const std::string& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(WriteOutput, ReplacesARegularFileWholeReadableByOthersWithNoTempLeft) {
  ScratchDir d;
  const std::string p = d.path() + "/out.txt";
  ASSERT_FALSE(write_output(p, "first", OutputOrigin::kUser));
  ASSERT_FALSE(write_output(p, "second", OutputOrigin::kDerived));
  EXPECT_EQ(slurp(p), "second");
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  EXPECT_EQ(entries_in(d.path()), 1) << "a temp file was left behind";
}

TEST(WriteOutput, AMissingDirectoryIsAnEnvironmentFailureNamingIt) {
  ScratchDir d;
  auto e = write_output(d.path() + "/no/such/dir/x", "x", OutputOrigin::kUser);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 3);
  EXPECT_NE(e->message.find("no/such/dir"), std::string::npos) << e->message;
}

TEST(WriteOutput, DevNullIsWrittenInPlaceNeverReplaced) {
  struct stat before{}, after{};
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  EXPECT_FALSE(write_output("/dev/null", "junit", OutputOrigin::kUser));
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_EQ(before.st_rdev, after.st_rdev);
}

TEST(WriteOutput, DevFullIsENOSPCExitThreeAndStaysADevice) {
  auto e = write_output("/dev/full", "junit", OutputOrigin::kUser);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 3);
  EXPECT_NE(e->message.find("No space left on device"), std::string::npos) << e->message;
  struct stat st{};
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(WriteOutput, AnUnknownCharacterDeviceIsRefusedWithExitTwoAndKept) {
  ScratchDir d;
  const std::string p = d.path() + "/random";
  ASSERT_EQ(::mknod(p.c_str(), S_IFCHR | 0600, makedev(1, 8)), 0) << "needs root (mknod)";  // /dev/random: harmless if written
  auto e = write_output(p, "x", OutputOrigin::kUser);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 2);
  EXPECT_NE(e->message.find("character device (1:8)"), std::string::npos) << e->message;
  struct stat st{};
  ASSERT_EQ(::lstat(p.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_TRUE(check_output(p, OutputOrigin::kUser));
}

TEST(WriteOutput, ADirectoryIsRefusedWithExitTwo) {
  ScratchDir d;
  auto e = write_output(d.path(), "x", OutputOrigin::kUser);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 2);
  EXPECT_NE(e->message.find("is a directory"), std::string::npos) << e->message;
}

TEST(WriteOutput, AFifoWithAReaderGetsTheTextAndStaysAFifo) {
  ScratchDir d;
  const std::string p = d.path() + "/fifo";
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  const int r = ::open(p.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(r, 0);
  ASSERT_FALSE(write_output(p, "hello", OutputOrigin::kUser));
  char buf[16] = {};
  EXPECT_EQ(::read(r, buf, sizeof buf), 5);
  EXPECT_EQ(std::string(buf), "hello");
  ::close(r);
  struct stat st{};
  ASSERT_EQ(::lstat(p.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

TEST(WriteOutput, AFifoNobodyReadsIsRefusedAtOnce) {
  ScratchDir d;
  const std::string p = d.path() + "/fifo";
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto e = write_output(p, "x", OutputOrigin::kUser);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 2);
  EXPECT_NE(e->message.find("FIFO that nobody reads"), std::string::npos) << e->message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
}

// /dev/stdout is this process's fd 1, wherever it points: a file it was
// redirected to keeps what was printed before, and is neither reopened nor
// truncated nor replaced.
TEST(WriteOutput, DevStdoutIsTheOwnFdWrittenWhereItStands) {
  ScratchDir d;
  const std::string p = d.file("console.txt", "");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(p.c_str(), O_WRONLY);
    ::dup2(fd, 1);
    (void)!::write(1, "before\n", 7);
    const bool ok = !write_output("/dev/stdout", "report\n", OutputOrigin::kUser) &&
                    !write_output("/dev/fd/1", "again\n", OutputOrigin::kUser);
    ::_exit(ok ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_EQ(slurp(p), "before\nreport\nagain\n");
  EXPECT_EQ(entries_in(d.path()), 1);
}

TEST(WriteOutput, AUserSymlinkIsFollowedADerivedOneIsRefused) {
  ScratchDir d;
  const std::string target = d.file("target.xml", "old");
  const std::string link = d.path() + "/latest.xml";
  fs::create_symlink(target, link);
  ASSERT_FALSE(write_output(link, "new", OutputOrigin::kUser));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(slurp(target), "new");
  auto e = write_output(link, "derived", OutputOrigin::kDerived);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 2);
  EXPECT_NE(e->message.find("symbolic link"), std::string::npos) << e->message;
  EXPECT_EQ(slurp(target), "new");
  EXPECT_TRUE(fs::is_symlink(link));
}

// A trial dir's own files skip the fsync, nothing else: still replaced
// whole with no temp left, still never written through a symlink a worker
// put in the trial dir.
TEST(WriteOutput, ATrialFileIsReplacedWholeAndNeverThroughASymlink) {
  ScratchDir d;
  const std::string p = d.path() + "/schedule.json";
  ASSERT_TRUE(write_trial_file(p, "first"));
  ASSERT_TRUE(write_trial_file(p, "second"));
  EXPECT_EQ(slurp(p), "second");
  EXPECT_EQ(entries_in(d.path()), 1) << "a temp file was left behind";
  const std::string victim = d.file("passwd", "root:x:0:0\n");
  const std::string link = d.path() + "/verdict.json";
  fs::create_symlink(victim, link);
  EXPECT_FALSE(write_trial_file(link, "{}"));
  EXPECT_EQ(slurp(victim), "root:x:0:0\n");
  EXPECT_TRUE(fs::is_symlink(link));
}

TEST(WriteOutput, ADerivedSymlinkToAnotherFileNeverTouchesIt) {
  ScratchDir d;
  const std::string victim = d.file("passwd", "root:x:0:0\n");
  const std::string link = d.path() + "/verdict.json";
  fs::create_symlink(victim, link);
  EXPECT_FALSE(write_file(link, "{}"));
  EXPECT_EQ(slurp(victim), "root:x:0:0\n");
}

TEST(WriteOutput, CheckOutputPassesWhatDoesNotExistYet) {
  ScratchDir d;
  EXPECT_FALSE(check_output(d.path() + "/new/dir/junit.xml", OutputOrigin::kUser));
  EXPECT_FALSE(check_output(d.path() + "/junit.xml", OutputOrigin::kUser));
  EXPECT_FALSE(check_output("/dev/null", OutputOrigin::kUser));
  EXPECT_TRUE(check_output(d.path(), OutputOrigin::kUser));
}

}  // namespace
}  // namespace harness
