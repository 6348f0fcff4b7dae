#include "worker.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>

#include "events.h"
#include "shmcoord/barrier.h"
#include "shmcoord/cleanup.h"
#include "shmcoord/failpoint.h"
#include "shmcoord/registry.h"
#include "shmcoord/tracker.h"

#ifdef SHMCOORD_FAILPOINTS
#include <fiu-control.h>
#include <fiu.h>
#endif

extern char** environ;

namespace harness {
namespace {

using Json = nlohmann::json;

std::string env_or(const char* k, const std::string& def = "") {
  const char* v = std::getenv(k);
  return v ? std::string(v) : def;
}

int env_int(const char* k, int def) {
  const char* v = std::getenv(k);
  return v && *v ? std::atoi(v) : def;
}

// The event log and identity, reachable from the failpoint observer.
struct Ctx {
  EventLog log;
  int job = -1, rank = -1, local_rank = -1;
  int worker = -1;  // >= 0: this process is loader worker #worker of its rank
  std::int64_t next_id = 0;

  Json base(const char* type) const {
    Json e{{"type", type}, {"pid", static_cast<int>(::getpid())}, {"job", job}, {"rank", rank}, {"local_rank", local_rank}};
    if (worker >= 0) e["worker"] = worker;
    return e;
  }
  // An op's invoke / completion with this thread's cumulative wait for a CPU
  // (docs/worker-protocol.md, cpu_wait_ns). The wait is read after t at an
  // invoke and before t at a completion, so the difference over an op never
  // counts a wait from outside it: an op's latency is never excused by more
  // than the scheduler really took from it.
  // Its time on a CPU (cpu_run_ns) is read with it: over an op the
  // difference is what the op itself ran, plus the few microseconds of
  // logging between the reads.
  void emit_op_event(Json e, bool opening) const {
    CpuTimes cpu;
    if (opening) {
      e["t"] = mono_ns();
      cpu = cpu_times();
    } else {
      cpu = cpu_times();
      e["t"] = mono_ns();
    }
    if (cpu.wait_ns >= 0) e["cpu_wait_ns"] = cpu.wait_ns;
    if (cpu.run_ns >= 0) e["cpu_run_ns"] = cpu.run_ns;
    log.emit(std::move(e));
  }
};
Ctx* g_ctx = nullptr;

void on_crash_point(const char* point, std::uint64_t hit) {
  if (!g_ctx) return;
  Json e = g_ctx->base("point");
  e["name"] = point;
  e["hit"] = hit;
  g_ctx->log.emit(std::move(e));
}

// A launcher stops a rank with SIGTERM (or SIGINT), and as the rank's parent
// it usually reaps it before the supervisor can read the status from the
// zombie. So the rank says, from the handler, which signal ended it and who
// sent it (si_pid, in the rank's own pid namespace), then dies of it exactly
// as it would have without a handler (SA_RESETHAND, and the re-raised signal
// stays blocked until the handler returns). Only async-signal-safe calls: the
// line is formatted by hand and written with one write(2) to the O_APPEND log.
char* put_int(char* at, const char* end, std::int64_t v) {
  char digits[24];
  int n = 0;
  const bool neg = v < 0;
  std::uint64_t u = neg ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  do {
    digits[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0 && n < 24);
  if (neg && at < end) *at++ = '-';
  while (n > 0 && at < end) *at++ = digits[--n];
  return at;
}

char* put_str(char* at, const char* end, const char* s) {
  while (*s != '\0' && at < end) *at++ = *s++;
  return at;
}

void on_stop_signal(int sig, siginfo_t* info, void*) {
  const int saved = errno;
  if (g_ctx != nullptr && g_ctx->log.ok()) {
    char buf[320];
    char* at = buf;
    const char* end = buf + sizeof buf;
    at = put_str(at, end, "{\"type\":\"signalled\",\"pid\":");
    at = put_int(at, end, ::getpid());
    for (auto [key, v] : {std::pair{",\"job\":", g_ctx->job}, std::pair{",\"rank\":", g_ctx->rank},
                          std::pair{",\"local_rank\":", g_ctx->local_rank}}) {
      at = put_str(at, end, key);
      at = put_int(at, end, v);
    }
    if (g_ctx->worker >= 0) {
      at = put_str(at, end, ",\"worker\":");
      at = put_int(at, end, g_ctx->worker);
    }
    at = put_str(at, end, ",\"signal\":");
    at = put_int(at, end, sig);
    at = put_str(at, end, ",\"sender\":");
    at = put_int(at, end, info != nullptr ? info->si_pid : 0);
    at = put_str(at, end, ",\"t\":");
    at = put_int(at, end, mono_ns());
    at = put_str(at, end, "}\n");
    // Padded as EventLog::emit pads: a line that crosses a page of the file
    // is torn by a SIGKILL that comes during the write (the teardown's, a
    // launcher's), and a torn line makes the trial unknown. 4096: every
    // larger page's boundary is one of these too (sysconf is not
    // async-signal-safe).
    if (at < end) write_padded_line(g_ctx->log.fd(), buf, static_cast<std::size_t>(at - buf), 4096);
  }
  errno = saved;
  ::raise(sig);
}

void witness_stop_signals() {
  struct sigaction sa{};
  sa.sa_sigaction = &on_stop_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT}) ::sigaction(sig, &sa, nullptr);
}

class Op {
 public:
  Op(Ctx& c, const char* name, Json args = Json::object()) : c_(c), name_(name), id_(++c.next_id) {
    Json e = c_.base("invoke");
    e["op"] = name_;
    e["id"] = id_;
    e["args"] = std::move(args);
    c_.emit_op_event(std::move(e), true);
  }
  void ok(Json value = Json::object()) {
    Json e = c_.base("ok");
    e["op"] = name_;
    e["id"] = id_;
    e["value"] = std::move(value);
    c_.emit_op_event(std::move(e), false);
  }
  void fail(const shmcoord::Error& err) {
    Json e = c_.base("fail");
    e["op"] = name_;
    e["id"] = id_;
    e["error"] = {{"code", std::string(shmcoord::code_name(err.code))}, {"message", err.message}, {"errno", err.sys_errno}};
    c_.emit_op_event(std::move(e), false);
  }

