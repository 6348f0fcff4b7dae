// libFuzzer target over every decoder in records.h that reads bytes shmcoord
// did not write itself: anything with write access to /dev/shm (or a process
// killed mid-write, or an external subject's legacy registry) can hand us these
// bytes, so each decoder must answer with a reason string, never a crash or an
// out-of-bounds read.
//
// The first input byte selects the decoder (modulo the count, so every byte
// value is useful); the rest is the record. Beyond "does not crash", each
// decoder's success is checked against what its callers rely on, so a decoder
// that accepts a record it should have refused is a finding too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "records.h"

namespace {

using namespace shmcoord::records;

enum Decoder : std::uint8_t {
  kRegistryPadded,  // header bytes at the start of a zero-filled, full-size registry
  kRegistryRaw,     // the bytes alone: a truncated segment
  kSlot,            // bytes memcpy'd over a zeroed Slot
  kBarrierPadded,   // like kRegistryPadded, for a barrier
  kBarrierRaw,
  kDirs,
  kLegacyLocals,
  kUtf8,
  kUtf8Prefix,      // copy_utf8_field at every field size
  kDecoderCount,
};

// A broken invariant is reported as a crash so libFuzzer saves the input.
void check(bool ok) {
  if (!ok) std::abort();
}

// A reason must be a readable, non-empty C string (strlen lets ASan vet the pointer).
void check_reason(const char* why) {
  if (why != nullptr) check(std::strlen(why) > 0);
}

// The input copied to a heap block of exactly its size: ASan then flags any read
// past the end, and the block is malloc-aligned as an mmap'd segment would be
// (libFuzzer's buffer plus the selector byte would be misaligned by one, which
// no real caller does).
std::unique_ptr<std::uint8_t[]> exact_copy(const std::uint8_t* p, std::size_t n) {
  std::unique_ptr<std::uint8_t[]> out(new std::uint8_t[n]);  // non-null even for n == 0
  if (n > 0) std::memcpy(out.get(), p, n);
  return out;
}

// Table 3-7 of the Unicode standard (well-formed UTF-8 byte sequences), written
// by ranges rather than by decoding code points, so it shares no logic with
// valid_utf8; plus valid_utf8's own rule that NUL is refused.
bool reference_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0;
  const std::size_t n = s.size();
  auto in = [&](std::size_t k, unsigned lo, unsigned hi) {
    return i + k < n && p[i + k] >= lo && p[i + k] <= hi;
  };
  while (i < n) {
    const unsigned c = p[i];
    std::size_t len = 0;
    if (c >= 0x01 && c <= 0x7F) {
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = in(1, 0x80, 0xBF) ? 2 : 0;
    } else if (c == 0xE0) {
      len = in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      len = in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
    } else if (c == 0xED) {
      len = in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;
    } else if (c == 0xF0) {
      len = in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    } else if (c >= 0xF1 && c <= 0xF3) {
      len = in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    } else if (c == 0xF4) {
      len = in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    }
    if (len == 0) return false;
    i += len;
  }
  return true;
}

void fuzz_registry_padded(const std::uint8_t* p, std::size_t n) {
  // 1.4 MB: allocated once and restored to zero after each input, because
  // clearing the whole layout per input would dominate the run.
  static auto* layout = new RegistryLayout();
  const std::size_t used = std::min(n, sizeof(RegistryLayout));
  std::memcpy(layout, p, used);
  const char* why = validate_registry_header(layout, sizeof(RegistryLayout));
  check_reason(why);
  if (why == nullptr) {
    check(layout->h.magic == kRegistryMagic && layout->h.slot_count == kSlots);
    check(layout->h.layout_size == sizeof(RegistryLayout) && layout->h.retired <= 1);
  }
  std::memset(layout, 0, used);
}

void fuzz_registry_raw(const std::uint8_t* p, std::size_t n) {
  auto buf = exact_copy(p, n);
  const char* why = validate_registry_header(buf.get(), n);
  check_reason(why);
  // Callers map the whole layout once the header validates, so it must never
  // accept fewer bytes than that.
  if (why == nullptr) check(n >= sizeof(RegistryLayout));
}

void fuzz_slot(const std::uint8_t* p, std::size_t n) {
  static auto* slot = new Slot();
  const std::size_t used = std::min(n, sizeof(Slot));
  std::memcpy(slot, p, used);
  const char* why = validate_slot(*slot);
  check_reason(why);
  if (why == nullptr && (slot->state == kSlotActive || slot->state == kSlotPoisoned)) {
    // What registry.cc then does with a valid slot: read job_key as a C string,
    // walk holders up to local_world_size, decode the dirs.
    check(slot->local_world_size >= 1 && slot->local_world_size <= kMaxRanks);
    check(::strnlen(slot->job_key, kJobKeyMax) < kJobKeyMax);
    std::vector<LocalDir> dirs;
    check(decode_dirs(slot->dirs, slot->dir_bytes, &dirs) == nullptr);
    for (std::uint32_t r = 0; r < kMaxRanks; ++r) {
      const Holder& h = slot->holders[r];
      if (r >= slot->local_world_size) check(h.state == kHolderEmpty);
      // Liveness reads the lease named here: a holder must name one.
      if (h.state != kHolderEmpty) check(h.who.pid > 0 && h.who.lease_token != 0);
    }
  }
  std::memset(slot, 0, used);
}

