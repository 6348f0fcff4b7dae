#include "records.h"

#include <cstring>

namespace shmcoord::records {

bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0, n = s.size();
  while (i < n) {
    unsigned c = p[i];
    if (c == 0) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    std::uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      unsigned cc = p[i + k];
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string_view utf8_prefix(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t n = max;
  // Back up over continuation bytes to the start of the cut sequence.
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

void copy_utf8_field(std::string_view s, char* field, std::size_t cap) {
  std::string_view cut = utf8_prefix(s, cap - 1);
  std::memcpy(field, cut.data(), cut.size());
  field[cut.size()] = '\0';
}

std::uint32_t version_of(const void* p, std::size_t n, std::uint64_t magic) {
  std::uint64_t m;
  std::uint32_t v;
  if (n < sizeof m + sizeof v) return 0;
  std::memcpy(&m, p, sizeof m);
  if (m != magic) return 0;
  std::memcpy(&v, static_cast<const char*>(p) + sizeof m, sizeof v);
  return v;
}

bool encode_dirs(const std::vector<LocalDir>& dirs, std::uint8_t* out, std::uint32_t* used) {
  std::size_t off = 0;
  for (const auto& d : dirs) {
    if (d.path.size() > 0xFFFF || off + 3 + d.path.size() > kDirBlob) return false;
    out[off] = d.has_remote ? 1 : 0;
    out[off + 1] = static_cast<std::uint8_t>(d.path.size() & 0xFF);
    out[off + 2] = static_cast<std::uint8_t>(d.path.size() >> 8);
    std::memcpy(out + off + 3, d.path.data(), d.path.size());
    off += 3 + d.path.size();
  }
  *used = static_cast<std::uint32_t>(off);
  return true;
}

const char* decode_dirs(const std::uint8_t* blob, std::size_t n, std::vector<LocalDir>* out) {
  out->clear();
  if (n > kDirBlob) return "dir blob longer than its field";
  std::size_t off = 0;
  while (off < n) {
    if (n - off < 3) return "dir entry header truncated";
    std::uint8_t flags = blob[off];
    if (flags > 1) return "dir entry has unknown flags";
    std::size_t len = blob[off + 1] | (static_cast<std::size_t>(blob[off + 2]) << 8);
    if (len == 0) return "dir entry has zero length";
    if (len > n - off - 3) return "dir entry runs past the blob";
    std::string_view path(reinterpret_cast<const char*>(blob + off + 3), len);
    if (!valid_utf8(path)) return "dir entry is not valid UTF-8";
    out->push_back(LocalDir{std::string(path), flags == 1});
    off += 3 + len;
  }
  return nullptr;
}

namespace {

bool terminated_utf8(const char* field, std::size_t cap) {
  const void* nul = std::memchr(field, '\0', cap);
  if (!nul) return false;
  return valid_utf8(std::string_view(field, static_cast<const char*>(nul) - field));
}

template <typename T>
bool read_pod(const void* p, std::size_t n, std::size_t off, T* out) {
  if (off + sizeof(T) > n) return false;
  std::memcpy(out, static_cast<const char*>(p) + off, sizeof(T));
  return true;
}

}  // namespace

const char* validate_registry_header(const void* p, std::size_t n) {
  RegistryHeader h;
  if (!read_pod(p, n, 0, &h)) return "registry shorter than its header";
  if (h.magic != kRegistryMagic) return "registry magic missing (uninitialised or not a registry)";
  if (h.version != kVersion) return "registry version differs from this library's";
  if (h.layout_size != sizeof(RegistryLayout) || n < sizeof(RegistryLayout)) return "registry size differs from its layout";
  if (h.slot_count != kSlots) return "registry slot count differs";
  if (h.retired > 1) return "registry retired flag out of range";
  return nullptr;
}

const char* validate_owner(const Owner& o) {
  if (o.pid <= 0) return "owner pid not positive";
  if (o.lease_token == 0) return "owner has no lease";
  return nullptr;
}

const char* validate_slot(const Slot& s) {
  if (s.state == kSlotFree) return nullptr;
  if (s.state > kSlotWithdrawn) return "slot state out of range";
  if (s.state == kSlotWriting) return nullptr;  // repaired by whoever holds the lock
  if (s.local_world_size < 1 || s.local_world_size > kMaxRanks) return "slot local world size out of range";
  if (s.dir_bytes > kDirBlob) return "slot dir length exceeds its field";
  if (!terminated_utf8(s.job_key, kJobKeyMax) || s.job_key[0] == '\0') return "slot job key is not a NUL-terminated UTF-8 string";
  if (!terminated_utf8(s.reason, kReasonMax) && s.reason[0] != '\0') return "slot reason is not a NUL-terminated UTF-8 string";
  for (std::uint32_t r = 0; r < kMaxRanks; ++r) {
    const Holder& h = s.holders[r];
    if (h.state > kHolderWithdrawn) return "holder state out of range";
    if (h.state != kHolderEmpty) {
      if (r >= s.local_world_size) return "holder beyond local world size";
      if (const char* why = validate_owner(h.who)) return why;
    }
  }
  std::vector<LocalDir> dirs;
  if (const char* why = decode_dirs(s.dirs, s.dir_bytes, &dirs)) return why;
  return nullptr;
}

const char* validate_barrier(const void* p, std::size_t n) {
  if (n < sizeof(BarrierLayout)) return "barrier shorter than its layout";
  const auto* b = static_cast<const BarrierLayout*>(p);
  std::uint64_t magic;
  std::memcpy(&magic, &b->magic, sizeof magic);
  if (magic != kBarrierMagic) return "barrier magic missing (uninitialised or not a barrier)";
  if (b->version != kVersion) return "barrier version differs from this library's";
  if (b->layout_size != sizeof(BarrierLayout)) return "barrier size differs from its layout";
  if (b->num_procs < 1 || b->num_procs > kMaxRanks) return "barrier process count out of range";
  std::uint64_t round;
  std::memcpy(&round, &b->round, sizeof round);
  if (round_arrived(round) > b->num_procs) return "barrier arrivals exceed process count";
  if (b->retired > 1) return "barrier retired flag out of range";
  for (std::uint32_t i = 0; i < kMaxRanks; ++i) {
    const Participant& q = b->parts[i];
    if (q.state > kPartLeft) return "participant state out of range";
    if (q.state == kPartEmpty) continue;
    if (i >= b->num_procs) return "participant beyond the process count";
    if (const char* why = validate_owner(q.who)) return why;
  }
  if (b->broken && !terminated_utf8(b->reason, kReasonMax)) return "barrier reason is not a NUL-terminated UTF-8 string";
  return nullptr;
}

const char* decode_legacy_locals(const std::uint8_t* p, std::size_t n, LegacyLocals* out) {
  *out = LegacyLocals{};
  if (n < 4) return "locals record shorter than its length field";
  std::int32_t total;
  std::memcpy(&total, p, 4);
  if (total == 0) {
    out->released = true;
    return nullptr;
  }
  if (total < 4) return "locals length is negative or below its own size";
  if (static_cast<std::size_t>(total) > n) return "locals length runs past the segment";
  std::string_view body(reinterpret_cast<const char*>(p + 4), static_cast<std::size_t>(total) - 4);
  std::size_t start = 0;
  std::vector<std::string_view> parts;
  for (std::size_t i = 0; i <= body.size(); ++i) {
    if (i == body.size() || body[i] == '\0') {
      parts.push_back(body.substr(start, i - start));
      start = i + 1;
    }
  }
  std::string_view last = parts.back();
  parts.pop_back();
  if (last.empty() || last.size() > 9) return "locals prefix missing or too long";
  long prefix = 0;
  for (char c : last) {
    if (c < '0' || c > '9') return "locals prefix is not a decimal number";
    prefix = prefix * 10 + (c - '0');
  }
  for (auto d : parts) {
    if (!valid_utf8(d)) return "locals dir is not valid UTF-8";
    out->dirs.emplace_back(d);
  }
  out->prefix = prefix;
  return nullptr;
}

}  // namespace shmcoord::records