 private:
  Ctx& c_;
  const char* name_;
  std::int64_t id_;
};

void sleep_range(std::mt19937_64& rng, const Json& r) {
  if (!r.is_array() || r.size() != 2) return;
  std::int64_t lo = r[0].get<std::int64_t>(), hi = r[1].get<std::int64_t>();
  std::int64_t ms = hi > lo ? std::uniform_int_distribution<std::int64_t>(lo, hi)(rng) : lo;
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Open fds of this process. Listing /proc/self/fd needs an fd of its own; at
// the RLIMIT_NOFILE limit (the emfile fault) it fails, and then every fd
// below the limit is probed instead, which needs none.
int count_fds() {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) ++n;
  if (!ec) return n - 1;  // the iterator's own fd
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  n = 0;
  for (rlim_t fd = 0; fd < rl.rlim_cur && fd < (1u << 20); ++fd) n += ::fcntl(static_cast<int>(fd), F_GETFD) >= 0 ? 1 : 0;
  return n;
}

Json clean_value(const shmcoord::CleanReport& r) {
  Json v = {{"removed", Json::array()}, {"kept", Json::array()}, {"skipped", Json::array()}};
  for (const auto& e : r.removed) v["removed"].push_back(e.name);
  for (const auto& e : r.kept) v["kept"].push_back(e.name);
  for (const auto& e : r.skipped) v["skipped"].push_back(e.name);
  return v;
}

// A segment this worker created, as fstat(2) saw it then.
struct Created {
  std::string name;  // "/<root><prefix>_<kind>"
  dev_t dev;
  ino_t ino;
};

Json identity(const std::string& name, const struct stat& st) {
  return {{"name", name}, {"dev", static_cast<std::uint64_t>(st.st_dev)}, {"ino", static_cast<std::uint64_t>(st.st_ino)}};
}

// The witness (docs/worker-protocol.md): what stat(2) shows now of every
// segment this worker created. It reports, the checker judges.
void witness(Ctx& c, const std::vector<Created>& created, const char* when, const Json& dataset) {
  if (created.empty()) return;
  Json args = {{"when", when}};
  if (!dataset.is_null()) args["dataset"] = dataset;
  Op op(c, "witness", std::move(args));
  Json seen = Json::array();
  for (const Created& s : created) {
    struct stat st;
    std::string path = std::string(shmcoord::kShmDir) + s.name;
    if (::stat(path.c_str(), &st) == 0) {
      seen.push_back(identity(s.name, st));
    } else if (errno == ENOENT) {
      seen.push_back({{"name", s.name}, {"missing", true}});
    } else {
      int e = errno;
      seen.push_back({{"name", s.name}, {"error", std::string(strerrorname_np(e) ? strerrorname_np(e) : "errno") + ": " + std::strerror(e)}});
    }
  }
  op.ok({{"segments", std::move(seen)}});
}

bool run_clean(Ctx& c, const shmcoord::Namespace& ns) {
  Op op(c, "clean");
  auto r = shmcoord::clean_stale(ns);
  if (!r) {
    op.fail(r.error());
    return false;
  }
  op.ok(clean_value(*r));
  return true;
}

// Settings a fault gives one rank. A launcher starts every rank with one
// environment, so a rank it started finds its own under its LOCAL_RANK in
// SHMSTRESS_RANK_ENV; a rank the agent restarts is a new process that never
// met the fault, so the fault knobs apply to the first incarnation only.
// The failpoint triggers among them aim at this one process (a child is not
// it: see the pthread_atfork handler in run() and start_loaders).
constexpr const char* kTriggerKnobs[] = {"SHMCOORD_CRASH_AT", "SHMCOORD_PAUSE_AT", "SHMSTRESS_FIU_ENABLE"};
constexpr const char* kOtherFaultKnobs[] = {"SHMSTRESS_START_DELAY_MS", "SHMSTRESS_ATTACH_DELAY_MS",
                                            "SHMSTRESS_LIMIT_AT", "SHMSTRESS_BARRIER_PROCS",
                                            "SHMSTRESS_BARRIER_SUFFIX"};

// What a spawned loader worker is told about itself (start_loaders).
constexpr const char* kLoaderIdentity[] = {"SHMSTRESS_ROLE", "SHMSTRESS_LOADER_WORKER", "SHMSTRESS_LOADER_PREFIX",
                                           "SHMSTRESS_LOADER_CLAIM"};

template <std::size_t N>
bool listed(const char* const (&names)[N], std::string_view key) {
  return std::find(std::begin(names), std::end(names), key) != std::end(names);
}

bool apply_rank_env() {
  const std::string map = env_or("SHMSTRESS_RANK_ENV");
  if (map.empty()) return true;
  Json m = Json::parse(map, nullptr, false);
  const std::string lr = env_or("LOCAL_RANK");
  if (!m.is_object() || lr.empty() || !m.contains(lr) || !m[lr].is_object()) return false;
  const bool restarted = env_int("TORCHELASTIC_RESTART_COUNT", 0) > 0;
  for (const auto& [k, v] : m[lr].items()) {
    if (!v.is_string()) continue;
    if (restarted && (listed(kTriggerKnobs, k) || listed(kOtherFaultKnobs, k))) continue;
    ::setenv(k.c_str(), v.get<std::string>().c_str(), 1);
  }
  return true;
}

// The aligned start (docs/worker-protocol.md): `ready` once set up, then
// block until the supervisor opens the trial's gate, a FIFO whose only writer
// it closes: every reader sees end-of-file at once, and a reader that comes
// after the opening sees it at once too. The supervisor unlinks the FIFO as it
// opens the gate, so a worker that cannot open it (no fd left: a scenario's
// RLIMIT_NOFILE) still waits, by watching the name until it is gone, rather
// than starting before the others.
void wait_at_gate(Ctx& c) {
  c.log.emit(c.base("ready"));
  const std::string path = env_or("SHMSTRESS_GATE");
  if (path.empty()) return;
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOMEM)) {
    struct stat st{};
    while (::stat(path.c_str(), &st) == 0) ::usleep(1000);
    return;
  }
  if (fd < 0) return;  // gone: the gate is open
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  for (char b;;) {
    ssize_t n = ::read(fd, &b, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  ::close(fd);
}

// A resource limit the worker puts on itself right before one operation and
// lifts right after it (SHMSTRESS_LIMIT_AT, the `rlimit` fault): exhaustion
// where it hurts, in the process that cleans or attaches, not only at start.
struct LimitAt {
  std::string when;       // "clean", "attach", "acquire"
  std::string resource;   // "nofile" | "as"
  std::int64_t free = 0;  // fds, or bytes of address space, left free
};

std::optional<LimitAt> limit_at() {
  Json j = Json::parse(env_or("SHMSTRESS_LIMIT_AT", "null"), nullptr, false);
  if (!j.is_object()) return std::nullopt;
  LimitAt l{j.value("when", ""), j.value("resource", ""), j.value("free", std::int64_t{0})};
  if (l.when.empty() || (l.resource != "nofile" && l.resource != "as")) return std::nullopt;
  return l;
}

std::int64_t vm_size_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::atoll(line.c_str() + 7) * 1024;
  }
  return -1;
}