void check_barrier(const BarrierLayout& b, const char* why) {
  check_reason(why);
  if (why != nullptr) return;
  check(b.num_procs >= 1 && b.num_procs <= kMaxRanks && round_arrived(b.round) <= b.num_procs);
  if (b.broken) check(::strnlen(b.reason, kReasonMax) < kReasonMax);
  // Seats are parts[0, num_procs): the barrier only ever looks there.
  for (std::uint32_t i = 0; i < kMaxRanks; ++i) {
    if (i >= b.num_procs) check(b.parts[i].state == kPartEmpty);
    if (b.parts[i].state != kPartEmpty) check(b.parts[i].who.pid > 0 && b.parts[i].who.lease_token != 0);
  }
}

void fuzz_barrier_padded(const std::uint8_t* p, std::size_t n) {
  static auto* layout = new BarrierLayout();
  const std::size_t used = std::min(n, sizeof(BarrierLayout));
  std::memcpy(layout, p, used);
  check_barrier(*layout, validate_barrier(layout, sizeof(BarrierLayout)));
  std::memset(layout, 0, used);
}

void fuzz_barrier_raw(const std::uint8_t* p, std::size_t n) {
  auto buf = exact_copy(p, n);
  const char* why = validate_barrier(buf.get(), n);
  if (why == nullptr) {
    check(n >= sizeof(BarrierLayout));
    check_barrier(*reinterpret_cast<const BarrierLayout*>(buf.get()), why);
  }
  check_reason(why);
}

void fuzz_dirs(const std::uint8_t* p, std::size_t n) {
  auto buf = exact_copy(p, n);
  std::vector<LocalDir> dirs;
  const char* why = decode_dirs(buf.get(), n, &dirs);
  check_reason(why);
  if (why != nullptr) return;
  for (const auto& d : dirs) check(!d.path.empty() && valid_utf8(d.path));
  // The blob format has exactly one encoding of a dir list: decoding then
  // encoding must give the same bytes back.
  std::vector<std::uint8_t> again(kDirBlob);
  std::uint32_t used = 0;
  check(encode_dirs(dirs, again.data(), &used));
  check(used == n && (n == 0 || std::memcmp(again.data(), buf.get(), n) == 0));
}

void fuzz_legacy_locals(const std::uint8_t* p, std::size_t n) {
  auto buf = exact_copy(p, n);
  LegacyLocals out;
  const char* why = decode_legacy_locals(buf.get(), n, &out);
  check_reason(why);
  if (why != nullptr) return;
  if (out.released) {
    check(out.dirs.empty() && out.prefix == -1);
    return;
  }
  check(out.prefix >= 0 && out.prefix <= 999999999);
  std::size_t body = 0;
  for (const auto& d : out.dirs) {
    check(valid_utf8(d));
    body += d.size() + 1;  // the dir and its NUL
  }
  // The dirs, their NULs and a non-empty prefix all lie inside the record.
  std::int32_t total;
  std::memcpy(&total, buf.get(), sizeof total);
  check(static_cast<std::size_t>(total) <= n && 4 + body + 1 <= static_cast<std::size_t>(total));
}

void fuzz_utf8(const std::uint8_t* p, std::size_t n) {
  auto buf = exact_copy(p, n);
  std::string_view s(reinterpret_cast<const char*>(buf.get()), n);
  check(valid_utf8(s) == reference_utf8(s));
}

// A string cut to fit a field stays valid UTF-8 and is a prefix of the input
// no more than one character short (reasons and job keys are cut this way).
void fuzz_utf8_prefix(const std::uint8_t* p, std::size_t n) {
  if (n < 1) return;
  const std::size_t cap = 1 + p[0] % 64;
  auto buf = exact_copy(p + 1, n - 1);
  std::string_view s(reinterpret_cast<const char*>(buf.get()), n - 1);
  if (!valid_utf8(s)) return;
  std::vector<char> field(cap);
  copy_utf8_field(s, field.data(), cap);
  std::string_view got(field.data(), ::strnlen(field.data(), cap));
  check(got.size() < cap && valid_utf8(got) && s.substr(0, got.size()) == got);
  check(got.size() == s.size() || got.size() + 4 > cap - 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t* p = data + 1;
  const std::size_t n = size - 1;
  switch (data[0] % kDecoderCount) {
    case kRegistryPadded:
      fuzz_registry_padded(p, n);
      break;
    case kRegistryRaw:
      fuzz_registry_raw(p, n);
      break;
    case kSlot:
      fuzz_slot(p, n);
      break;
    case kBarrierPadded:
      fuzz_barrier_padded(p, n);
      break;
    case kBarrierRaw:
      fuzz_barrier_raw(p, n);
      break;
    case kDirs:
      fuzz_dirs(p, n);
      break;
    case kLegacyLocals:
      fuzz_legacy_locals(p, n);
      break;
    case kUtf8:
      fuzz_utf8(p, n);
      break;
    case kUtf8Prefix:
      fuzz_utf8_prefix(p, n);
      break;
  }
  return 0;
}
