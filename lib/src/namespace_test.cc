#include "shmcoord/namespace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace shmcoord {
namespace {

Namespace with_root(std::string root) {
  Namespace ns;
  ns.root = std::move(root);
  ns.lock_dir = "/tmp";
  return ns;
}

Status validate_root(std::string root) { return with_root(std::move(root)).validate(); }

// Names are "<root><suffix>" and listed by string prefix, so a root that is a
// prefix of another root ("exp1" of "exp10", "a." of "a.b.") took the other
// namespace's registry, leases file and segments for its own.
TEST(Namespace, RootWithoutATrailingDotIsRefusedBecauseItCouldPrefixAnother) {
  for (const char* root : {"exp1", "shmcoord", "a.b"}) {
    auto v = validate_root(root);
    ASSERT_FALSE(v) << root;
    EXPECT_EQ(v.error().code, Code::kInvalidArgument) << root;
    EXPECT_NE(v.error().message.find("must end with '.'"), std::string::npos) << v.error().message;
  }
}

// "a." and "a.b." are both valid: a.b.'s names seen from a. carry a dot in
// their suffix, which no name of a. does (suffixes are dot-free). The one
// exception would be "<root>init.lock", so a root may not end in "init.".
TEST(Namespace, NestedRootsAreValidButARootEndingInInitIsNot) {
  EXPECT_TRUE(validate_root("a."));
  EXPECT_TRUE(validate_root("a.b."));
  EXPECT_TRUE(validate_root("shmcoord.0."));
  auto v = validate_root("a.init.");
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, Code::kInvalidArgument);
  EXPECT_NE(v.error().message.find("init"), std::string::npos) << v.error().message;
  EXPECT_FALSE(validate_root("init."));
  EXPECT_FALSE(validate_root(".."));
}

TEST(Namespace, SuffixesOfTheNamespaceAreDotFreeAndNeverItsOwnObjects) {
  EXPECT_TRUE(Namespace::valid_suffix("000003_barrier"));
  EXPECT_TRUE(Namespace::valid_suffix("standalone-barrier_1"));
  EXPECT_FALSE(Namespace::valid_suffix(""));
  EXPECT_FALSE(Namespace::valid_suffix("b.registry"));
  EXPECT_FALSE(Namespace::valid_suffix("init.lock"));
  EXPECT_FALSE(Namespace::valid_suffix("registry"));
  EXPECT_FALSE(Namespace::valid_suffix("leases"));
  EXPECT_FALSE(Namespace::valid_suffix("a/b"));
}

// Every shm object would also be a "lock file": cleanup flock-tested the live
// registry and leases file, found them unheld and unlinked both.
TEST(Namespace, LockDirThatIsTheShmDirIsRefused) {
  Namespace ns = with_root("a.");
  ns.lock_dir = "/dev/shm";
  auto v = ns.validate();
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, Code::kInvalidArgument);
  EXPECT_NE(v.error().message.find("/dev/shm"), std::string::npos) << v.error().message;
  ns.lock_dir = "/dev/shm/";
  EXPECT_FALSE(ns.validate());
  ns.lock_dir = "/dev/../dev/shm";
  EXPECT_FALSE(ns.validate());
}

TEST(Namespace, LockDirThatIsASymlinkToTheShmDirIsRefused) {
  char tmpl[] = "/tmp/shmct-nslink-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string link = std::string(tmpl) + "/shm";
  ASSERT_EQ(::symlink("/dev/shm", link.c_str()), 0);
  Namespace ns = with_root("a.");
  ns.lock_dir = link;
  auto v = ns.validate();
  std::filesystem::remove_all(tmpl);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, Code::kInvalidArgument);
}

TEST(Namespace, LockDirThatDoesNotExistIsAcceptedAndHoldsNoLockFiles) {
  Namespace ns = with_root("a.");
  ns.lock_dir = "/tmp/shmct-does-not-exist-" + std::to_string(::getpid());
  EXPECT_TRUE(ns.validate());
}

}  // namespace
}  // namespace shmcoord
