// coord_bench: shmcoord's barrier, prefix registry and cleanup, measured against
// the baselines they replace, in one run so the numbers sit side by side:
// glibc's process-shared pthread barrier (the floor), Streaming's 7 ms tick
// barrier (what shmcoord replaced), and an anchor with no robustness at all
// (what a lock, seats and death detection cost). Build it Release, with
// -DSHMCOORD_FAILPOINTS=OFF to measure the library users ship (failpoints are
// test instrumentation: ~100 ns per window passed).
//
// Barriers are measured across real processes (fork), because a barrier whose
// participants share an address space skips exactly the costs that matter here
// (shared futex words, robust process-shared mutexes, liveness checks). Every
// shm name and lock file lives under a namespace private to this run (root
// "shmbench.<pid>.", lock dir from mkdtemp) that is cleaned up before exit.
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "shmcoord/barrier.h"
#include "shmcoord/cleanup.h"
#include "shmcoord/namespace.h"
#include "shmcoord/registry.h"

namespace {

using Clock = std::chrono::steady_clock;

shmcoord::Namespace g_ns;  // set once in main(), before any benchmark runs

// A run that has not finished by then is hung (e.g. a pthread barrier whose
// peer died); its children are killed and the benchmark reports an error.
constexpr auto kRunDeadline = std::chrono::seconds(60);

// Reads `n` one-byte tokens from `fd`. False on EOF (every writer gone) or at the deadline.
bool read_tokens(int fd, int n, Clock::time_point deadline) {
  while (n > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    char buf[64];
    ssize_t got = ::read(fd, buf, std::min<std::size_t>(sizeof buf, n));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    n -= static_cast<int>(got);
  }
  return true;
}

void put_token(int fd) {
  char c = 't';
  while (::write(fd, &c, 1) < 0 && errno == EINTR) {
  }
}

// Forks `procs` children. Each calls make_barrier(rank) (not timed: attaching is
// not a crossing), reports ready, blocks on the start gate, crosses the barrier
// `rounds` times and reports done. Returns the seconds from opening the gate to
// the last done report, or a negative value if any child failed.
//
// The gate is a pipe that every child reads and the parent closes: one close
// releases all children at once, and a child cannot pass it early.
template <typename MakeBarrier>
double run_forked(int procs, int rounds, MakeBarrier make_barrier) {
  int ready[2], gate[2], done[2];
  if (::pipe2(ready, O_CLOEXEC) || ::pipe2(gate, O_CLOEXEC) || ::pipe2(done, O_CLOEXEC)) return -1;
  const pid_t parent = ::getpid();
  std::vector<pid_t> kids;
  for (int rank = 0; rank < procs; ++rank) {
    pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      // A child must never outlive an aborted benchmark, blocked in a barrier.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(3);
      ::close(ready[0]);
      ::close(gate[1]);  // else the gate's EOF would never come
      ::close(done[0]);
      int rc = 1;
      {
        auto barrier = make_barrier(rank);
        if (barrier) {
          put_token(ready[1]);
          char c;
          while (::read(gate[0], &c, 1) < 0 && errno == EINTR) {
          }
          bool ok = true;
          for (int i = 0; i < rounds && ok; ++i) ok = barrier->cross();
          if (ok) {
            put_token(done[1]);
            rc = 0;
          }
        }
        // Leaving this scope detaches the barrier, still inside the child.
      }
      ::_exit(rc);  // skip the parent's atexit handlers and stdio buffers
    }
    kids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(gate[0]);
  ::close(done[1]);
  const auto deadline = Clock::now() + kRunDeadline;
  double seconds = -1;
  if (static_cast<int>(kids.size()) == procs && read_tokens(ready[0], procs, deadline)) {
    const auto t0 = Clock::now();
    ::close(gate[1]);
    gate[1] = -1;
    if (read_tokens(done[0], procs, deadline)) {
      seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
  }
  if (gate[1] >= 0) ::close(gate[1]);
  ::close(ready[0]);
  ::close(done[0]);
  if (seconds < 0) {
    for (pid_t k : kids) ::kill(k, SIGKILL);  // only the children forked above
  }
  for (pid_t k : kids) {
    int status = 0;
    while (::waitpid(k, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) seconds = -1;
  }
  return seconds;
}

// --- the three barriers, each behind `bool cross()` ----------------------------

class ShmcoordBarrier {
 public:
  static std::unique_ptr<ShmcoordBarrier> attach(int procs) {
    shmcoord::BarrierOptions opt;
    opt.timeout = std::chrono::milliseconds(30000);
    auto b = shmcoord::Barrier::attach(g_ns, "bench-barrier", procs, opt);
    if (!b) return nullptr;
    return std::unique_ptr<ShmcoordBarrier>(new ShmcoordBarrier(std::move(*b)));
  }
  bool cross() { return barrier_.wait().has_value(); }

 private:
  explicit ShmcoordBarrier(shmcoord::Barrier b) : barrier_(std::move(b)) {}
  shmcoord::Barrier barrier_;
};

// glibc's process-shared barrier: the floor any shm barrier is held against.
class PthreadBarrier {
 public:
  explicit PthreadBarrier(pthread_barrier_t* b) : b_(b) {}
  bool cross() {
    int r = pthread_barrier_wait(b_);
    return r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD;
  }

 private:
  pthread_barrier_t* b_;
};

// The anchor: what a barrier costs with no robustness at all. A generation
// counter and an arrival counter in shared memory, one atomic add to arrive,
// the last arrival resets the count, bumps the generation and wakes; no lock,
// no seats, no death detection, no deadline. It waits the way shmcoord does
// (spin while every participant can run at once, then a few yields, then a
// futex sleep that the releaser skips waking when nobody sleeps), so the ratio
// shmcoord / anchor is what robustness costs, not a different waiting policy.
struct AnchorWords {
  std::uint32_t arrived;
  std::uint32_t generation;  // futex word
  std::uint32_t sleepers;
};

class AnchorBarrier {
 public:
  AnchorBarrier(AnchorWords* w, int procs) : w_(w), procs_(static_cast<std::uint32_t>(procs)) {}
  bool cross() {
    std::atomic_ref<std::uint32_t> gen(w_->generation), arrived(w_->arrived), sleepers(w_->sleepers);
    const std::uint32_t g = gen.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == procs_) {
      arrived.store(0, std::memory_order_relaxed);
      gen.store(g + 1, std::memory_order_seq_cst);
      if (sleepers.load(std::memory_order_seq_cst) != 0) {
        ::syscall(SYS_futex, &w_->generation, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
      }
      return true;
    }
    static const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    for (int i = procs_ <= cpus ? 1000 : 0; i > 0; --i) {
      if (gen.load(std::memory_order_acquire) != g) return true;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    for (int i = 16; i > 0; --i) {
      if (gen.load(std::memory_order_acquire) != g) return true;
      sched_yield();
    }
    while (gen.load(std::memory_order_acquire) == g) {
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      ::syscall(SYS_futex, &w_->generation, FUTEX_WAIT, g, nullptr, nullptr, 0);
      sleepers.fetch_sub(1, std::memory_order_seq_cst);
    }
    return true;
  }

 private:
  AnchorWords* w_;
  std::uint32_t procs_;
};

// The barrier shmcoord replaces: MosaicML Streaming's original SharedBarrier.
// Three int32 counters in shm, a flock'd lock file around every update, and a
// fixed 7 ms sleep between polls, so a round costs at least one tick no matter
// how fast the participants are. (Streaming took the lock with the `filelock`
// package, which polls LOCK_NB; a blocking flock here favours the baseline.)
struct TickCounters {
  std::int32_t entered;
  std::int32_t exited;
  std::int32_t flag;  // 1: "go"
};

class TickBarrier {
 public:
  static constexpr auto kTick = std::chrono::milliseconds(7);

  static std::unique_ptr<TickBarrier> open(TickCounters* c, const std::string& lock_path,
                                           int procs) {
    // Opened per child: flock belongs to the open file description, so an fd
    // inherited across fork would be one lock shared by every process.
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return nullptr;
    return std::unique_ptr<TickBarrier>(new TickBarrier(c, fd, procs));
  }
  ~TickBarrier() { ::close(fd_); }

  bool cross() {
    lock();
    if (get(c_->entered) == 0) {
      // First to arrive: wait until every participant has left the previous
      // round, then lower the flag for this one.
      while (get(c_->exited) != procs_) {
        unlock();
        std::this_thread::sleep_for(kTick);
        lock();
      }
      set(c_->flag, 0);
    }
    set(c_->entered, get(c_->entered) + 1);
    if (get(c_->entered) == procs_) {  // last to arrive: reset and raise the flag
      set(c_->entered, 0);
      set(c_->exited, 0);
      set(c_->flag, 1);
    }
    unlock();
    while (get(c_->flag) == 0) std::this_thread::sleep_for(kTick);
    lock();
    set(c_->exited, get(c_->exited) + 1);
    unlock();
    return true;
  }

 private:
  TickBarrier(TickCounters* c, int fd, int procs) : c_(c), fd_(fd), procs_(procs) {}
  // The flag is polled outside the lock, so every access is atomic.
  static std::int32_t get(std::int32_t& w) { return std::atomic_ref<std::int32_t>(w).load(); }
  static void set(std::int32_t& w, std::int32_t v) { std::atomic_ref<std::int32_t>(w).store(v); }
  void lock() {
    while (::flock(fd_, LOCK_EX) < 0 && errno == EINTR) {
    }
  }
  void unlock() { ::flock(fd_, LOCK_UN); }

  TickCounters* c_;
  int fd_;
  int procs_;
};

// An anonymous MAP_SHARED mapping of one T, shared with forked children.
template <typename T>
T* map_shared() {
  void* p = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<T*>(p);
}

enum class Kind { kShmcoord, kPthread, kAnchor, kTick };

// Rounds per child: enough to run ~0.1 s or more for the futex barriers (at 2
// processes the anchor crosses a round in ~70 ns: a short run would measure
// one preemption), while the tick barrier manages ~100 rounds/s at best.
int rounds_for(Kind kind, int procs) {
  switch (kind) {
    case Kind::kTick: return 20;
    case Kind::kPthread: return 40000 / procs;
    default: return 400000 / procs;
  }
}

template <Kind kKind>
void BM_Barrier(benchmark::State& state) {
  const int procs = static_cast<int>(state.range(0));
  const int rounds = rounds_for(kKind, procs);
  double total_seconds = 0;
  std::int64_t total_rounds = 0;
  for (auto _ : state) {
    double s = -1;
    if constexpr (kKind == Kind::kShmcoord) {
      s = run_forked(procs, rounds, [procs](int) { return ShmcoordBarrier::attach(procs); });
    } else if constexpr (kKind == Kind::kPthread) {
      auto* b = map_shared<pthread_barrier_t>();
      if (b) {
        pthread_barrierattr_t a;
        pthread_barrierattr_init(&a);
        pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_barrier_init(b, &a, static_cast<unsigned>(procs));
        pthread_barrierattr_destroy(&a);
        s = run_forked(procs, rounds, [b](int) { return std::make_unique<PthreadBarrier>(b); });
        pthread_barrier_destroy(b);
        ::munmap(b, sizeof *b);
      }
    } else if constexpr (kKind == Kind::kAnchor) {
      auto* w = map_shared<AnchorWords>();
      if (w) {
        *w = AnchorWords{0, 0, 0};
        s = run_forked(procs, rounds, [w, procs](int) { return std::make_unique<AnchorBarrier>(w, procs); });
        ::munmap(w, sizeof *w);
      }
    } else {
      auto* c = map_shared<TickCounters>();
      if (c) {
        // As if a previous round had fully drained: nobody in, everybody out.
        *c = TickCounters{0, procs, 1};
        const std::string lock_path = g_ns.lock_path("tickbarrier.lock");
        s = run_forked(procs, rounds, [&](int) { return TickBarrier::open(c, lock_path, procs); });
        ::munmap(c, sizeof *c);
        std::filesystem::remove(lock_path);
      }
    }
    if (s <= 0) {
      state.SkipWithError("a barrier child failed or hung");
      break;
    }
    state.SetIterationTime(s);
    total_seconds += s;
    total_rounds += rounds;
  }
  if (total_seconds > 0) {
    state.counters["crossings/s"] = static_cast<double>(total_rounds) / total_seconds;
    state.counters["rounds"] = rounds;
  }
}

// Five runs each, reported as mean, median and spread (read the median): one
// fork run is a single sample, and scheduling on a small machine varies from
// run to run. Registered in main() interleaved by process count (shmcoord,
// pthread, anchor at 2, then at 4, then at 8), so a noisy stretch of the
// machine hits all three of one count alike.
void register_barriers() {
  for (int procs : {2, 4, 8}) {
    auto args = [procs](benchmark::internal::Benchmark* b) {
      b->ArgName("procs")->Arg(procs)->Iterations(1)->Repetitions(5)->ReportAggregatesOnly(true)->UseManualTime()->Unit(
          benchmark::kMillisecond);
    };
    args(benchmark::RegisterBenchmark("barrier/shmcoord", BM_Barrier<Kind::kShmcoord>));
    args(benchmark::RegisterBenchmark("barrier/pthread", BM_Barrier<Kind::kPthread>));
    args(benchmark::RegisterBenchmark("barrier/futex_anchor", BM_Barrier<Kind::kAnchor>));
  }
}
BENCHMARK(BM_Barrier<Kind::kTick>)
    ->Name("barrier/tick7ms")
    ->ArgName("procs")
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Death detection, measured beside the speed it must not cost: `procs`
// participants attach, one is SIGKILLed before entering round 0, and the time
// from the kill to the last survivor's Code::kBroken is the iteration time.
// The bound is the liveness interval (100 ms by default) plus scheduling.
void BM_BarrierDeathDetection(benchmark::State& state) {
  const int procs = static_cast<int>(state.range(0));
  double total = 0;
  for (auto _ : state) {
    int ready[2], done[2];
    if (::pipe2(ready, O_CLOEXEC) || ::pipe2(done, O_CLOEXEC)) {
      state.SkipWithError("pipe");
      break;
    }
    std::vector<pid_t> kids;
    for (int rank = 0; rank < procs; ++rank) {
      pid_t pid = ::fork();
      if (pid < 0) break;
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        ::close(ready[0]);
        ::close(done[0]);
        shmcoord::BarrierOptions opt;
        opt.timeout = std::chrono::milliseconds(30000);
        auto b = shmcoord::Barrier::attach(g_ns, "bench-death", procs, opt);
        if (!b) ::_exit(1);
        put_token(ready[1]);
        if (rank == procs - 1) {  // the victim: never enters
          ::pause();
          ::_exit(0);
        }
        auto r = b->wait();
        if (!r && r.error().code == shmcoord::Code::kBroken) put_token(done[1]);
        ::_exit(0);
      }
      kids.push_back(pid);
    }
    ::close(ready[1]);
    ::close(done[1]);
    const auto deadline = Clock::now() + kRunDeadline;
    double seconds = -1;
    if (static_cast<int>(kids.size()) == procs && read_tokens(ready[0], procs, deadline)) {
      const auto t0 = Clock::now();
      ::kill(kids.back(), SIGKILL);
      if (read_tokens(done[0], procs - 1, deadline)) seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    ::close(ready[0]);
    ::close(done[0]);
    for (pid_t k : kids) ::kill(k, SIGKILL);  // only the children forked above
    for (pid_t k : kids) {
      while (::waitpid(k, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    (void)shmcoord::clean_stale(g_ns);
    if (seconds < 0) {
      state.SkipWithError("a survivor did not get Code::kBroken");
      break;
    }
    state.SetIterationTime(seconds);
    total += seconds;
  }
  if (total > 0) state.counters["detect_ms"] = 1000 * total / static_cast<double>(state.iterations());
}
BENCHMARK(BM_BarrierDeathDetection)
    ->Name("barrier/shmcoord_death_detection")
    ->ArgName("procs")
    ->Arg(4)
    ->Arg(8)
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// --- prefix registry ---------------------------------------------------------

// Open fds of this process, not counting the one used to list them.
int count_fds() {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (auto* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n - 1;
}

shmcoord::JobSpec job(std::string key, std::string dir) {
  shmcoord::JobSpec s;
  s.job_key = std::move(key);
  s.local_rank = 0;
  s.local_world_size = 1;
  s.dirs = {{std::move(dir), false}};
  return s;
}

// acquire + release of one prefix by a single-rank job while `live` other
// prefixes are held. They are held by this same process under other job keys:
// each is a live holding (one lease per process), judged like any other job's.
// fds_after_acquire - fds_baseline is what holding costs: the process's lease.
void acquire_release(benchmark::State& state, int live) {
  auto reg = shmcoord::Registry::open(g_ns);
  if (!reg) {
    state.SkipWithError(reg.error().message.c_str());
    return;
  }
  std::vector<shmcoord::Lease> held;
  for (int i = 0; i < live; ++i) {
    auto l = reg->acquire(job("hold-" + std::to_string(i), "/bench/hold/" + std::to_string(i)));
    if (!l) {
      state.SkipWithError(l.error().message.c_str());
      break;
    }
    held.push_back(*l);
  }
  if (!state.error_occurred()) {
    const shmcoord::JobSpec mine = job("bench-job", "/bench/job");
    for (auto _ : state) {
      auto l = reg->acquire(mine);
      if (!l || !reg->release(*l)) {
        state.SkipWithError("acquire or release failed");
        break;
      }
    }
    // The fd count is taken outside the timed loop: listing /proc costs more
    // than what is being measured.
    if (auto l = reg->acquire(mine)) {
      state.counters["fds_after_acquire"] = count_fds();
      (void)reg->release(*l);
    }
  }
  // Released even after an error: they are live (we are alive), so cleanup
  // would keep them and the next benchmark would not start empty.
  for (const auto& l : held) (void)reg->release(l);
}

void BM_AcquireRelease(benchmark::State& state) {
  const int fds_baseline = count_fds();
  acquire_release(state, static_cast<int>(state.range(0)));
  state.counters["fds_baseline"] = fds_baseline;
  // The registry handle is closed by now, so cleanup can retire the registry
  // and the next benchmark starts from an empty namespace.
  (void)shmcoord::clean_stale(g_ns);
}
BENCHMARK(BM_AcquireRelease)
    ->Name("registry/acquire_release")
    ->ArgName("live")
    ->Arg(0)
    ->Arg(10)
    ->Arg(100)
    ->MinTime(0.2)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true)
    ->Unit(benchmark::kMicrosecond);

// --- cleanup -----------------------------------------------------------------

// clean_stale over 1000 stale prefix segments and no registry: what a node
// looks like after a crashed job (zero-length ones are a creator killed before
// sizing). Only clean_stale is timed.
void BM_CleanStale(benchmark::State& state) {
  const int segments = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    bool made = true;
    for (int p = 0; p < segments && made; ++p) {
      const std::string name = g_ns.shm_name(shmcoord::Namespace::prefix_suffix(p, "kind"));
      int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      made = fd >= 0 && (p % 2 == 0 || ::ftruncate(fd, 64) == 0);
      if (fd >= 0) ::close(fd);
    }
    state.ResumeTiming();
    auto rep = shmcoord::clean_stale(g_ns);
    if (!made || !rep || static_cast<int>(rep->removed.size()) < segments) {
      state.SkipWithError("creating or cleaning the stale segments failed");
      break;
    }
  }
}
BENCHMARK(BM_CleanStale)
    ->Name("cleanup/clean_stale")
    ->ArgName("segments")
    ->Arg(1000)
    ->Iterations(20)
    ->Unit(benchmark::kMillisecond);

// Removes everything under this run's namespace. clean_stale does it by the
// library's rules; the sweep after it catches what a failed benchmark may have
// left half-made (every name under the root is ours and its users are gone).
void remove_namespace() {
  (void)shmcoord::clean_stale(g_ns);
  if (DIR* d = ::opendir(shmcoord::kShmDir)) {
    std::vector<std::string> names;
    while (auto* e = ::readdir(d)) {
      if (std::string_view(e->d_name).starts_with(g_ns.root)) names.emplace_back(e->d_name);
    }
    ::closedir(d);
    for (const auto& n : names) ::shm_unlink(("/" + n).c_str());
  }
  std::error_code ec;
  std::filesystem::remove_all(g_ns.lock_dir, ec);
}

}  // namespace

int main(int argc, char** argv) {
  char dir[] = "/tmp/shmbench-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 1;
  g_ns.root = "shmbench." + std::to_string(::getpid()) + ".";
  g_ns.lock_dir = dir;
  register_barriers();
  benchmark::Initialize(&argc, argv);
  int rc = 0;
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    rc = 1;
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  remove_namespace();
  return rc;
}