// Holds a lowered limit for its lifetime.
class Limited {
 public:
  Limited(const std::optional<LimitAt>& l, const char* when) {
    if (!l || l->when != when) return;
    res_ = l->resource == "nofile" ? RLIMIT_NOFILE : RLIMIT_AS;
    if (::getrlimit(res_, &old_) != 0) return;
    struct rlimit lim = old_;
    if (res_ == RLIMIT_NOFILE) {
      // Exactly `free` more descriptors: fd numbers below the limit that are not open.
      int used = 0, top = -1;
      for (int fd = 0; fd < 4096; ++fd) {
        if (::fcntl(fd, F_GETFD) >= 0) ++used, top = fd;
      }
      lim.rlim_cur = static_cast<rlim_t>(std::max<std::int64_t>(used + l->free, top + 1));
    } else {
      const std::int64_t vm = vm_size_bytes();
      if (vm < 0) return;
      lim.rlim_cur = static_cast<rlim_t>(vm + l->free);
    }
    active_ = ::setrlimit(res_, &lim) == 0;
  }
  ~Limited() {
    if (active_) ::setrlimit(res_, &old_);
  }
  Limited(const Limited&) = delete;
  Limited& operator=(const Limited&) = delete;

 private:
  int res_ = 0;
  struct rlimit old_{};
  bool active_ = false;
};

