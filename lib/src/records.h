// Byte layouts of shmcoord's shared segments, and the validators that stand
// between those bytes and the rest of the library. Any process with write access
// can scribble on a segment (or die half-way through writing one), so every read
// goes through validate_*/decode_* first: a bad record is a clear reason string,
// never a crash or an out-of-bounds read. This header deliberately avoids
// <expected> so that clang 14 (libFuzzer) can compile it against libstdc++ 12.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shmcoord::records {

// Version 2: holders and participants are identified by a kernel lease
// (lease.h) instead of pid + start time; a slot's "attached" count is derived
// from its holders; barrier seats are fixed and woken through `seq`.
// Version 3: the robust pthread mutexes are lease locks (LockWord: their
// holder is a lease, not a tid, which pid namespaces reuse); a barrier's
// generation and arrivals are one word, so a failed wait can take its arrival
// back; arrival marks are 64-bit (no wrap at 2^32 rounds); serials start at a
// random value in every registry.
inline constexpr std::uint32_t kVersion = 3;
inline constexpr std::uint64_t kRegistryMagic = 0x31474552434d4853ULL;  // "SHMCREG1"
inline constexpr std::uint64_t kBarrierMagic = 0x31524142434d4853ULL;   // "SHMCBAR1"
inline constexpr int kMaxRanks = 64;
inline constexpr int kSlots = 256;
inline constexpr std::size_t kJobKeyMax = 128;
inline constexpr std::size_t kDirBlob = 4096;
inline constexpr std::size_t kReasonMax = 256;

// A holder's state word is written last (release) when a rank joins, so a
// half-written holder is invisible; kWithdrawn is a rank that gave up without
// the registry lock (see registry.cc).
enum HolderState : std::uint32_t { kHolderEmpty = 0, kHolderAttached = 1, kHolderReleased = 2, kHolderWithdrawn = 3 };
// kActive: claimed, ranks joining. kJoined: every rank joined (decided by one
// compare-and-swap from kActive). kWithdrawn: a rank gave up lock-free (also
// one CAS from kActive), so the job fails for everyone.
enum SlotState : std::uint32_t {
  kSlotFree = 0,
  kSlotWriting = 1,
  kSlotActive = 2,
  kSlotPoisoned = 3,
  kSlotJoined = 4,
  kSlotWithdrawn = 5,
};
enum PartState : std::uint32_t { kPartEmpty = 0, kPartAttached = 1, kPartLeft = 2 };

// Who holds a registry rank or a barrier seat. Liveness is the lease: cell
// `lease_cell` of "<root>leases" locked by its owner and holding `lease_token`.
// pid, start time and pid namespace are for messages (and for telling a
// stopped owner apart when it shares our pid namespace).
struct Owner {
  std::int32_t pid;           // in the owner's pid namespace
  std::uint32_t lease_cell;
  std::uint64_t lease_token;  // nonzero
  std::uint64_t start_time;   // /proc start time, 0 if unknown
  std::uint64_t pidns;        // inode of the owner's pid namespace, 0 if unknown
};

// A lock in shared memory (lease_lock.h): `owner` is the lock_id() of the
// holder's lease, 0 when free; `seq` is the futex word lockers sleep on.
struct LockWord {
  std::uint64_t owner;
  std::uint32_t seq;
  std::uint32_t waiters;
};

struct Holder {
  Owner who;
  std::uint32_t state;  // HolderState, written last
  std::uint32_t pad;
};

struct Slot {
  std::uint32_t state;             // SlotState; kActive is written last
  std::uint32_t local_world_size;  // 1..kMaxRanks
  std::uint32_t dir_bytes;         // used bytes of dirs
  std::uint32_t poison_code;       // shmcoord::Code every rank reports once poisoned
  std::uint64_t serial;            // unique per claim: tells a reused prefix apart
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
  std::uint32_t epoch_waiters;  // ranks in (or entering) a futex wait on epoch: no wake syscall without one
  std::uint64_t next_serial;    // starts random: a rebuilt registry repeats no old claim
  std::uint64_t last_sweep_ns;  // CLOCK_MONOTONIC of the last full liveness sweep
  LockWord lock;
};

struct RegistryLayout {
  RegistryHeader h;
  Slot slots[kSlots];
};

struct Participant {
  Owner who;
  std::uint32_t state;         // PartState, written last
  std::uint32_t pad;
  std::uint64_t arrived_mark;  // generation + 1 (64-bit: never 0) of the round it is in; 0: none
};

// The barrier's round word: generation in the high 32 bits, arrivals in the
// low 32. One atomic add arrives; a failed wait takes its arrival back with a
// compare-and-swap that fails once the round is complete.
inline constexpr std::uint64_t kArrivedMask = 0xFFFFFFFFu;
inline std::uint32_t round_gen(std::uint64_t r) { return static_cast<std::uint32_t>(r >> 32); }
inline std::uint32_t round_arrived(std::uint64_t r) { return static_cast<std::uint32_t>(r & kArrivedMask); }

struct BarrierLayout {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t layout_size;
  std::uint32_t retired;
  std::uint32_t num_procs;   // fixed at creation; seats are parts[0, num_procs)
  std::uint64_t round;       // generation << 32 | arrivals in the current round
  std::uint32_t broken;      // nonzero: every wait fails with `reason`
  std::uint32_t seq;         // futex word: bumped on every release, break and detach
  std::uint32_t waiters;     // participants in (or entering) a futex wait on seq
  std::uint32_t claim;       // the prefix holding it belongs to (claim_tag of BarrierOptions::claim); 0: unknown
  LockWord lock;
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
// The longest prefix of s, at most `max` bytes, that does not cut a UTF-8
// sequence in two (s itself is assumed well-formed).
std::string_view utf8_prefix(std::string_view s, std::size_t max);
// Copies s into a field of `cap` bytes, NUL-terminated, cut at a character
// boundary: a valid string stays valid however long it was.
void copy_utf8_field(std::string_view s, char* field, std::size_t cap);

// The version of a segment that carries `magic` in its first 8 bytes and its
// version right after, or 0 if the bytes are not such a segment (too short,
// other magic). Lets callers tell "another library version's live segment"
// (never ours to rebuild or remove) from garbage.
std::uint32_t version_of(const void* p, std::size_t n, std::uint64_t magic);

// Dir blob: repeated { u8 flags (bit0 has_remote), u16 little-endian length, bytes }.
// Returns false when the dirs do not fit in kDirBlob.
bool encode_dirs(const std::vector<LocalDir>& dirs, std::uint8_t* out, std::uint32_t* used);
// nullptr on success, else why the blob is malformed.
const char* decode_dirs(const std::uint8_t* blob, std::size_t n, std::vector<LocalDir>* out);
// Calls f(path, has_remote) for each entry of a blob already validated, without
// allocating (the registry compares dirs on every acquire).
template <typename F>
void for_each_dir(const std::uint8_t* blob, std::size_t n, F f) {
  std::size_t off = 0;
  while (off + 3 <= n) {
    std::size_t len = blob[off + 1] | (static_cast<std::size_t>(blob[off + 2]) << 8);
    if (len > n - off - 3) return;
    f(std::string_view(reinterpret_cast<const char*>(blob + off + 3), len), blob[off] == 1);
    off += 3 + len;
  }
}

// nullptr if the header says "a fully initialised registry of this version".
const char* validate_registry_header(const void* p, std::size_t n);
// nullptr if an owner record can name a live process (pid and lease set).
const char* validate_owner(const Owner& o);
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
