#include "shmcoord/failpoint.h"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>

#ifdef SHMCOORD_FAILPOINTS
#include <fiu.h>
#endif

namespace shmcoord::failpoint {
namespace {

Observer g_observer = nullptr;
std::uint64_t g_hits = 0;
std::uint64_t g_crash_at = 0;
bool g_init = false;

void init_once() {
  if (g_init) return;
  g_init = true;
#ifdef SHMCOORD_FAILPOINTS
  fiu_init(0);
  if (const char* k = std::getenv("SHMCOORD_CRASH_AT"); k && *k) {
    g_crash_at = std::strtoull(k, nullptr, 10);
  }
#endif
}

[[noreturn]] void die(const char* point) {
  if (g_observer) g_observer(point, g_hits);
  ::raise(SIGKILL);
  std::abort();  // unreachable: SIGKILL cannot be caught
}

}  // namespace

bool compiled_in() {
#ifdef SHMCOORD_FAILPOINTS
  return true;
#else
  return false;
#endif
}

void set_observer(Observer fn) { g_observer = fn; }
std::uint64_t hits() { return g_hits; }
void set_crash_at(std::uint64_t k) {
  init_once();
  g_crash_at = k;
  g_hits = 0;
}

int check([[maybe_unused]] const char* point) {
#ifdef SHMCOORD_FAILPOINTS
  init_once();
  ++g_hits;
  if (g_crash_at != 0 && g_hits == g_crash_at) die(point);
  if (fiu_fail(point)) {
    auto info = reinterpret_cast<std::intptr_t>(fiu_failinfo());
    return info > 0 ? static_cast<int>(info) : EACCES;
  }
#endif
  return 0;
}

void crash_window([[maybe_unused]] const char* point) {
#ifdef SHMCOORD_FAILPOINTS
  init_once();
  ++g_hits;
  if ((g_crash_at != 0 && g_hits == g_crash_at) || fiu_fail(point)) die(point);
#endif
}

}  // namespace shmcoord::failpoint
