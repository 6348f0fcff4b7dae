// read_regular_file (files.h): what the harness reads someone else wrote, so
// a FIFO, a device, a directory or a huge file is refused with a reason, at
// once, without blocking and without reading it all.
#include "files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

}  // namespace
}  // namespace harness
