#include "shmcoord/failpoint.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#ifdef SHMCOORD_FAILPOINTS
#include <fiu.h>
#endif

namespace shmcoord::failpoint {
namespace {

enum class Action { kCrash, kPause };

// "the n-th time `point` is passed, do `action`"
struct Trigger {
  std::string_view point;  // into kPoints: NUL-terminated literal
  std::uint64_t nth;
  Action action;
  std::uint64_t seen = 0;
};

std::atomic<Observer> g_observer{nullptr};
std::atomic<Observer> g_pause_observer{nullptr};
std::atomic<bool> g_disarmed{false};
std::atomic<bool> g_lease_first_fit{false};
std::atomic<std::uint64_t> g_hits{0};
std::atomic<std::uint64_t> g_crash_at{0};
// Named triggers are rare (set by a test or a harness scenario), so the hot
// path only reads `g_armed`; the list itself is guarded by a mutex.
std::atomic<bool> g_armed{false};
std::mutex g_mu;
std::vector<Trigger> g_triggers;
std::string g_env_error;
std::once_flag g_init;

// "point:n[,point:n...]" (":n" may be omitted for n = 1) into triggers.
std::string parse(std::string_view spec, Action action, std::vector<Trigger>* out) {
  while (!spec.empty()) {
    std::size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    std::uint64_t nth = 1;
    std::string_view name = item;
    if (std::size_t colon = item.rfind(':'); colon != std::string_view::npos) {
      name = item.substr(0, colon);
      std::string_view num = item.substr(colon + 1);
      auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), nth);
      if (ec != std::errc() || end != num.data() + num.size() || nth == 0) {
        return "'" + std::string(item) + "': the count after ':' must be a positive integer";
      }
    }
    const Point* found = nullptr;
    for (const Point& p : kPoints) {
      if (p.name == name) found = &p;
    }
    if (!found) return "'" + std::string(name) + "' is not a shmcoord failpoint (docs/failpoints.md)";
    out->push_back(Trigger{found->name, nth, action});
  }
  return "";
}

// Replaces the triggers of one action; caller holds g_mu.
void install(Action action, std::vector<Trigger> fresh) {
  std::erase_if(g_triggers, [&](const Trigger& t) { return t.action == action; });
  for (auto& t : fresh) g_triggers.push_back(t);
  g_armed.store(!g_triggers.empty(), std::memory_order_release);
}

void note_env_error(const char* var, const std::string& why) {
  std::string line = std::string("shmcoord: ignoring ") + var + ": " + why + "\n";
  g_env_error += (g_env_error.empty() ? "" : "; ") + std::string(var) + ": " + why;
  (void)!::write(2, line.data(), line.size());
}

void init_once() {
  std::call_once(g_init, [] {
#ifdef SHMCOORD_FAILPOINTS
    fiu_init(0);
    std::lock_guard<std::mutex> l(g_mu);
    if (const char* k = std::getenv("SHMCOORD_CRASH_AT"); k && *k) {
      std::string_view v(k);
      std::uint64_t n = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec == std::errc() && end == v.data() + v.size()) {
        g_crash_at.store(n);
      } else {
        std::vector<Trigger> t;
        if (std::string why = parse(v, Action::kCrash, &t); why.empty()) {
          install(Action::kCrash, std::move(t));
        } else {
          note_env_error("SHMCOORD_CRASH_AT", why);
        }
      }
    }
    if (const char* k = std::getenv("SHMCOORD_PAUSE_AT"); k && *k) {
      std::vector<Trigger> t;
      if (std::string why = parse(k, Action::kPause, &t); why.empty()) {
        install(Action::kPause, std::move(t));
      } else {
        note_env_error("SHMCOORD_PAUSE_AT", why);
      }
    }
    if (const char* k = std::getenv("SHMCOORD_LEASE_FIRST_FIT"); k && *k) {
      const std::string_view v(k);
      if (v == "1" || v == "0") {
        g_lease_first_fit.store(v == "1");
      } else {
        note_env_error("SHMCOORD_LEASE_FIRST_FIT", "'" + std::string(v) + "': must be 1 or 0");
      }
    }
#endif
  });
}

