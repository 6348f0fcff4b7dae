#include "concurrency.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace harness {
namespace {

constexpr std::int64_t kProbeSleepNs = 5'000'000;

std::int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Reads a small /proc file into buf (NUL-terminated); false if it cannot.
bool read_proc(const char* path, char* buf, std::size_t size) {
  std::FILE* f = std::fopen(path, "re");
  if (!f) return false;
  const std::size_t n = std::fread(buf, 1, size - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  return n > 0;
}

// PSI: microseconds in which some runnable task waited for a CPU, since boot.
std::int64_t psi_cpu_some_us() {
  char buf[512];
  if (!read_proc("/proc/pressure/cpu", buf, sizeof buf)) return -1;
  if (std::strncmp(buf, "some ", 5) != 0) return -1;
  const char* total = std::strstr(buf, "total=");
  const char* eol = std::strchr(buf, '\n');
  if (!total || (eol && total > eol)) return -1;
  return std::strtoll(total + 6, nullptr, 10);
}

// Runnable tasks now (the 4th field of /proc/loadavg, "running/total").
int runnable_now() {
  char buf[256];
  if (!read_proc("/proc/loadavg", buf, sizeof buf)) return -1;
  double a, b, c;
  int running = 0, total = 0;
  if (std::sscanf(buf, "%lf %lf %lf %d/%d", &a, &b, &c, &running, &total) != 5) return -1;
  return running;
}

// Keeps the largest two values seen in a window.
void record(std::atomic<std::int64_t>& worst, std::atomic<std::int64_t>& second, std::int64_t v) {
  std::int64_t w = worst.load(std::memory_order_relaxed);
  if (v > w) {
    worst.store(v, std::memory_order_relaxed);
    v = w;
  }
  if (v > second.load(std::memory_order_relaxed)) second.store(v, std::memory_order_relaxed);
}

}  // namespace

LoadProbe::LoadProbe() {
  cores_ = std::max(1, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  last_psi_us_ = psi_cpu_some_us();
  last_t_ns_ = mono_ns();
  thread_ = std::thread([this] { run(); });
}

LoadProbe::~LoadProbe() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void LoadProbe::run() {
  while (!stop_.load(std::memory_order_relaxed)) {
    const std::int64_t t0 = mono_ns();
    timespec d{0, kProbeSleepNs};
    while (::clock_nanosleep(CLOCK_MONOTONIC, 0, &d, &d) == EINTR) {
    }
    const std::int64_t late = mono_ns() - t0 - kProbeSleepNs;
    // Only this thread writes them between two samples; sample() resets them.
    record(worst_ns_, second_ns_, std::max<std::int64_t>(0, late));
    wakeups_.fetch_add(1, std::memory_order_relaxed);
  }
}

LoadSample LoadProbe::sample() {
  LoadSample s;
  const std::int64_t now = mono_ns();
  s.seconds = static_cast<double>(now - last_t_ns_) / 1e9;
  const std::int64_t psi = psi_cpu_some_us();
  if (psi >= 0 && last_psi_us_ >= 0 && s.seconds > 0) {
    s.from_psi = true;
    s.cpu_pressure = std::clamp(static_cast<double>(psi - last_psi_us_) / (s.seconds * 1e6), 0.0, 1.0);
  } else if (const int r = runnable_now(); r >= 0) {
    // This process is one of the runnable ones.
    s.cpu_pressure = std::clamp(static_cast<double>(r - 1 - cores_) / cores_, 0.0, 1.0);
  }
  last_psi_us_ = psi;
  last_t_ns_ = now;
  // The second worst: one page fault or one long exec does not make a trend.
  const std::int64_t worst = worst_ns_.exchange(0), second = second_ns_.exchange(0);
  s.wakeups = wakeups_.exchange(0);
  s.wake_late_ms = static_cast<double>(s.wakeups >= 4 ? second : worst) / 1e6;
  return s;
}

AdaptiveConcurrency::AdaptiveConcurrency(Config c) : c_(c) {
  c_.min = std::max(1, c_.min);
  c_.max = std::max(c_.min, c_.max);
  target_ = std::clamp(c_.start, c_.min, c_.max);
  lowest_ = highest_ = target_;
}

void AdaptiveConcurrency::back_off(double now_s) {
  target_ = std::max(c_.min, std::min(target_ - 1, static_cast<int>(std::floor(target_ * c_.backoff_factor))));
  slow_start_ = false;
  hold_until_ = now_s + c_.hold_s;
  last_backoff_ = now_s;
  ++backoffs_;
  lowest_ = std::min(lowest_, target_);
}

int AdaptiveConcurrency::update(const LoadSample& s, double now_s, int wanted) {
  pressure_ = pressure_ < 0 ? s.cpu_pressure : (pressure_ + s.cpu_pressure) / 2;
  // After a back-off the trials it stopped starting take a moment to show:
  // judge the machine again only after settle_s.
  const bool settled = now_s - last_backoff_ >= c_.settle_s;
  if (settled && (pressure_ > c_.backoff_pressure || s.wake_late_ms > c_.backoff_late_ms)) {
    back_off(now_s);
  } else if (pressure_ < c_.grow_pressure && s.wake_late_ms < c_.grow_late_ms &&
             window_wait_ms_ < c_.grow_wait_ms && now_s >= hold_until_ && wanted >= target_ &&
             target_ < c_.max) {
    // Only when the run fills what it has: a target nobody uses proves nothing.
    target_ = std::min(c_.max, slow_start_ ? target_ + std::max(1, target_ / 4) : target_ + 1);
    highest_ = std::max(highest_, target_);
  }
  window_wait_ms_ = 0;
  return target_;
}

void AdaptiveConcurrency::trial_lateness(double late_ms, double now_s) {
  // One back-off per hold period: a burst of late trials is one signal.
  if (late_ms > c_.trial_late_ms && now_s >= hold_until_ - c_.hold_s / 2) back_off(now_s);
}

void AdaptiveConcurrency::trial_cpu_wait(double cpu_wait_ms, double now_s) {
  window_wait_ms_ = std::max(window_wait_ms_, cpu_wait_ms);
  if (cpu_wait_ms > c_.backoff_wait_ms && now_s >= hold_until_ - c_.hold_s / 2) back_off(now_s);
}

}  // namespace harness
