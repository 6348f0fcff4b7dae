#include "worker.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
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
  std::int64_t next_id = 0;

  Json base(const char* type) const {
    return Json{{"type", type}, {"pid", static_cast<int>(::getpid())}, {"job", job}, {"rank", rank}, {"local_rank", local_rank}};
  }
  // An op's invoke / completion with this thread's cumulative wait for a CPU
  // (docs/worker-protocol.md, cpu_wait_ns). The wait is read after t at an
  // invoke and before t at a completion, so the difference over an op never
  // counts a wait from outside it: an op's latency is never excused by more
  // than the scheduler really took from it.
  void emit_op_event(Json e, bool opening) const {
    std::int64_t wait = -1;
    if (opening) {
      e["t"] = mono_ns();
      wait = cpu_wait_ns();
    } else {
      wait = cpu_wait_ns();
      e["t"] = mono_ns();
    }
    if (wait >= 0) e["cpu_wait_ns"] = wait;
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

int run() {
  Ctx c;
  c.log = EventLog::adopt(env_int("SHMSTRESS_EVENTS_FD", -1));
  if (!c.log.ok()) c.log = EventLog(env_or("SHMSTRESS_EVENTS", "/dev/null"));
  if (!c.log.ok()) return 2;
  g_ctx = &c;
  c.job = env_int("SHMSTRESS_JOB", -1);
  c.rank = env_int("SHMSTRESS_RANK", -1);
  c.local_rank = env_int("SHMSTRESS_LOCAL_RANK", c.rank);
  shmcoord::failpoint::set_observer(&on_crash_point);
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
  shmcoord::Namespace ns;
  ns.root = env_or("SHMSTRESS_ROOT", "shmstress.");
  ns.lock_dir = env_or("SHMSTRESS_LOCK_DIR", "/tmp");
  std::mt19937_64 rng(std::stoull(env_or("SHMSTRESS_SEED", "1")));

  if (env_or("SHMSTRESS_ROLE") == "cleanup") return run_clean(c, ns) ? 0 : 1;

  Json ops = Json::parse(env_or("SHMSTRESS_OPS", "{}"), nullptr, false);
  Json dirs = Json::parse(env_or("SHMSTRESS_DIRS", "[]"), nullptr, false);
  if (ops.is_discarded() || dirs.is_discarded()) return 2;
  auto tracker = shmcoord::ResourceTracker::start(ns);  // as a careful user would

  sleep_range(rng, ops.value("start_jitter_ms", Json()));
  if (int late = env_int("SHMSTRESS_START_DELAY_MS", 0); late > 0) {  // a late joiner
    std::this_thread::sleep_for(std::chrono::milliseconds(late));
  }
  bool all_ok = true;
  if (ops.value("clean_before", false)) all_ok &= run_clean(c, ns);

  // A process may hold several datasets at once (train and val under one
  // launcher: the same job key and dirs); each is acquired, given its
  // segments and released on its own. Ops of dataset d carry args.dataset = d
  // when there is more than one, so checkers pair each release with its grant.
  const int datasets = std::max(1, ops.value("datasets", 1));
  auto with_dataset = [&](Json args, int d) {
    if (datasets > 1) args["dataset"] = d;
    return args;
  };
  std::vector<shmcoord::Lease> leases;  // by dataset
  std::optional<shmcoord::Registry> reg;
  for (int d = 0; all_ok && ops.value("acquire", true) && d < datasets; ++d) {
    shmcoord::JobSpec spec;
    spec.job_key = env_or("SHMSTRESS_JOB_KEY", shmcoord::default_job_key());
    spec.local_rank = c.local_rank;
    spec.local_world_size = env_int("SHMSTRESS_LOCAL_WORLD_SIZE", 0);
    spec.timeout = std::chrono::milliseconds(env_int("SHMSTRESS_ACQUIRE_TIMEOUT_MS", 5000));
    for (const auto& dir : dirs) spec.dirs.push_back({dir.value("path", ""), dir.value("remote", false)});
    Op op(c, "acquire", with_dataset({{"local_world_size", spec.local_world_size}}, d));
    std::optional<shmcoord::Registry> opened;
    if (!reg) {
      auto r = shmcoord::Registry::open(ns, true, spec.timeout);
      if (!r) {
        op.fail(r.error());
        all_ok = false;
        break;
      }
      opened.emplace(std::move(*r));
    }
    auto l = (reg ? *reg : *opened).acquire(spec);
    if (l) {
      // What exists under the prefix as it is granted: checkers use it to see
      // that a dead job's resources were gone before the prefix was reused.
      Json present = Json::array();
      std::string stem = ns.root + shmcoord::Namespace::prefix_suffix(l->prefix, "");
      std::error_code ec;
      for (const auto& dir : {std::filesystem::path(shmcoord::kShmDir), ns.lock_dir}) {
        for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
          std::string n = it->path().filename().string();
          if (n.rfind(stem, 0) != 0) continue;
          std::string shown = dir == ns.lock_dir ? it->path().string() : "/" + n;
          struct stat st;
          if (::stat(it->path().c_str(), &st) == 0) {
            present.push_back(identity(shown, st));
          } else {
            present.push_back(shown);
          }
        }
      }
      op.ok({{"prefix", l->prefix}, {"present", present}});
      leases.push_back(*l);
      if (opened) reg.emplace(std::move(*opened));
      if (int n = count_fds(); n >= 0) {
        Json f = c.base("fds");
        f["count"] = n;
        c.log.emit(std::move(f));
      }
    } else {
      op.fail(l.error());
      all_ok = false;
    }
  }

  std::vector<std::vector<Created>> created(leases.size());  // by dataset
  for (std::size_t d = 0; c.local_rank == 0 && d < leases.size(); ++d) {
    for (const auto& kind : ops.value("segments", Json::array())) {
      std::string name = ns.shm_name(shmcoord::Namespace::prefix_suffix(leases[d].prefix, kind.get<std::string>()));
      Op op(c, "segment", with_dataset({{"name", name}}, static_cast<int>(d)));
      int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
      struct stat st;
      if (fd < 0 || ::ftruncate(fd, 4096) < 0 || ::fstat(fd, &st) < 0) {
        op.fail(shmcoord::sys_error("shm_open+ftruncate", name, errno));
        all_ok = false;
      } else {
        op.ok(identity(name, st));
        created[d].push_back(Created{name, st.st_dev, st.st_ino});
      }
      if (fd >= 0) ::close(fd);
    }
  }

  int rounds = ops.value("rounds", 0);
  if (!leases.empty() && all_ok && rounds > 0) {
    if (int late = env_int("SHMSTRESS_ATTACH_DELAY_MS", 0); late > 0) {  // a late barrier joiner
      std::this_thread::sleep_for(std::chrono::milliseconds(late));
    }
    shmcoord::BarrierOptions bo;
    bo.claim = leases[0].serial;  // a peer killed right after attaching breaks the barrier, not a stale reset
    bo.timeout = std::chrono::milliseconds(env_int("SHMSTRESS_BARRIER_TIMEOUT_MS", 3000));
    if (int every = ops.value("barrier_liveness_ms", 0); every > 0)
      bo.liveness_interval = std::chrono::milliseconds(every);
    // Misconfiguration: a rank may be told a different process count.
    int n = env_int("SHMSTRESS_BARRIER_PROCS", env_int("SHMSTRESS_LOCAL_WORLD_SIZE", 0));
    std::optional<shmcoord::Barrier> barrier;
    {
      Op op(c, "barrier_attach", {{"num_procs", n}});
      auto b = shmcoord::Barrier::attach(ns, shmcoord::Namespace::prefix_suffix(leases[0].prefix, "barrier"), n, bo);
      if (b) {
        op.ok();
        barrier.emplace(std::move(*b));
      } else {
        op.fail(b.error());
        all_ok = false;
      }
    }
    // A replacement for a participant that died in round r starts at r + 1.
    for (int k = env_int("SHMSTRESS_FIRST_ROUND", 0); barrier && all_ok && k < rounds; ++k) {
      sleep_range(rng, ops.value("round_jitter_ms", Json()));
      Op op(c, "barrier", {{"round", k}});
      auto g = barrier->wait();
      if (g) {
        op.ok({{"round", *g}});
      } else {
        op.fail(g.error());
        all_ok = false;
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
  }

  // Released last-acquired first, `hold` before each: with several datasets
  // the first one outlives the others by that much.
  for (int d = static_cast<int>(leases.size()) - 1; d >= 0; --d) {
    const Json ds = datasets > 1 ? Json(d) : Json();
    sleep_range(rng, ops.value("hold_ms", Json()));
    bool released = false;
    if (ops.value("release", true)) {
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
  if (ops.value("clean_after", false)) all_ok &= run_clean(c, ns);
  return all_ok ? 0 : 1;
}

}  // namespace

int worker_main() {
  try {
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