[[noreturn]] void die(const char* point, std::uint64_t hit) {
  if (Observer o = g_observer.load()) o(point, hit);
  ::raise(SIGKILL);
  std::abort();  // unreachable: SIGKILL cannot be caught
}

void stop(const char* point, std::uint64_t hit) {
  if (Observer o = g_pause_observer.load()) o(point, hit);
  ::raise(SIGSTOP);  // resumed here by SIGCONT
}

// The env/test triggers common to both kinds of point.
void pass(const char* point) {
  const std::uint64_t hit = g_hits.fetch_add(1, std::memory_order_relaxed) + 1;
  const std::uint64_t k = g_crash_at.load(std::memory_order_relaxed);
  if (k != 0 && hit == k) die(point, hit);
  if (!g_armed.load(std::memory_order_acquire)) return;
  Action act;
  bool fire = false;
  {
    std::lock_guard<std::mutex> l(g_mu);
    for (Trigger& t : g_triggers) {
      if (std::strcmp(t.point.data(), point) != 0) continue;
      if (++t.seen == t.nth) {
        fire = true;
        act = t.action;
      }
    }
  }
  if (!fire) return;
  if (act == Action::kCrash) die(point, hit);
  stop(point, hit);
}

}  // namespace

bool compiled_in() {
#ifdef SHMCOORD_FAILPOINTS
  return true;
#else
  return false;
#endif
}

void set_observer(Observer fn) { g_observer.store(fn); }
void set_pause_observer(Observer fn) { g_pause_observer.store(fn); }
std::uint64_t hits() { return g_hits.load(); }

void set_crash_at(std::uint64_t k) {
  init_once();
  g_crash_at.store(k);
  g_hits.store(0);
}

std::string set_crash_spec(std::string_view spec) {
  init_once();
  if (spec.empty()) {
    set_crash_at(0);
    std::lock_guard<std::mutex> l(g_mu);
    install(Action::kCrash, {});
    return "";
  }
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(spec.data(), spec.data() + spec.size(), n);
  if (ec == std::errc() && end == spec.data() + spec.size()) {
    set_crash_at(n);
    return "";
  }
  std::vector<Trigger> t;
  if (std::string why = parse(spec, Action::kCrash, &t); !why.empty()) return why;
  std::lock_guard<std::mutex> l(g_mu);
  install(Action::kCrash, std::move(t));
  return "";
}

std::string set_pause_spec(std::string_view spec) {
  init_once();
  std::vector<Trigger> t;
  if (std::string why = parse(spec, Action::kPause, &t); !why.empty()) return why;
  std::lock_guard<std::mutex> l(g_mu);
  install(Action::kPause, std::move(t));
  return "";
}

void disarm() { g_disarmed.store(true); }

bool lease_first_fit() {
#ifdef SHMCOORD_FAILPOINTS
  init_once();
  return g_lease_first_fit.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void set_lease_first_fit(bool on) {
  init_once();
  g_lease_first_fit.store(on);
}

std::string env_error() {
  init_once();
  std::lock_guard<std::mutex> l(g_mu);
  return g_env_error;
}

int check([[maybe_unused]] const char* point) {
#ifdef SHMCOORD_FAILPOINTS
  if (g_disarmed.load(std::memory_order_relaxed)) return 0;
  init_once();
  pass(point);
  if (fiu_fail(point)) {
    auto info = reinterpret_cast<std::intptr_t>(fiu_failinfo());
    return info > 0 ? static_cast<int>(info) : EACCES;
  }
#endif
  return 0;
}

void crash_window([[maybe_unused]] const char* point) {
#ifdef SHMCOORD_FAILPOINTS
  if (g_disarmed.load(std::memory_order_relaxed)) return;
  init_once();
  pass(point);
  if (fiu_fail(point)) die(point, g_hits.load());
#endif
}

}  // namespace shmcoord::failpoint