bool run_limited_clean(Ctx& c, const shmcoord::Namespace& ns, const std::optional<LimitAt>& lim) {
  Limited l(lim, "clean");
  return run_clean(c, ns);
}

// The SHMSTRESS_OPS of a worker, read once.
struct Plan {
  Json ops;
  shmcoord::Namespace ns;
  std::optional<LimitAt> limit;
  int retries = 0;
  int rounds = 0;
  int loader_workers = 0;
  bool loader_fork = true, loader_barrier = true;
  Json loader_work;
};

// A forked loader worker's exit code, passed up the stack from wherever the
// fork happened: the child ends by returning, so it destroys its copies of
// the rank's handles as any process that ends normally does (fork semantics
// must survive that).
using ChildRc = std::optional<int>;

// One barrier's life for one participant: attach (num_procs seats), the
// rounds from `first`, detach. Every failed wait is retried `retries` times
// as the same round, as user code with a retry loop does. `after_attach`
// runs once attached (it may fork: a child's code comes back through *rc).
bool barrier_rounds(Ctx& c, const Plan& p, std::mt19937_64& rng, int prefix, std::uint64_t claim, int num_procs,
                    int first, ChildRc* rc = nullptr, const std::function<ChildRc()>& after_attach = {}) {
  shmcoord::BarrierOptions bo;
  bo.claim = claim;  // a peer killed right after attaching breaks the barrier, not a stale reset
  bo.timeout = std::chrono::milliseconds(env_int("SHMSTRESS_BARRIER_TIMEOUT_MS", 3000));
  if (int every = p.ops.value("barrier_liveness_ms", 0); every > 0) bo.liveness_interval = std::chrono::milliseconds(every);
  bool all_ok = true;
  std::optional<shmcoord::Barrier> barrier;
  {
    Limited l(p.limit, "attach");
    Op op(c, "barrier_attach", {{"num_procs", num_procs}});
    // A misconfigured rank may name its barrier otherwise (misconfig barrier-name).
    const std::string suffix = env_or("SHMSTRESS_BARRIER_SUFFIX", shmcoord::Namespace::prefix_suffix(prefix, "barrier"));
    auto b = shmcoord::Barrier::attach(p.ns, suffix, num_procs, bo);
    if (b) {
      // created: this attach took the first seat, so it set up the barrier's holding (the Streaming
      // adapter's `created` is its constructor's create winning): a fault can aim at that process.
      op.ok({{"created", b->slot() == 0}});
      barrier.emplace(std::move(*b));
    } else {
      op.fail(b.error());
      all_ok = false;
    }
  }
  if (barrier && after_attach) {
    *rc = after_attach();
    if (*rc) return false;
  }
  for (int k = first; barrier && all_ok && k < p.rounds; ++k) {
    sleep_range(rng, p.ops.value("round_jitter_ms", Json()));
    for (int attempt = 0;; ++attempt) {
      Json args = {{"round", k}};
      if (attempt > 0) args["retry"] = attempt;
      Op op(c, "barrier", std::move(args));
      auto g = barrier->wait();
      if (g) {
        op.ok({{"round", *g}});
        break;
      }
      op.fail(g.error());
      if (attempt >= p.retries) {
        all_ok = false;
        break;
      }
    }
  }
  if (barrier) {
    Op op(c, "barrier_detach");
    auto d = barrier->detach();
    if (d) {
      op.ok();
    } else {
      op.fail(d.error());
    }
  }
  return all_ok;
}

// What a loader worker does: enter the job's barrier (barrier = "workers"),
// or work for a while and exit while its rank's rounds go on.
int loader_body(Ctx& c, const Plan& p, int prefix, std::uint64_t claim) {
  std::mt19937_64 rng(std::stoull(env_or("SHMSTRESS_SEED", "1")) ^ (0x9e3779b97f4a7c15ULL * (c.worker + 1)));
  if (!p.loader_barrier) {
    sleep_range(rng, p.loader_work);
    return 0;
  }
  const int ranks = env_int("SHMSTRESS_LOCAL_WORLD_SIZE", 0);
  const int n = env_int("SHMSTRESS_BARRIER_PROCS", ranks) * p.loader_workers;
  return barrier_rounds(c, p, rng, prefix, claim, n, 0) ? 0 : 1;
}

void announce(Ctx& c, const char* role) {
  Json e = c.base("start");
  e["role"] = role;
  e["ppid"] = static_cast<int>(::getppid());
  c.log.emit(std::move(e));
}

