// Byte layouts of shmcoord's shared segments, and the validators that stand
// between those bytes and the rest of the library. Any process with write access
// can scribble on a segment (or die half-way through writing one), so every read
// goes through validate_*/decode_* first: a bad record is a clear reason string,
// never a crash or an out-of-bounds read. This header deliberately avoids
// <expected> so that clang 14 (libFuzzer) can compile it against libstdc++ 12.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shmcoord::records {

inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::uint64_t kRegistryMagic = 0x31474552434d4853ULL;  // "SHMCREG1"
inline constexpr std::uint64_t kBarrierMagic = 0x31524142434d4853ULL;   // "SHMCBAR1"
inline constexpr int kMaxRanks = 64;
inline constexpr int kSlots = 256;
inline constexpr std::size_t kJobKeyMax = 128;
inline constexpr std::size_t kDirBlob = 4096;
inline constexpr std::size_t kReasonMax = 256;

enum HolderState : std::uint32_t { kHolderEmpty = 0, kHolderAttached = 1, kHolderReleased = 2 };
enum SlotState : std::uint32_t { kSlotFree = 0, kSlotWriting = 1, kSlotActive = 2, kSlotPoisoned = 3 };
enum PartState : std::uint32_t { kPartEmpty = 0, kPartAttached = 1, kPartLeft = 2 };

struct Holder {
  std::int32_t pid;
  std::uint32_t state;  // HolderState
  std::uint64_t start_time;
};

struct Slot {
  std::uint32_t state;             // SlotState; kActive is written last
  std::uint32_t local_world_size;  // 1..kMaxRanks
  std::uint32_t attached;          // ranks that ever attached, <= local_world_size
  std::uint32_t dir_bytes;         // used bytes of dirs
  std::uint64_t serial;            // unique per claim: tells a reused prefix apart
  std::uint32_t poison_code;       // shmcoord::Code every rank reports once poisoned
  std::uint32_t pad;
  char job_key[kJobKeyMax];        // NUL-terminated UTF-8
  Holder holders[kMaxRanks];       // indexed by local rank
  char reason[kReasonMax];         // why the slot is poisoned
  std::uint8_t dirs[kDirBlob];     // encode_dirs() format
};

struct RegistryHeader {
  std::uint64_t magic;  // written last at init (release): a reader seeing it sees the rest
  std::uint32_t version;
  std::uint32_t layout_size;
  std::uint32_t slot_count;
  std::uint32_t retired;  // set under the mutex before unlink: reopen by name
  std::uint32_t epoch;    // futex word: bumped on every slot change
  std::uint32_t pad;
  std::uint64_t next_serial;
  pthread_mutex_t mutex;  // robust, process-shared
};

struct RegistryLayout {
  RegistryHeader h;
  Slot slots[kSlots];
};

struct Participant {
  std::int32_t pid;
  std::uint32_t state;  // PartState
  std::uint64_t start_time;
  std::uint32_t arrived_gen;  // generation + 1 of the round it last entered (0: none)
  std::uint32_t pad;
};

struct BarrierLayout {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t layout_size;
  std::uint32_t retired;
  std::uint32_t num_procs;   // fixed at creation
  std::uint32_t generation;  // futex word: round number, bumped when a round completes
  std::uint32_t arrived;     // arrivals in the current round
  std::uint32_t broken;      // nonzero: every wait fails with `reason`
  std::uint32_t pad;
  pthread_mutex_t mutex;     // robust, process-shared
  char reason[kReasonMax];
  Participant parts[kMaxRanks];
};

struct LocalDir {
  std::string path;
  bool has_remote = false;
  bool operator==(const LocalDir&) const = default;
};

// UTF-8 well-formedness (no overlongs, no surrogates, <= U+10FFFF), no NUL.
bool valid_utf8(std::string_view s);

// Dir blob: repeated { u8 flags (bit0 has_remote), u16 little-endian length, bytes }.
// Returns false when the dirs do not fit in kDirBlob.
bool encode_dirs(const std::vector<LocalDir>& dirs, std::uint8_t* out, std::uint32_t* used);
// nullptr on success, else why the blob is malformed.
const char* decode_dirs(const std::uint8_t* blob, std::size_t n, std::vector<LocalDir>* out);

// nullptr if the header says "a fully initialised registry of this version".
const char* validate_registry_header(const void* p, std::size_t n);
// nullptr if the slot is internally consistent (a free slot is always fine).
const char* validate_slot(const Slot& s);
const char* validate_barrier(const void* p, std::size_t n);

// The original Streaming `locals` record: int32 total length (including itself),
// then UTF-8 "dir1\0dir2\0...\0<prefix decimal>". Length 0 means released.
// Read so that the harness can inspect an external subject's registry.
struct LegacyLocals {
  std::vector<std::string> dirs;
  long prefix = -1;
  bool released = false;
};
const char* decode_legacy_locals(const std::uint8_t* p, std::size_t n, LegacyLocals* out);

}  // namespace shmcoord::records
