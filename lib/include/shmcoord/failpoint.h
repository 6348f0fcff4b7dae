// Named failpoints ("area/object/op", listed in docs/failpoints.md) sit at every
// syscall shmcoord makes and at every crash window. They are libfiu points: a
// test or the harness enables them with fiu_enable()/FIU_ENABLE/fiu-ctrl, and a
// syscall point then fails with the errno given as failinfo (EACCES if none).
// Crash points raise SIGKILL when enabled.
//
// Systematic crash enumeration without libfiu control: SHMCOORD_CRASH_AT=k makes
// the process SIGKILL itself at the k-th point it passes (1-based, counting
// syscall and crash points). The observer, if set, hears the point name first so
// a worker can log where it died.
//
// With SHMCOORD_FAILPOINTS=OFF at build time all of this compiles to nothing.
#pragma once

#include <cstdint>

namespace shmcoord::failpoint {

using Observer = void (*)(const char* point, std::uint64_t hit);

// True if failpoints were compiled in.
bool compiled_in();
void set_observer(Observer fn);
// Number of points this process has passed so far.
std::uint64_t hits();
// Re-reads SHMCOORD_CRASH_AT (tests); 0 disables.
void set_crash_at(std::uint64_t k);

// Called by the library at each point. Returns the errno to inject (0: proceed).
int check(const char* point);
// A crash window: dies here if enabled.
void crash_window(const char* point);

}  // namespace shmcoord::failpoint