// A spawned loader worker (start = "spawn"): a fresh process that binds to
// its job's objects by name, as a DataLoader worker started with "spawn"
// re-imports the dataset and opens its shared memory by name.
int run_spawned_loader(Ctx& c, const Plan& p) {
  c.worker = env_int("SHMSTRESS_LOADER_WORKER", 0);
  announce(c, "loader");
  return loader_body(c, p, env_int("SHMSTRESS_LOADER_PREFIX", -1),
                     std::stoull(env_or("SHMSTRESS_LOADER_CLAIM", "0")));
}

// Starts the loader workers. Returns the pids started; in a forked child,
// returns nothing and sets *child_rc.
std::vector<pid_t> start_loaders(Ctx& c, const Plan& p, int prefix, std::uint64_t claim, ChildRc* child_rc) {
  std::vector<pid_t> pids;
  for (int i = 0; i < p.loader_workers; ++i) {
    if (p.loader_fork) {
      pid_t pid = ::fork();
      if (pid == 0) {
        // A loader worker does not outlive its rank (DataLoader's watchdog ends
        // it when its parent goes; here the kernel does, at once).
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        c.worker = i;
        c.next_id = 0;
        announce(c, "loader");
        *child_rc = loader_body(c, p, prefix, claim);
        return {};
      }
      if (pid > 0) pids.push_back(pid);
      continue;
    }
    // A spawned loader worker is not the process a failpoint trigger aimed
    // at either: it starts without them (the rank's other settings, its
    // barrier's name and size, it shares).
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string_view kv(*e);
      const std::string_view key = kv.substr(0, kv.find('='));
      // Its own identity below replaces the rank's: getenv() takes the first
      // of two, so an inherited SHMSTRESS_ROLE=rank would make it a rank.
      if (listed(kTriggerKnobs, key) || listed(kLoaderIdentity, key)) continue;
      env.emplace_back(kv);
    }
    env.push_back("SHMSTRESS_ROLE=loader");
    env.push_back("SHMSTRESS_LOADER_WORKER=" + std::to_string(i));
    env.push_back("SHMSTRESS_LOADER_PREFIX=" + std::to_string(prefix));
    env.push_back("SHMSTRESS_LOADER_CLAIM=" + std::to_string(claim));
    std::vector<char*> envp;
    for (auto& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    char self[] = "/proc/self/exe", arg1[] = "worker";
    char* argv[] = {self, arg1, nullptr};
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::execve("/proc/self/exe", argv, envp.data());
      ::_exit(127);
    }
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

// Waits for the loader workers to end, as iterating a DataLoader does, and
// fails the rank's `iterate` op when one of them failed or died (DataLoader
// raises then). They are not reaped: their exit status stays readable (a
// zombie's /proc/<pid>/stat) for the supervisor, which reaps them once this
// rank is gone (it is the trial's subreaper).
bool wait_loaders(Op& op, int expected, const std::vector<pid_t>& pids) {
  std::string why;
  if (static_cast<int>(pids.size()) < expected) {
    why = "could start only " + std::to_string(pids.size()) + " of " + std::to_string(expected) + " loader workers";
  }
  for (std::size_t i = 0; i < pids.size(); ++i) {
    siginfo_t si{};
    while (::waitid(P_PID, static_cast<id_t>(pids[i]), &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
    if (!why.empty() || (si.si_code == CLD_EXITED && si.si_status == 0)) continue;
    why = "loader worker " + std::to_string(i) + " (pid " + std::to_string(pids[i]) + ") " +
          (si.si_code == CLD_EXITED ? "exited " + std::to_string(si.si_status)
                                    : "was killed by signal " + std::to_string(si.si_status));
  }
  if (why.empty()) {
    op.ok();
    return true;
  }
  op.fail(shmcoord::make_error(shmcoord::Code::kBroken, why));
  return false;
}

// Opening (creating, rebuilding) the registry is part of the acquire op, as
// it is of get_shm_prefix: a process waiting there on the init lock is
// inside an acquire for the history (and for window coverage).
std::optional<shmcoord::Lease> acquire(Ctx& c, const Plan& p, std::optional<shmcoord::Registry>& reg,
                                       const shmcoord::JobSpec& spec, const Json& args) {
  for (int attempt = 0;; ++attempt) {
    Json a = args;
    if (attempt > 0) a["retry"] = attempt;
    Op op(c, "acquire", std::move(a));
    if (!reg) {
      auto r = shmcoord::Registry::open(p.ns, true, spec.timeout);
      if (!r) {
        op.fail(r.error());
        if (attempt >= p.retries) return std::nullopt;
        continue;
      }
      reg.emplace(std::move(*r));
    }
    auto l = [&] {
      Limited lim(p.limit, "acquire");
      return reg->acquire(spec);
    }();
    if (l) {
      // What exists under the prefix as it is granted: checkers use it to see
      // that a dead job's resources were gone before the prefix was reused.
      Json present = Json::array();
      std::string stem = p.ns.root + shmcoord::Namespace::prefix_suffix(l->prefix, "");
      std::error_code ec;
      for (const auto& dir : {std::filesystem::path(shmcoord::kShmDir), p.ns.lock_dir}) {
        for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
          std::string n = it->path().filename().string();
          if (n.rfind(stem, 0) != 0) continue;
          std::string shown = dir == p.ns.lock_dir ? it->path().string() : "/" + n;
          struct stat st;
          if (::stat(it->path().c_str(), &st) == 0) {
            present.push_back(identity(shown, st));
          } else {
            present.push_back(shown);
          }
        }
      }
      // And what the acquire itself removed on the way (a dead job's names):
      // without it a sweep inside an acquire leaves no trace, and a reuse of
      // the dead job's prefix cannot be judged.
      op.ok({{"prefix", l->prefix}, {"present", present}, {"removed", l->removed}});
      if (int n = count_fds(); n >= 0) {
        Json f = c.base("fds");
        f["count"] = n;
        c.log.emit(std::move(f));
      }
      return *l;
    }
    op.fail(l.error());
    if (attempt >= p.retries) return std::nullopt;
  }
}

int run() {
  Ctx c;
  // A launched rank's environment is complete only once its rank env is set.
  // A worker started by hand (`shmstress-worker-x --version`) has no trial:
  // it must not acquire in the machine's real /dev/shm, so without an event
  // log it refuses.
  if (!apply_rank_env()) return 2;
  c.log = EventLog::adopt(env_int("SHMSTRESS_EVENTS_FD", -1));
  if (!c.log.ok() && !env_or("SHMSTRESS_EVENTS").empty()) c.log = EventLog(env_or("SHMSTRESS_EVENTS"));
  g_ctx = &c;
  if (!c.log.ok()) {
    std::fputs(
        "shmstress worker: no trial to run in (neither SHMSTRESS_EVENTS_FD nor SHMSTRESS_EVENTS names an event log);"
        " shmstress starts workers itself: shmstress run SCENARIO.toml\n",
        stderr);
    return 2;
  }
  c.job = env_int("SHMSTRESS_JOB", -1);
  c.rank = env_int("SHMSTRESS_RANK", -1);
  c.local_rank = env_int("SHMSTRESS_LOCAL_RANK", c.rank);
  shmcoord::failpoint::set_observer(&on_crash_point);
  // A fault aims at this process: its forked children (the resource tracker,
  // forked loader workers) inherit the triggers but are not the supervisor's
  // to watch or resume, so they pass every point untouched.
  ::pthread_atfork(nullptr, nullptr, [] { shmcoord::failpoint::disarm(); });
  witness_stop_signals();
#ifdef SHMCOORD_FAILPOINTS
  if (std::string fiu = env_or("SHMSTRESS_FIU_ENABLE"); !fiu.empty()) {
    fiu_init(0);
    for (std::size_t start = 0; start <= fiu.size();) {
      std::size_t comma = fiu.find(',', start);
      // "point[=errno][@probability]"
      std::string spec = fiu.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      double probability = 1;
      if (auto at = spec.find('@'); at != std::string::npos) {
        probability = std::atof(spec.c_str() + at + 1);
        spec.resize(at);
      }
      void* failinfo = nullptr;
      if (auto eq = spec.find('='); eq != std::string::npos) {
        failinfo = reinterpret_cast<void*>(static_cast<std::intptr_t>(std::atoi(spec.c_str() + eq + 1)));
        spec.resize(eq);
      }
      if (!spec.empty()) {
        if (probability < 1) {
          fiu_enable_random(spec.c_str(), 1, failinfo, 0, probability);
        } else {
          fiu_enable(spec.c_str(), 1, failinfo, 0);
        }
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
#endif
  Plan p;
  p.ns.root = env_or("SHMSTRESS_ROOT", "shmstress.");
  p.ns.lock_dir = env_or("SHMSTRESS_LOCK_DIR", "/tmp");
  p.limit = limit_at();
  std::mt19937_64 rng(std::stoull(env_or("SHMSTRESS_SEED", "1")));
  const std::string role = env_or("SHMSTRESS_ROLE");

  if (role == "cleanup") return run_limited_clean(c, p.ns, p.limit) ? 0 : 1;

  p.ops = Json::parse(env_or("SHMSTRESS_OPS", "{}"), nullptr, false);
  Json dirs = Json::parse(env_or("SHMSTRESS_DIRS", "[]"), nullptr, false);
  if (!p.ops.is_object() || !dirs.is_array()) return 2;
  p.retries = p.ops.value("retries", 0);
  p.rounds = p.ops.value("rounds", 0);
  if (const Json& l = p.ops.value("loader", Json::object()); l.is_object()) {
    p.loader_workers = l.value("workers", 0);
    p.loader_fork = l.value("start", std::string("fork")) == "fork";
    p.loader_barrier = l.value("barrier", std::string("workers")) == "workers";
    p.loader_work = l.value("work_ms", Json());
  }
  if (role == "loader") return run_spawned_loader(c, p);

  announce(c, "rank");
  auto tracker = shmcoord::ResourceTracker::start(p.ns);  // as a careful user would
  wait_at_gate(c);

  sleep_range(rng, p.ops.value("start_jitter_ms", Json()));
  if (int late = env_int("SHMSTRESS_START_DELAY_MS", 0); late > 0) {  // a late joiner
    std::this_thread::sleep_for(std::chrono::milliseconds(late));
  }
  bool all_ok = true;
  // repeat_for: a neighbour inside one op or another for that long
  // (scenario.h Workload::repeat_for); every pass is a whole job of one rank.
  const auto repeat_until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(p.ops.value("repeat_for_ms", 0));
  do {
    if (p.ops.value("clean_before", false)) all_ok &= run_limited_clean(c, p.ns, p.limit);

    // A process may hold several datasets at once (train and val under one
    // launcher: the same job key and dirs). Each is constructed in turn, as
    // StreamingDataset's constructor does: acquired, then given its segments;
    // with clean_between the stale cleanup runs after the first one's
    // construction, while it is live (#767's reporter). They are released
    // last-first. Ops of dataset d carry args.dataset = d when there is more
    // than one, so checkers pair each release with its grant.
    const int datasets = std::max(1, p.ops.value("datasets", 1));
    auto with_dataset = [&](Json args, int d) {
      if (datasets > 1) args["dataset"] = d;
      return args;
    };
    std::vector<shmcoord::Lease> leases;         // by dataset
    std::vector<std::vector<Created>> created;   // by dataset
    std::optional<shmcoord::Registry> reg;
    for (int d = 0; all_ok && p.ops.value("acquire", true) && d < datasets; ++d) {
      shmcoord::JobSpec spec;
      spec.job_key = env_or("SHMSTRESS_JOB_KEY", shmcoord::default_job_key());
      spec.local_rank = c.local_rank;
      spec.local_world_size = env_int("SHMSTRESS_LOCAL_WORLD_SIZE", 0);
      spec.timeout = std::chrono::milliseconds(env_int("SHMSTRESS_ACQUIRE_TIMEOUT_MS", 5000));
      for (const auto& dir : dirs) spec.dirs.push_back({dir.value("path", ""), dir.value("remote", false)});
      const Json args = with_dataset({{"local_world_size", spec.local_world_size}}, d);
      auto l = acquire(c, p, reg, spec, args);
      if (!l) {
        all_ok = false;
        break;
      }
      leases.push_back(*l);
      created.emplace_back();
      const Json kinds = c.local_rank == 0 ? p.ops.value("segments", Json::array()) : Json::array();
      for (const auto& kind : kinds) {
        std::string name = p.ns.shm_name(shmcoord::Namespace::prefix_suffix(l->prefix, kind.get<std::string>()));
        Op op(c, "segment", with_dataset({{"name", name}}, d));
        int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        struct stat st;
        if (fd < 0 || ::ftruncate(fd, 4096) < 0 || ::fstat(fd, &st) < 0) {
          op.fail(shmcoord::sys_error("shm_open+ftruncate", name, errno));
          all_ok = false;
        } else {
          op.ok(identity(name, st));
          created.back().push_back(Created{name, st.st_dev, st.st_ino});
        }
        if (fd >= 0) ::close(fd);
      }
      if (d == 0 && datasets > 1 && p.ops.value("clean_between", false)) all_ok &= run_limited_clean(c, p.ns, p.limit);
    }

    if (!leases.empty() && all_ok && (p.rounds > 0 || p.loader_workers > 0)) {
      if (int late = env_int("SHMSTRESS_ATTACH_DELAY_MS", 0); late > 0) {  // a late barrier joiner
        std::this_thread::sleep_for(std::chrono::milliseconds(late));
      }
      const int ranks = env_int("SHMSTRESS_BARRIER_PROCS", env_int("SHMSTRESS_LOCAL_WORLD_SIZE", 0));
      const shmcoord::Lease& first = leases[0];
      if (p.loader_workers == 0) {
        // A replacement for a participant that died in round r starts at r + 1.
        all_ok &= barrier_rounds(c, p, rng, first.prefix, first.serial, ranks, env_int("SHMSTRESS_FIRST_ROUND", 0));
      } else if (p.loader_barrier) {
        // Iteration begins: the loader workers enter the barrier, the rank waits for them.
        Op op(c, "iterate", {{"workers", p.loader_workers}});
        ChildRc child_rc;
        auto pids = start_loaders(c, p, first.prefix, first.serial, &child_rc);
        if (child_rc) return *child_rc;
        all_ok &= wait_loaders(op, p.loader_workers, pids);
      } else {
        // The rank runs its rounds; loader workers forked meanwhile hold a copy
        // of its seat and end while the rounds go on.
        ChildRc child_rc;
        std::vector<pid_t> pids;
        all_ok &= barrier_rounds(c, p, rng, first.prefix, first.serial, ranks, 0, &child_rc, [&] {
          ChildRc rc;
          pids = start_loaders(c, p, first.prefix, first.serial, &rc);
          return rc;
        });
        if (child_rc) return *child_rc;
        Op op(c, "iterate", {{"workers", p.loader_workers}});
        all_ok &= wait_loaders(op, p.loader_workers, pids);
      }
    }

    // Released last-acquired first, `hold` before each: with several datasets
    // the first one outlives the others by that much.
    for (int d = static_cast<int>(leases.size()) - 1; d >= 0; --d) {
      const Json ds = datasets > 1 ? Json(d) : Json();
      sleep_range(rng, p.ops.value("hold_ms", Json()));
      bool released = false;
      if (p.ops.value("release", true)) {
        witness(c, created[d], "release", ds);
        Op op(c, "release", with_dataset({{"prefix", leases[d].prefix}}, d));
        auto r = reg->release(leases[d]);
        if (r) {
          op.ok();
          released = true;
        } else {
          op.fail(r.error());
          all_ok = false;
        }
      }
      if (!released) witness(c, created[d], "end", ds);  // still holding as the workload ends
    }
    if (p.ops.value("clean_after", false)) all_ok &= run_limited_clean(c, p.ns, p.limit);
    // Every pass starts as the first did: after start_jitter.
    if (all_ok && std::chrono::steady_clock::now() < repeat_until) {
      sleep_range(rng, p.ops.value("start_jitter_ms", Json()));
    }
  } while (all_ok && std::chrono::steady_clock::now() < repeat_until);
  return all_ok ? 0 : 1;
}

// SHMSTRESS_PROBE (tests only): the process state a worker starts with, as
// one JSON line on stdout, before anything else. zygote_test compares the
// workers the zygote forks with exec'd ones by it (harness/zygote.h).
void probe_process() {
  Json p;
  p["pid"] = ::getpid();
  p["ppid"] = ::getppid();
  p["leads_group"] = ::getpgid(0) == ::getpid();
  p["uid"] = ::getuid();
  p["gid"] = ::getgid();
  p["groups"] = ::getgroups(0, nullptr);
  struct rlimit rl {};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  p["nofile"] = {rl.rlim_cur, rl.rlim_max};
  int pdeath = 0;
  ::prctl(PR_GET_PDEATHSIG, &pdeath);
  p["pdeathsig"] = pdeath;
  p["dumpable"] = ::prctl(PR_GET_DUMPABLE);
  p["fd3_cloexec"] = (::fcntl(3, F_GETFD) & FD_CLOEXEC) != 0;
  std::ifstream cmdline("/proc/self/cmdline");
  std::string args((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  std::replace(args.begin(), args.end(), '\0', ' ');
  p["cmdline"] = args;
  sigset_t mask;
  ::sigprocmask(SIG_BLOCK, nullptr, &mask);
  Json blocked = Json::array(), handled = Json::array();
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sigismember(&mask, sig) == 1) blocked.push_back(sig);
    struct sigaction sa {};
    if (::sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler != SIG_DFL) handled.push_back(sig);
  }
  p["blocked"] = blocked;
  p["not_default"] = handled;
  Json fds = Json::array();
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code lec;
    // The iterator's own fd is gone by the time it is read back: only fds whose link resolves.
    if (auto target = std::filesystem::read_symlink(it->path(), lec); !lec && target.string().find("/proc/") == std::string::npos)
      fds.push_back(std::stoi(it->path().filename().string()));
  }
  std::sort(fds.begin(), fds.end());
  p["fds"] = fds;
  p["cwd"] = std::filesystem::current_path(ec).string();
  for (const char* ns : {"mnt", "pid", "net"}) {
    std::error_code a, b;
    auto mine = std::filesystem::read_symlink(std::string("/proc/self/ns/") + ns, a);
    auto init = std::filesystem::read_symlink(std::string("/proc/1/ns/") + ns, b);
    p["ns_of_init"][ns] = a || b ? Json() : Json(mine == init);
  }
  Json env = Json::array();
  for (char** e = environ; *e; ++e) env.push_back(std::string(*e).substr(0, std::string(*e).find('=')));
  std::sort(env.begin(), env.end());
  p["env"] = env;
  std::printf("%s\n", p.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int worker_main() {
  try {
    if (std::getenv("SHMSTRESS_PROBE")) probe_process();
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shmstress worker: uncaught exception: %s\n", e.what());
    return 70;
  } catch (...) {
    std::fprintf(stderr, "shmstress worker: uncaught exception\n");
    return 70;
  }
}

}  // namespace harness
