#include "records.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace shmcoord::records {
namespace {

TEST(Records, Utf8ValidatorRejectsOverlongsSurrogatesAndNul) {
  EXPECT_TRUE(valid_utf8("plain/ascii"));
  EXPECT_TRUE(valid_utf8("caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80"));
  EXPECT_FALSE(valid_utf8(std::string_view("a\0b", 3)));
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(valid_utf8("\xe2\x82"));          // truncated
}

TEST(Records, DirsRoundTripAndOverflowIsRefused) {
  std::vector<LocalDir> in{{"/a", true}, {"/b/c", false}};
  std::uint8_t blob[kDirBlob];
  std::uint32_t used = 0;
  ASSERT_TRUE(encode_dirs(in, blob, &used));
  std::vector<LocalDir> out;
  ASSERT_EQ(decode_dirs(blob, used, &out), nullptr);
  EXPECT_EQ(out, in);
  std::vector<LocalDir> huge{{std::string(5000, 'x'), false}};
  EXPECT_FALSE(encode_dirs(huge, blob, &used));
}

TEST(Records, TruncatedOrLyingDirBlobIsRejected) {
  std::uint8_t blob[] = {0, 10, 0, 'a', 'b'};
  std::vector<LocalDir> out;
  EXPECT_STREQ(decode_dirs(blob, sizeof blob, &out), "dir entry runs past the blob");
  std::uint8_t flags[] = {7, 1, 0, 'a'};
  EXPECT_STREQ(decode_dirs(flags, sizeof flags, &out), "dir entry has unknown flags");
}

TEST(Records, GarbageRegistryHeaderIsRejectedWithAReason) {
  std::vector<std::uint8_t> junk(64, 0xAB);
  EXPECT_NE(validate_registry_header(junk.data(), junk.size()), nullptr);
  EXPECT_STREQ(validate_registry_header(junk.data(), 3), "registry shorter than its header");
}

TEST(Records, SlotWithHolderBeyondWorldSizeIsRejected) {
  static Slot s;
  std::memset(&s, 0, sizeof s);
  s.state = kSlotActive;
  s.local_world_size = 1;
  std::strcpy(s.job_key, "j");
  s.holders[5] = Holder{Owner{123, 7, 99, 1, 0}, kHolderAttached, 0};
  EXPECT_STREQ(validate_slot(s), "holder beyond local world size");
}

// A record that names a pid but no lease can never be judged alive.
TEST(Records, HolderWithoutALeaseIsRejected) {
  static Slot s;
  std::memset(&s, 0, sizeof s);
  s.state = kSlotActive;
  s.local_world_size = 2;
  std::strcpy(s.job_key, "j");
  s.holders[1] = Holder{Owner{123, 0, 0, 1, 0}, kHolderAttached, 0};
  EXPECT_STREQ(validate_slot(s), "owner has no lease");
}

// set_reason cut a 255-byte reason in the middle of a character, which made
// the poisoned slot invalid (and its reason unreadable) for every rank.
TEST(Records, Utf8FieldIsCutAtACharacterBoundaryAtEveryAlignment) {
  for (int pad = 0; pad < 4; ++pad) {
    std::string s(pad, 'a');
    while (s.size() < 600) s += "\xe2\x82\xac\xf0\x9f\x98\x80\xc3\xa9";  // 3-, 4- and 2-byte characters
    char field[kReasonMax];
    copy_utf8_field(s, field, sizeof field);
    std::string_view got(field);
    EXPECT_TRUE(valid_utf8(got)) << "pad " << pad;
    EXPECT_LE(got.size(), kReasonMax - 1);
    EXPECT_GE(got.size(), kReasonMax - 4) << "cuts at most one character";
    EXPECT_EQ(s.compare(0, got.size(), got), 0);
  }
  char small[8];
  copy_utf8_field("short", small, sizeof small);
  EXPECT_STREQ(small, "short");
}

TEST(Records, VersionOfTellsAnotherVersionFromGarbage) {
  std::uint8_t buf[16] = {};
  std::uint64_t magic = kRegistryMagic;
  std::uint32_t v = 7;
  std::memcpy(buf, &magic, 8);
  std::memcpy(buf + 8, &v, 4);
  EXPECT_EQ(version_of(buf, sizeof buf, kRegistryMagic), 7u);
  EXPECT_EQ(version_of(buf, sizeof buf, kBarrierMagic), 0u);
  EXPECT_EQ(version_of(buf, 11, kRegistryMagic), 0u);
}

TEST(Records, LegacyLocalsRecordDecodes) {
  std::string body = std::string("/a\0/b\0", 6) + "12";
  std::vector<std::uint8_t> rec(4 + body.size());
  std::int32_t total = static_cast<std::int32_t>(rec.size());
  std::memcpy(rec.data(), &total, 4);
  std::memcpy(rec.data() + 4, body.data(), body.size());
  LegacyLocals out;
  ASSERT_EQ(decode_legacy_locals(rec.data(), rec.size(), &out), nullptr);
  EXPECT_EQ(out.prefix, 12);
  EXPECT_EQ(out.dirs, (std::vector<std::string>{"/a", "/b"}));
  std::int32_t lie = 1000;
  std::memcpy(rec.data(), &lie, 4);
  EXPECT_STREQ(decode_legacy_locals(rec.data(), rec.size(), &out), "locals length runs past the segment");
}

}  // namespace
}  // namespace shmcoord::records
