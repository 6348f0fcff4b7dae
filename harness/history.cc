// Turns the merged event log of one trial into a History.
//
// Half of these lines are written by external subjects, so nothing here trusts
// its input: a line that is not what the protocol says costs one message in
// `errors` and is skipped, never the whole trial, and nothing throws.
#include "history.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

namespace harness {
namespace {

// A garbage file must not turn into a garbage report: past this many, errors
// are only counted.
constexpr std::size_t kMaxErrors = 200;

class ErrorSink {
 public:
  explicit ErrorSink(std::vector<std::string>* out) : out_(out) {}
  ErrorSink(const ErrorSink&) = delete;
  ErrorSink& operator=(const ErrorSink&) = delete;
  ~ErrorSink() {
    if (out_ != nullptr && count_ > kMaxErrors) {
      out_->push_back(fmt::format("... and {} more errors", count_ - kMaxErrors));
    }
  }
  void add(std::string message) {
    ++count_;
    if (out_ != nullptr && count_ <= kMaxErrors) out_->push_back(std::move(message));
  }

 private:
  std::vector<std::string>* out_;
  std::size_t count_ = 0;
};

// A short, always-printable rendering of a value for error messages.
std::string brief(const Json& j) {
  std::string s;
  try {
    s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (...) {
    s = "<unprintable>";
  }
  if (s.size() > 120) s = s.substr(0, 117) + "...";
  return s;
}

std::string brief_text(std::string_view text) {
  std::string s;
  for (char c : text.substr(0, 120)) s += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 120) s += "...";
  return s;
}

std::optional<std::int64_t> get_i64(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_unsigned()) {
    auto u = it->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  if (it->is_number_integer()) return it->get<std::int64_t>();
  return std::nullopt;
}

std::optional<int> get_int(const Json& j, const char* key) {
  auto v = get_i64(j, key);
  if (!v || *v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return static_cast<int>(*v);
}

std::optional<std::string> get_str(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// Fields that have one type in every event of the protocol
// (docs/worker-protocol.md). The builder reads a field of another type as
// absent, so one would silently mean something else ("signal":"KILL" as no
// signal): such an event is a history error and is not used.
std::optional<std::string> wrong_typed_field(const Json& ev) {
  for (const char* key : {"pid", "job", "rank", "local_rank", "id", "exit_code", "signal", "count", "worker", "ppid"}) {
    auto it = ev.find(key);
    if (it != ev.end() && !it->is_number_integer()) return fmt::format("'{}' must be an integer", key);
  }
  // A trial event's phase has its own rule (and message) in the builder.
  const bool trial = ev.contains("type") && ev["type"] == "trial";
  for (const char* key : {"op", "phase", "kind", "name"}) {
    if (trial && std::string_view(key) == "phase") continue;
    auto it = ev.find(key);
    if (it != ev.end() && !it->is_string()) return fmt::format("'{}' must be a string", key);
  }
  return std::nullopt;
}

bool get_bool(const Json& j, const char* key, bool fallback = false) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return fallback;
  return it->get<bool>();
}

std::optional<std::uint64_t> get_u64(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<std::uint64_t>();
  if (it->is_number_integer() && it->get<std::int64_t>() >= 0) {
    return static_cast<std::uint64_t>(it->get<std::int64_t>());
  }
  return std::nullopt;
}

// A member that must be true/false when present; nullopt when absent or of another type.
std::optional<bool> get_flag(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

// "truncated": true at the top of an event or inside its value / args.
bool says_truncated(const Json& ev) {
  if (get_flag(ev, "truncated").value_or(false)) return true;
  for (const char* key : {"value", "args"}) {
    auto it = ev.find(key);
    if (it != ev.end() && it->is_object() && get_flag(*it, "truncated").value_or(false)) return true;
  }
  return false;
}

// "SIGKILL", or "signal 77" for one glibc has no name for.
std::string signal_name(int sig) {
  const char* abbrev = sig > 0 ? sigabbrev_np(sig) : nullptr;
  return abbrev != nullptr ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

// One worker process: pid 0 in an exit event matches any pid of that rank.
struct WorkerKey {
  int job = -1;
  int rank = -1;
  int pid = 0;
  auto operator<=>(const WorkerKey&) const = default;
};

bool same_worker(const WorkerKey& a, int job, int rank, int pid) {
  return a.job == job && a.rank == rank && (a.pid == pid || a.pid == 0 || pid == 0);
}

struct Point {
  std::string name;
  std::int64_t t = 0;
};

// The last crash point a worker announced at or before `t`.
const Point* find_point(const std::map<WorkerKey, Point>& points, const Exit& e) {
  const Point* best = nullptr;
  for (const auto& [key, point] : points) {
    if (same_worker(key, e.job, e.rank, e.pid) && point.t <= e.t &&
        (best == nullptr || point.t > best->t)) {
      best = &point;
    }
  }
  return best;
}

// The exit of the process that ran an op: the first one at or after its
// invoke, else any (clocks of garbage logs may disagree).
const Exit* find_exit(const std::vector<Exit>& exits, const Op& op) {
  const Exit* any = nullptr;
  for (const Exit& e : exits) {  // sorted by t
    if (!same_worker(WorkerKey{e.job, e.rank, e.pid}, op.job, op.rank, op.pid)) continue;
    if (e.t >= op.invoke_t) return &e;
    if (any == nullptr) any = &e;
  }
  return any;
}

std::string info_cause(const Exit* e, const History& h) {
  if (e == nullptr && h.cut_t) return kCauseCut;
  if (e == nullptr) return h.timed_out ? kCauseTrialTimeout : "still running at trial end";
  if (!e->crash_point.empty()) return "killed itself at crash point " + e->crash_point;
  if (e->signal > 0) {
    if (e->teardown && h.timed_out) return kCauseTrialTimeout;
    if (e->signal_sent_by_harness) {
      return fmt::format("killed by harness{} ({})", e->teardown ? " at trial end" : "",
                         signal_name(e->signal));
    }
    return fmt::format("signal {} ({})", e->signal, signal_name(e->signal));
  }
  return fmt::format("exited {} without completing", e->exit_code);
}

using OpKey = std::tuple<int, int, int, std::int64_t>;  // job, rank, pid, id
using FaultKey = std::tuple<std::string, int, int, int>;  // kind, job, rank, loader worker

struct Builder {
  History& h;
  ErrorSink& errors;
  std::map<OpKey, std::size_t> open_ops;
  std::map<WorkerKey, Point> points;
  std::map<FaultKey, std::deque<std::size_t>> open_faults;
  std::vector<std::size_t> pending_faults;  // started, end not yet seen

  void error(std::size_t index, std::int64_t t, std::string_view what, const Json& ev) {
    errors.add(fmt::format("event {} (t={}): {}: {}", index, t, what, brief(ev)));
  }

  // The last cpu_wait_ns / cpu_run_ns each worker logged, in time order: each only grows.
  std::map<WorkerKey, std::int64_t> last_wait, last_run;

  // An event's cpu_wait_ns or cpu_run_ns (docs/worker-protocol.md), or -1
  // when absent. A value that is not a non-negative integer, or less than the
  // same worker logged before, is a history error and reads as absent: a wait
  // nobody can vouch for excuses nothing, and a run nobody can vouch for
  // accuses nothing.
  std::int64_t cumulative(std::size_t index, std::int64_t t, const Json& ev, const WorkerKey& who,
                          const char* key, std::map<WorkerKey, std::int64_t>& last) {
    auto it = ev.find(key);
    if (it == ev.end()) return -1;
    auto v = get_i64(ev, key);
    if (!v || *v < 0) {
      error(index, t, fmt::format("{} must be a non-negative integer", key), ev);
      return -1;
    }
    auto [prev, fresh] = last.try_emplace(who, *v);
    if (!fresh) {
      if (*v < prev->second) {
        error(index, t, fmt::format("{} went down: it is cumulative per process", key), ev);
        return -1;
      }
      prev->second = *v;
    }
    return *v;
  }

  // job, rank and pid of a worker event; false (and an error) if missing.
  bool worker_ids(std::size_t index, std::int64_t t, const Json& ev, int* job, int* rank,
                  int* pid) {
    auto j = get_int(ev, "job"), r = get_int(ev, "rank"), p = get_int(ev, "pid");
    if (!j || !r || !p) {
      error(index, t, "worker event needs integer job, rank and pid", ev);
      return false;
    }
    *job = *j, *rank = *r, *pid = *p;
    return true;
  }

  // "worker": the loader worker an event is about (-1 when absent).
  int loader_index(std::size_t index, std::int64_t t, const Json& ev) {
    if (!ev.contains("worker")) return -1;
    auto w = get_int(ev, "worker");
    if (!w || *w < 0) {
      error(index, t, "worker must be a non-negative integer (a loader worker's index)", ev);
      return -1;
    }
    return *w;
  }

  void start(std::size_t index, std::int64_t t, const Json& ev) {
    int job, rank, pid;
    if (!worker_ids(index, t, ev, &job, &rank, &pid)) return;
    Process p;
    p.job = job, p.rank = rank, p.pid = pid, p.t = t;
    p.worker = loader_index(index, t, ev);
    p.role = get_str(ev, "role").value_or("");
    if (p.role != "rank" && p.role != "loader" && p.role != "launcher") {
      error(index, t, "start role must be rank, loader or launcher", ev);
      return;
    }
    p.ppid = get_int(ev, "ppid").value_or(0);
    h.processes.push_back(std::move(p));
  }

  void teardown(std::size_t index, std::int64_t t, const Json& ev) {
    Teardown td;
    auto job = get_int(ev, "job"), pid = get_int(ev, "launcher_pid");
    auto bound = get_i64(ev, "bound_ms");
    auto members = ev.find("members");
    if (!job || !pid || !bound || *bound < 0 || *bound > std::numeric_limits<std::int64_t>::max() / 1000000 ||
        members == ev.end() || !members->is_array()) {
      error(index, t, "teardown needs integer job, launcher_pid, bound_ms and a members array", ev);
      return;
    }
    td.job = *job, td.launcher_pid = *pid, td.t = t, td.bound_ns = *bound * 1000000;
    for (const Json& m : *members) {
      auto mp = m.is_object() ? get_int(m, "pid") : std::nullopt;
      if (!mp) {
        error(index, t, "teardown member needs an integer pid", ev);
        return;
      }
      Teardown::Member x;
      x.pid = *mp;
      x.role = get_str(m, "role").value_or("other");
      x.gone_t = get_i64(m, "gone_t").value_or(0);
      td.members.push_back(std::move(x));
    }
    h.teardowns.push_back(std::move(td));
  }

  void gate(std::size_t index, std::int64_t t, const Json& ev) {
    if (get_str(ev, "phase") != "open") {
      error(index, t, "gate phase must be open", ev);
      return;
    }
    if (h.gate_t) {
      error(index, t, "the start gate opened twice", ev);
      return;
    }
    h.gate_t = t;
  }

  void invoke(std::size_t index, std::int64_t t, const Json& ev) {
    int job, rank, pid;
    if (!worker_ids(index, t, ev, &job, &rank, &pid)) return;
    auto op_name = get_str(ev, "op");
    auto id = get_i64(ev, "id");
    if (!op_name || !id) {
      error(index, t, "invoke needs a string op and an integer id", ev);
      return;
    }
    OpKey key{job, rank, pid, *id};
    if (open_ops.contains(key)) {
      error(index, t, "second invoke of an id that is still open", ev);
      return;
    }
    Op op;
    op.job = job;
    op.rank = rank;
    op.local_rank = get_int(ev, "local_rank").value_or(-1);
    op.worker = loader_index(index, t, ev);
    op.pid = pid;
    op.op = *op_name;
    op.id = *id;
    op.invoke_t = t;
    op.complete_t = t;
    op.invoke_wait_ns =
        cumulative(index, t, ev, WorkerKey{job, rank, pid}, "cpu_wait_ns", last_wait);
    op.invoke_run_ns = cumulative(index, t, ev, WorkerKey{job, rank, pid}, "cpu_run_ns", last_run);
    auto args = ev.find("args");
    const bool args_ok = args == ev.end() || args->is_null() || args->is_object();
    if (!args_ok) error(index, t, "invoke args must be an object", ev);
    op.args = args_ok && args != ev.end() && !args->is_null() ? *args : Json::object();
    op.truncated = says_truncated(ev);
    if (op.op == "barrier" && op.args.contains("round")) {
      op.round = get_i64(op.args, "round");
      if (!op.round) error(index, t, "barrier args.round must be an integer", ev);
    }
    if (op.op == "witness") {
      op.witness_when = get_str(op.args, "when").value_or("");
      if (op.witness_when != "release" && op.witness_when != "end" && op.witness_when != "live") {
        error(index, t, "witness args.when must be \"release\", \"end\" or \"live\"", ev);
      }
    }
    open_ops.emplace(key, h.ops.size());
    h.ops.push_back(std::move(op));
  }

  // The supervisor's look at an open op's process (docs/worker-protocol.md,
  // `cpu`). The op may have ended by the time the look is written: the look
  // still bounds what it ran from below, so it is kept, not an error.
  void cpu(std::size_t index, std::int64_t t, const Json& ev) {
    int job, rank, pid;
    if (!worker_ids(index, t, ev, &job, &rank, &pid)) return;
    auto id = get_i64(ev, "id");
    auto run = get_i64(ev, "run_ns");
    auto wait = get_i64(ev, "wait_ns");
    if (!id || !run || *run < 0 || (ev.contains("wait_ns") && (!wait || *wait < 0))) {
      error(index, t, "cpu needs an integer id and non-negative integers run_ns and wait_ns", ev);
      return;
    }
    const OpKey key{job, rank, pid, *id};
    Op* op = nullptr;
    if (auto it = open_ops.find(key); it != open_ops.end()) {
      op = &h.ops[it->second];
    } else {
      for (auto it = h.ops.rbegin(); it != h.ops.rend() && op == nullptr; ++it) {
        if (OpKey{it->job, it->rank, it->pid, it->id} == key) op = &*it;
      }
    }
    if (op == nullptr) {
      error(index, t, "cpu names an op that was never invoked", ev);
      return;
    }
    if (*run < op->invoke_run_ns || (wait && *wait < op->invoke_wait_ns)) {
      error(index, t, "cpu run_ns / wait_ns below the op's own at its invoke: they are cumulative",
            ev);
      return;
    }
    op->sample_t = t;
    op->sample_run_ns = *run;
    op->sample_wait_ns = wait.value_or(-1);
  }

  // The supervisor found process pid alive at t (docs/worker-protocol.md,
  // `alive`). Its exit, stamped when it was reaped, cannot come first.
  void alive(std::size_t index, std::int64_t t, const Json& ev) {
    int job, rank, pid;
    if (!worker_ids(index, t, ev, &job, &rank, &pid)) return;
    for (const Exit& e : h.exits) {
      if (e.job == job && e.rank == rank && e.pid == pid && e.t <= t) {
        error(index, t, "alive after the process's exit", ev);
        return;
      }
    }
    h.alive.push_back({job, rank, pid, t});
  }

  void complete(std::size_t index, std::int64_t t, const Json& ev, bool ok) {
    int job, rank, pid;
    if (!worker_ids(index, t, ev, &job, &rank, &pid)) return;
    auto id = get_i64(ev, "id");
    if (!id) {
      error(index, t, "completion needs an integer id", ev);
      return;
    }
    auto it = open_ops.find(OpKey{job, rank, pid, *id});
    if (it == open_ops.end()) {
      error(index, t, "completion without an open invoke", ev);
      return;
    }
    Op& op = h.ops[it->second];
    open_ops.erase(it);
    if (auto name = get_str(ev, "op"); name && *name != op.op) {
      error(index, t,
            fmt::format("completion names op \"{}\" but the invoke was \"{}\"", brief_text(*name),
                        op.op),
            ev);
    }
    op.complete_t = t;
    op.complete_wait_ns =
        cumulative(index, t, ev, WorkerKey{job, rank, pid}, "cpu_wait_ns", last_wait);
    op.complete_run_ns =
        cumulative(index, t, ev, WorkerKey{job, rank, pid}, "cpu_run_ns", last_run);
    op.truncated = op.truncated || says_truncated(ev);
    if (ok) {
      op.outcome = Outcome::kOk;
      auto value = ev.find("value");
      if (value != ev.end() && !value->is_null() && !value->is_object()) {
        error(index, t, "ok value must be an object", ev);
        op.value = Json::object();
      } else {
        op.value = value != ev.end() && !value->is_null() ? *value : Json::object();
      }
      typed_value(index, t, ev, op);
      return;
    }
    op.outcome = Outcome::kFail;
    auto err = ev.find("error");
    if (err != ev.end() && err->is_object()) {
      auto code = err->find("code"), message = err->find("message");
      if ((code != err->end() && !code->is_string()) ||
          (message != err->end() && !message->is_string())) {
        error(index, t, "fail error code and message must be strings", ev);
      }
      op.error_code = get_str(*err, "code").value_or("");
      op.error_message = get_str(*err, "message").value_or("");
    } else if (err != ev.end() && err->is_string()) {
      op.error_message = err->get<std::string>();
    } else if (err != ev.end() && !err->is_null()) {
      error(index, t, "fail error must be an object {code, message, errno}", ev);
    }
  }

  // A list of strings at value[key] (absent: empty).
  bool string_list(const Json& value, const char* key, std::vector<std::string>* out) {
    auto it = value.find(key);
    if (it == value.end() || it->is_null()) return true;
    if (!it->is_array()) return false;
    for (const Json& v : *it) {
      if (!v.is_string()) return false;
      out->push_back(v.get<std::string>());
    }
    return true;
  }

  // A segment named by a string, or by {"name", "dev", "ino"}.
  static std::optional<SegmentRef> segment_ref(const Json& v) {
    if (v.is_string()) return SegmentRef{v.get<std::string>(), std::nullopt, std::nullopt};
    if (!v.is_object()) return std::nullopt;
    auto name = get_str(v, "name");
    if (!name) return std::nullopt;
    SegmentRef r{*name, get_u64(v, "dev"), get_u64(v, "ino")};
    if ((v.contains("dev") && !r.dev) || (v.contains("ino") && !r.ino)) return std::nullopt;
    return r;
  }

  // The typed result of a known op; a value of the wrong shape is a history error.
  void typed_value(std::size_t index, std::int64_t t, const Json& ev, Op& op) {
    const Json& v = op.value;
    if (op.op == "acquire") {
      auto p = get_int(v, "prefix");
      if (!p || *p < 0 || *p >= kNamespaceStride) {
        error(index, t, "acquire ok needs an integer prefix >= 0 (below 1000000)", ev);
      } else {
        // Numbered apart per namespace (kNamespaceStride).
        const bool known = op.job >= 0 && static_cast<std::size_t>(op.job) < h.meta.jobs.size();
        op.prefix = *p + (known ? namespace_index(h.meta, h.meta.jobs[static_cast<std::size_t>(op.job)].root_suffix) *
                                      kNamespaceStride
                                : 0);
      }
      auto present = v.find("present");
      if (present != v.end() && !present->is_null()) {
        op.has_present = present->is_array();
        bool good = present->is_array();
        if (good) {
          for (const Json& e : *present) {
            auto r = segment_ref(e);
            if (!r) {
              good = false;
              break;
            }
            op.present.push_back(std::move(*r));
          }
        }
        if (!good) {
          op.has_present = false;
          op.present.clear();
          error(index, t, "acquire present must be a list of names or {name, dev, ino}", ev);
        }
      }
      if (v.contains("removed") && !string_list(v, "removed", &op.removed)) {
        op.removed.clear();
        error(index, t, "acquire removed must be a list of names", ev);
      }
    } else if (op.op == "barrier") {
      if (v.contains("round")) {
        op.generation = get_i64(v, "round");
        if (!op.generation) error(index, t, "barrier ok value.round must be an integer", ev);
      }
    } else if (op.op == "clean") {
      if (!string_list(v, "removed", &op.removed) || !string_list(v, "kept", &op.kept) ||
          !string_list(v, "skipped", &op.skipped)) {
        error(index, t, "clean removed, kept and skipped must be lists of names", ev);
      }
    } else if (op.op == "segment" || op.op == "folder" || op.op == "file" || op.op == "chmod") {
      Json named = v;
      if (!named.contains("name") && op.args.contains("name")) named["name"] = op.args["name"];
      auto r = segment_ref(named);
      if (!r) {
        error(index, t, fmt::format("{} ok needs a name (and integer dev and ino, if given)", op.op), ev);
      } else {
        op.segment = std::move(*r);
      }
      if (v.contains("mode")) {
        auto mode = get_i64(v, "mode");
        if (!mode || *mode < 0 || *mode > 07777) {
          error(index, t, fmt::format("{} ok value.mode must be a permission mode (0..07777)", op.op), ev);
        } else {
          op.mode = static_cast<unsigned>(*mode);
        }
      }
    } else if (op.op == "remove") {
      if (!string_list(v, "removed", &op.removed)) error(index, t, "remove removed must be a list of names", ev);
    } else if (op.op == "witness") {
      auto segs = v.find("segments");
      bool good = segs != v.end() && segs->is_array();
      if (good) {
        for (const Json& e : *segs) {
          Sighting s;
          auto name = e.is_object() ? get_str(e, "name") : std::nullopt;
          if (!name) {
            good = false;
            break;
          }
          s.name = *name;
          auto dev = get_u64(e, "dev"), ino = get_u64(e, "ino");
          if (get_flag(e, "missing").value_or(false)) {
            s.state = Sighting::State::kMissing;
          } else if (dev && ino) {
            s.state = Sighting::State::kPresent;
            s.dev = *dev;
            s.ino = *ino;
          } else if (auto why = get_str(e, "error")) {
            s.state = Sighting::State::kError;
            s.error = *why;
          } else {
            good = false;
            break;
          }
          op.sightings.push_back(std::move(s));
        }
      }
      if (!good) {
        op.sightings.clear();
        error(index, t,
              "witness ok needs segments: [{name, dev, ino} | {name, missing: true} | {name, "
              "error}]",
              ev);
      }
    }
  }

  void point(std::size_t index, std::int64_t t, const Json& ev) {
    int job, rank, pid;
    if (!worker_ids(index, t, ev, &job, &rank, &pid)) return;
    auto name = get_str(ev, "name");
    if (!name) {
      error(index, t, "point needs a string name", ev);
      return;
    }
    points[WorkerKey{job, rank, pid}] = Point{*name, t};
  }

  // What a process said, as a stop signal reached it, of that signal and its
  // sender: believed only for an exit whose status its parent took first
  // (build_history), and only when the sender is the job's launcher.
  struct Signalled {
    WorkerKey who;
    int worker = -1;
    int signal = 0;
    int sender = 0;
    std::int64_t t = 0;
  };
  std::vector<Signalled> signalled_said;

  void signalled(std::size_t index, std::int64_t t, const Json& ev) {
    int job, rank, pid;
    if (!worker_ids(index, t, ev, &job, &rank, &pid)) return;
    auto sig = get_int(ev, "signal"), sender = get_int(ev, "sender");
    if (!sig || *sig <= 0 || !sender || *sender < 0) {
      error(index, t, "signalled needs a positive integer signal and a non-negative integer sender", ev);
      return;
    }
    signalled_said.push_back(Signalled{WorkerKey{job, rank, pid}, loader_index(index, t, ev), *sig, *sender, t});
  }

  // fds events, applied to the audit once their writers are known to be the
  // harness's workers (build_history).
  struct FdsReport {
    WorkerKey who;
    int count = 0;
  };
  std::vector<FdsReport> fds_reports;
  // Ops whose completion was not believed (outside the trial's window).
  std::set<OpKey> discarded;

  void fds(std::size_t index, std::int64_t t, const Json& ev) {
    int job, rank, pid;
    if (!worker_ids(index, t, ev, &job, &rank, &pid)) return;
    auto count = get_int(ev, "count");
    if (!count || *count < 0) {
      error(index, t, "fds needs a non-negative integer count", ev);
      return;
    }
    fds_reports.push_back({WorkerKey{job, rank, pid}, *count});
  }

  void fault(std::size_t index, std::int64_t t, const Json& ev) {
    auto kind = get_str(ev, "kind");
    if (!kind) {
      error(index, t, "fault needs a string kind", ev);
      return;
    }
    int job = get_int(ev, "job").value_or(-1);
    int rank = get_int(ev, "rank").value_or(-1);
    std::string phase = get_str(ev, "phase").value_or("instant");
    auto detail_it = ev.find("detail");
    Json detail = detail_it != ev.end() && !detail_it->is_null() ? *detail_it : Json::object();
    FaultKey key{*kind, job, rank, get_int(ev, "worker").value_or(-1)};
    if (phase == "end") {
      auto open = open_faults.find(key);
      if (open == open_faults.end() || open->second.empty()) {
        error(index, t, "fault end without a start", ev);
        return;
      }
      Fault& f = h.faults[open->second.front()];
      open->second.pop_front();
      f.end_t = t;
      if (f.detail.is_object() && detail.is_object()) {
        f.detail.update(detail);
      }
      std::erase(pending_faults, static_cast<std::size_t>(&f - h.faults.data()));
      return;
    }
    if (phase != "start" && phase != "instant") {
      error(index, t, "fault phase must be start, end or instant", ev);
      return;
    }
    Fault f;
    f.kind = *kind;
    f.job = job;
    f.rank = rank;
    f.pid = get_int(ev, "pid").value_or(0);
    f.worker = loader_index(index, t, ev);
    f.launcher = get_bool(ev, "launcher");
    f.tree = get_bool(ev, "tree");
    f.signal = get_int(ev, "signal").value_or(0);
    f.effect_t = get_i64(ev, "effect_t").value_or(0);
    f.protect = detail.is_object() && get_flag(detail, "protect").value_or(false);
    f.start_t = t;
    f.end_t = t;
    f.detail = std::move(detail);
    if (phase == "start") {
      open_faults[key].push_back(h.faults.size());
      pending_faults.push_back(h.faults.size());
    }
    h.faults.push_back(std::move(f));
  }

  void exit(std::size_t index, std::int64_t t, const Json& ev) {
    auto job = get_int(ev, "job"), rank = get_int(ev, "rank");
    if (!job || !rank) {
      error(index, t, "exit needs integer job and rank", ev);
      return;
    }
    Exit e;
    e.job = *job;
    e.rank = *rank;
    e.pid = get_int(ev, "pid").value_or(0);
    e.worker = loader_index(index, t, ev);
    e.launcher = get_str(ev, "role") == "launcher" || (e.rank == -1 && e.job >= 0 && get_bool(ev, "launcher"));
    e.t = t;
    auto code = get_int(ev, "exit_code");
    auto sig = get_int(ev, "signal");
    e.status_unknown = get_bool(ev, "status_unknown");
    e.parent_gone = get_bool(ev, "parent_gone");
    e.by_launcher = get_bool(ev, "by_launcher");
    if (!code && !sig && !e.status_unknown) error(index, t, "exit has neither exit_code nor signal", ev);
    e.exit_code = code.value_or(-1);
    e.signal = sig.value_or(0);
    e.signal_sent_by_harness = get_bool(ev, "by_harness");
    e.teardown = get_bool(ev, "teardown");
    for (auto [key, into] : {std::pair{"cpu_wait_ns", &e.cpu_wait_ns}, std::pair{"reaper_wait_ns", &e.reaper_wait_ns}}) {
      if (!ev.contains(key)) continue;
      auto v = get_i64(ev, key);
      if (!v || *v < 0) {
        error(index, t, fmt::format("exit {} must be a non-negative integer", key), ev);
      } else {
        *into = *v;
      }
    }
    h.exits.push_back(std::move(e));
  }

  void strings(std::size_t index, std::int64_t t, const Json& ev, const char* key,
               std::vector<std::string>* out) {
    auto it = ev.find(key);
    if (it == ev.end() || it->is_null()) return;
    if (!it->is_array()) {
      error(index, t, fmt::format("audit {} must be an array", key), ev);
      return;
    }
    for (const Json& v : *it) {
      if (v.is_string()) {
        out->push_back(v.get<std::string>());
      } else {
        error(index, t, fmt::format("audit {} holds a non-string", key), ev);
      }
    }
  }

  void audit(std::size_t index, std::int64_t t, const Json& ev) {
    h.audit.ran = true;
    h.audit.truncated = h.audit.truncated || says_truncated(ev);
    strings(index, t, ev, "leftover_shm", &h.audit.leftover_shm);
    strings(index, t, ev, "leftover_locks", &h.audit.leftover_locks);
    if (ev.contains("straggler_wait_ms")) {
      auto wait = get_i64(ev, "straggler_wait_ms");
      if (!wait || *wait < 0) {
        error(index, t, "audit straggler_wait_ms must be a non-negative integer", ev);
      } else {
        h.audit.straggler_wait_ns = *wait * 1'000'000;
      }
    }
    if (ev.contains("stragglers_exited")) {
      auto exited = get_flag(ev, "stragglers_exited");
      if (!exited) error(index, t, "audit stragglers_exited must be true or false", ev);
      h.audit.stragglers_exited = exited;
    }
    if (auto when = get_i64(ev, "settled_t")) h.audit.settled_t = *when;
    strings(index, t, ev, "shared_shm_new", &h.audit.shared_shm_new);
    auto orphans = ev.find("orphans");
    if (orphans == ev.end() || orphans->is_null()) return;
    if (!orphans->is_array()) {
      error(index, t, "audit orphans must be an array of pids", ev);
      return;
    }
    for (const Json& v : *orphans) {
      if (v.is_number_integer() && v.get<std::int64_t>() > 0 &&
          v.get<std::int64_t>() <= std::numeric_limits<int>::max()) {
        h.audit.orphan_pids.push_back(v.get<int>());
      } else {
        error(index, t, "audit orphans holds something that is not a pid", ev);
      }
    }
  }

  std::optional<std::int64_t> trial_start, trial_end;

  void trial(std::size_t index, std::int64_t t, const Json& ev) {
    auto phase = get_str(ev, "phase");
    if (ev.contains("timed_out") && !get_flag(ev, "timed_out")) {
      error(index, t, "trial timed_out must be true or false", ev);
    }
    if (get_bool(ev, "timed_out")) h.timed_out = true;
    if (phase == "start") {
      h.started = true;
      if (!trial_start) trial_start = t;
      if (auto root = get_str(ev, "root")) h.root = *root;
    } else if (phase == "end") {
      h.ended = true;
      trial_end = t;
    } else if (phase == "cut") {
      h.cut_marks.push_back(t);
    } else if (phase != "timeout") {
      h.malformed_trial_event = true;
      error(index, t, "trial phase must be start, end, timeout or cut", ev);
    }  // "timeout" only marks the moment; timed_out says what it means
  }

  void subject(std::size_t index, std::int64_t t, const Json& ev) {
    auto available = get_flag(ev, "available");
    if (!available) {
      error(index, t, "subject event needs available: true or false", ev);
      return;
    }
    if (ev.contains("reason") && !ev["reason"].is_string()) {
      error(index, t, "subject reason must be a string", ev);
    }
    if (!*available) {
      h.unavailable = get_str(ev, "reason").value_or("the subject reported itself unavailable");
    }
  }

  void harness_error(std::size_t index, std::int64_t t, const Json& ev) {
    auto message = get_str(ev, "message");
    if (!message) error(index, t, "harness-error needs a string message", ev);
    h.harness_errors.push_back(message.value_or("(harness error without a message)"));
  }

  void dispatch(std::size_t index, std::int64_t t, const std::string& type, const Json& ev) {
    if (type == "invoke") return invoke(index, t, ev);
    if (type == "ok") return complete(index, t, ev, true);
    if (type == "fail") return complete(index, t, ev, false);
    if (type == "point") return point(index, t, ev);
    if (type == "fds") return fds(index, t, ev);
    if (type == "signalled") return signalled(index, t, ev);
    if (type == "fault") return fault(index, t, ev);
    if (type == "exit") return exit(index, t, ev);
    if (type == "audit") return audit(index, t, ev);
    if (type == "trial") return trial(index, t, ev);
    if (type == "subject") return subject(index, t, ev);
    if (type == "harness-error") return harness_error(index, t, ev);
    if (type == "start") return start(index, t, ev);
    if (type == "ready") return;  // at the start gate: only the supervisor acts on it
    if (type == "gate") return gate(index, t, ev);
    if (type == "teardown") return teardown(index, t, ev);
    if (type == "cpu") return cpu(index, t, ev);
    if (type == "alive") return alive(index, t, ev);
    error(index, t, fmt::format("unknown event type \"{}\"", brief_text(type)), ev);
  }
};

}  // namespace

std::vector<Json> parse_jsonl(const std::string& text, std::vector<std::string>* errors) {
  ErrorSink sink(errors);
  std::vector<Json> events;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  auto parse_object = [](std::string_view s) -> std::optional<Json> {
    try {
      Json j = Json::parse(s, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded() && j.is_object()) return j;
    } catch (...) {
    }
    return std::nullopt;
  };
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.remove_suffix(1);
    }
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (auto j = parse_object(line)) {
      events.push_back(std::move(*j));
      continue;
    }
    // A writer killed inside write(2) leaves a prefix of its line with no
    // newline, and the next writer's whole line follows on the same line:
    // recover the complete event at the end (bounded tries, for garbage).
    std::optional<Json> rest;
    std::size_t at = 0;
    int tries = 0;
    for (std::size_t p = line.find('{', 1); p != std::string_view::npos && tries < 256;
         p = line.find('{', p + 1)) {
      if (p + 1 < line.size() && line[p + 1] != '"') continue;
      ++tries;
      if ((rest = parse_object(line.substr(p)))) {
        at = p;
        break;
      }
    }
    if (rest) {
      sink.add(fmt::format("line {}: a torn event (its writer died inside write(2)) before a "
                           "complete one; the torn one is lost: {}",
                           line_no, brief_text(line.substr(0, at))));
      events.push_back(std::move(*rest));
      continue;
    }
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      sink.add(fmt::format("line {}: not JSON: {}", line_no, brief_text(line)));
    } else {
      sink.add(fmt::format("line {}: not a JSON object: {}", line_no, brief_text(line)));
    }
  }
  return events;
}

void merge_continuation(Json& into, const Json& more) {
  if (!into.is_object() || !more.is_object()) {
    into = more;
    return;
  }
  for (auto it = more.begin(); it != more.end(); ++it) {
    auto mine = into.find(it.key());
    if (mine == into.end()) {
      into[it.key()] = it.value();
    } else if (mine->is_object() && it->is_object()) {
      merge_continuation(*mine, *it);
    } else if (mine->is_array() && it->is_array()) {
      for (const Json& v : *it) mine->push_back(v);
    } else {
      *mine = *it;
    }
  }
}

int namespace_index(const TrialMeta& meta, const std::string& root_suffix) {
  if (root_suffix.empty()) return 0;
  std::vector<std::string> nested;
  for (const JobMeta& j : meta.jobs) {
    if (!j.root_suffix.empty()) nested.push_back(j.root_suffix);
  }
  std::sort(nested.begin(), nested.end());
  nested.erase(std::unique(nested.begin(), nested.end()), nested.end());
  auto it = std::find(nested.begin(), nested.end(), root_suffix);
  return it == nested.end() ? -1 : static_cast<int>(it - nested.begin()) + 1;
}

History build_history(const std::vector<Json>& events, const TrialMeta& meta,
                      std::vector<std::string>* errors, std::optional<std::int64_t> cut_t) {
  ErrorSink sink(errors);
  History h;
  h.meta = meta;
  h.cut_t = cut_t;
  Builder b{h, sink};

  // Stable, so events with equal timestamps keep their log order (an invoke
  // and its completion in the same nanosecond stay paired).
  struct Entry {
    std::int64_t t;
    std::size_t index;
    std::string type;
  };
  std::vector<Entry> order;
  order.reserve(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Json& ev = events[i];
    if (!ev.is_object()) {
      sink.add(fmt::format("event {}: not a JSON object: {}", i, brief(ev)));
      continue;
    }
    auto t = get_i64(ev, "t");
    auto type = get_str(ev, "type");
    if (!t || !type) {
      sink.add(fmt::format("event {}: needs an integer t and a string type: {}", i, brief(ev)));
      continue;
    }
    if (cut_t && *t >= *cut_t) continue;  // after the cut: not in this record
    if (auto bad = wrong_typed_field(ev)) {
      sink.add(fmt::format("event {}: {}: {}", i, *bad, brief(ev)));
      continue;
    }
    order.push_back(Entry{*t, i, *type});
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Entry& a, const Entry& x) { return a.t < x.t; });

  // The trial's own window, as the supervisor logged it: its first start (the
  // first line it writes, before any worker exists) and its last end (the
  // last line, after every worker is gone). A worker event outside it was not
  // written at the time it claims (a clock other than CLOCK_MONOTONIC, a
  // forged time): a history error, and the event is not used, so no latency
  // of 2^62 ns reaches a report.
  std::optional<std::int64_t> window_start, window_end;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const Json& ev = events[i];
    if (!ev.is_object() || get_str(ev, "type") != "trial") continue;
    auto t = get_i64(ev, "t");
    auto phase = get_str(ev, "phase");
    if (!t || !phase || (cut_t && *t >= *cut_t)) continue;
    if (*phase == "start" && !window_start) window_start = *t;
    if (*phase == "end") window_end = *t;
  }
  auto outside = [&](std::int64_t t) {
    return (window_start && t < *window_start) || (window_end && t > *window_end);
  };

  // Lines of one event split with "continues" (docs/worker-protocol.md) are
  // merged before anything reads them: same writer, type and id, in order.
  using PieceKey = std::tuple<std::string, int, int, int, std::int64_t>;
  struct Pending {
    Json event;
    std::size_t index;
  };
  std::map<PieceKey, Pending> pieces;
  auto piece_key = [](const std::string& type, const Json& ev) {
    return PieceKey{type, get_int(ev, "job").value_or(-1), get_int(ev, "rank").value_or(-1),
                    get_int(ev, "pid").value_or(0), get_i64(ev, "id").value_or(-1)};
  };
  for (const Entry& e : order) {
    const Json& ev = events[e.index];
    if ((e.type == "invoke" || e.type == "ok" || e.type == "fail" || e.type == "point" || e.type == "fds" ||
         e.type == "signalled") &&
        outside(e.t)) {
      b.error(e.index, e.t,
              fmt::format("a worker event outside the trial (it ran from t={} to t={}): its time is not the "
                          "time it was written",
                          window_start.value_or(0), window_end.value_or(0)),
              ev);
      // Its op is not judged at all: neither with that end nor as cut off.
      if (e.type == "ok" || e.type == "fail") {
        b.discarded.insert(OpKey{get_int(ev, "job").value_or(-1), get_int(ev, "rank").value_or(-1),
                                 get_int(ev, "pid").value_or(0), get_i64(ev, "id").value_or(-1)});
      }
      continue;
    }
    auto cont = ev.find("continues");
    if (cont != ev.end() && !cont->is_boolean()) {
      b.error(e.index, e.t, "continues must be true or false", ev);
      continue;
    }
    const bool continues = cont != ev.end() && cont->get<bool>();
    auto it = pieces.find(piece_key(e.type, ev));
    if (continues) {
      if (it == pieces.end()) {
        pieces.emplace(piece_key(e.type, ev), Pending{ev, e.index});
      } else {
        merge_continuation(it->second.event, ev);
      }
      continue;
    }
    if (it == pieces.end()) {
      b.dispatch(e.index, e.t, e.type, ev);
      continue;
    }
    Json whole = std::move(it->second.event);
    pieces.erase(it);
    merge_continuation(whole, ev);
    whole.erase("continues");
    b.dispatch(e.index, e.t, e.type, whole);
  }
  // The writer died between the lines of an event: what arrived is kept and
  // marked truncated. An invoke never finished being logged: the op did not
  // start. An ok / fail whose last line is missing leaves the op open (info).
  for (auto& [key, piece] : pieces) {
    const std::string& type = std::get<0>(key);
    Json& ev = piece.event;
    ev.erase("continues");
    ev["truncated"] = true;
    const std::int64_t t = get_i64(ev, "t").value_or(0);
    if (type == "invoke") continue;
    if (type == "ok" || type == "fail") {
      auto open = b.open_ops.find(
          OpKey{std::get<1>(key), std::get<2>(key), std::get<3>(key), std::get<4>(key)});
      if (open != b.open_ops.end()) {
        Op& op = h.ops[open->second];
        op.truncated = true;
        if (auto v = ev.find("value"); v != ev.end() && v->is_object()) op.value = *v;
      }
      continue;
    }
    b.dispatch(piece.index, t, type, ev);
  }

  if (cut_t) {  // the record ends at the cut, as a trial's at its end event
    h.ended = true;
    b.trial_end = *cut_t;
  }
  if (!order.empty()) {
    h.start_t = b.trial_start.value_or(order.front().t);
    h.end_t = std::max(b.trial_end.value_or(order.back().t), h.start_t);
  }

  // A window whose end never came lasted until the trial ended.
  for (std::size_t i : b.pending_faults) h.faults[i].end_t = std::max(h.end_t, h.faults[i].start_t);

  std::stable_sort(h.exits.begin(), h.exits.end(),
                   [](const Exit& a, const Exit& x) { return a.t < x.t; });
  // A launched rank its launcher reaped first: its own word of the launcher's
  // stop signal tells how it ended (docs/worker-protocol.md, "signalled").
  for (Exit& e : h.exits) {
    if (!e.status_unknown || e.launcher || e.worker >= 0) continue;
    int launcher_pid = 0;
    for (const Process& p : h.processes) {
      if (p.role == "launcher" && p.job == e.job) launcher_pid = p.pid;
    }
    if (launcher_pid == 0) continue;
    for (const auto& s : b.signalled_said) {
      if (s.who == WorkerKey{e.job, e.rank, e.pid} && s.worker < 0 && s.t <= e.t && s.sender == launcher_pid &&
          (s.signal == SIGTERM || s.signal == SIGINT)) {
        e.status_unknown = false;
        e.signal = s.signal;
        e.by_launcher = true;
      }
    }
  }
  for (Exit& e : h.exits) {
    if (e.signal <= 0) continue;  // a worker that announced a point but exited did not crash there
    if (const Point* p = find_point(b.points, e)) {
      e.crash_point = p->name;
      e.crash_point_t = p->t;
    }
  }

  // A worker cannot have waited longer than the kernel says it did by its
  // exit: a claim past that is a history error and excuses nothing.
  for (const Exit& e : h.exits) {
    if (e.cpu_wait_ns < 0) continue;
    for (Op& op : h.ops) {
      if (op.job != e.job || op.rank != e.rank || op.pid != e.pid) continue;
      for (std::int64_t* w : {&op.invoke_wait_ns, &op.complete_wait_ns}) {
        if (*w > e.cpu_wait_ns) {
          sink.add(fmt::format("{} of job {} rank {} (pid {}) claims cpu_wait_ns {}, more than the {} "
                               "the kernel recorded for that process by its exit",
                               op.op, op.job, op.rank, op.pid, *w, e.cpu_wait_ns));
          *w = -1;
        }
      }
    }
  }

  // A worker that exited by itself must have run the workload it was given:
  // one that logged no operation at all (exec:/bin/true), or that left the
  // barrier rounds early with nothing failed, shows nothing for the
  // invariants to judge, and its trial is at least unknown, never green.
  if (h.started && h.ended && !h.unavailable) {
    for (const Exit& e : h.exits) {
      if (e.signal > 0 || e.exit_code < 0) continue;  // a signal cut it short
      // A launcher logs no operation (its ranks do), and a loader worker's
      // work is its rank's iteration, judged through the rank's own ops.
      if (e.launcher || e.worker >= 0) continue;
      const bool cleanup = e.job == -1 && e.rank == -1;
      if (!cleanup && (e.job < 0 || static_cast<std::size_t>(e.job) >= meta.jobs.size())) continue;
      const JobMeta* jm = cleanup ? nullptr : &meta.jobs[static_cast<std::size_t>(e.job)];
      if (cleanup ? !meta.cleanup_step : !(jm->acquire || jm->barrier_rounds > 0)) continue;
      int ops = 0;
      bool all_ok = true;
      std::int64_t last_round = -1, barriers = 0;
      for (const Op& op : h.ops) {
        if (!same_worker(WorkerKey{e.job, e.rank, e.pid}, op.job, op.rank, op.pid)) continue;
        ++ops;
        all_ok = all_ok && op.outcome == Outcome::kOk;
        if (op.op != "barrier") continue;
        ++barriers;
        if (op.round) last_round = std::max(last_round, *op.round);
      }
      last_round = std::max(last_round, barriers - 1);
      // A replacement joins at the round its predecessor had not completed
      // (the fault's first_round): one that came after the last round has no
      // round left to run, only its attach and detach.
      bool nothing_left = false;
      for (const Fault& f : h.faults) {
        if (f.kind != "replacement" || f.job != e.job || f.rank != e.rank || !f.detail.is_object()) continue;
        auto pid = get_int(f.detail, "replacement_pid"), first = get_int(f.detail, "first_round");
        if (pid && *pid == e.pid && first && jm != nullptr && *first >= jm->barrier_rounds) nothing_left = true;
      }
      const std::string who = cleanup ? fmt::format("the cleanup step (pid {})", e.pid)
                                      : fmt::format("job {} rank {} (pid {})", e.job, e.rank, e.pid);
      if (ops == 0) {
        sink.add(fmt::format("{} exited {} without logging any operation: it did not run its workload", who,
                             e.exit_code));
      } else if (!cleanup && e.exit_code == 0 && all_ok && jm->barrier_rounds > 0 && jm->barrier_workers == 0 &&
                 !nothing_left && last_round < jm->barrier_rounds - 1) {
        // (With loader workers in the barrier the rank itself enters no round.)
        sink.add(fmt::format("{} exited 0 after barrier round {} of {} with nothing failed: it stopped its "
                             "workload early",
                             who, last_round, jm->barrier_rounds));
      }
    }
  }

  for (const auto& [key, index] : b.open_ops) {
    Op& op = h.ops[index];
    const Exit* e = find_exit(h.exits, op);
    op.outcome = Outcome::kInfo;
    op.complete_t = std::max(e != nullptr ? e->t : h.end_t, op.invoke_t);
    op.info_cause = info_cause(e, h);
  }

  // Who wrote what: the supervisor logs an exit for every process it started
  // (job, rank, pid), and every worker is gone before the trial's end. An
  // operation from a pid the harness started as another job or rank, or
  // claiming a rank whose processes the harness logged while none was that
  // pid, is a history error and is not judged: a forged acquire must not
  // count as another job's.
  auto forged = [&](int job, int rank, int pid) -> std::optional<std::string> {
    bool rank_logged = false;
    // First whether the harness started that very process: pids collide
    // across containers (each container's first worker is its pid 2), so
    // another job's process with the same number proves nothing.
    for (const Exit& e : h.exits) {
      if (same_worker(WorkerKey{e.job, e.rank, e.pid}, job, rank, pid)) return std::nullopt;
    }
    for (const Exit& e : h.exits) {
      if (e.pid == pid && e.pid != 0) {
        return fmt::format("claims job {} rank {} from pid {}, which the harness started as job {} rank {}", job,
                           rank, pid, e.job, e.rank);
      }
      rank_logged = rank_logged || (e.job == job && e.rank == rank);
    }
    if (!rank_logged) return std::nullopt;  // nothing to hold it against
    return fmt::format("claims job {} rank {} from pid {}, which the harness never started as that rank", job,
                       rank, pid);
  };
  std::erase_if(h.ops, [&](const Op& op) { return b.discarded.contains(OpKey{op.job, op.rank, op.pid, op.id}); });
  if (h.started && h.ended) {
    std::set<std::tuple<int, int, int>> reported;
    auto judge = [&](const std::string& what, int job, int rank, int pid) {
      auto why = forged(job, rank, pid);
      if (why && reported.insert({job, rank, pid}).second) sink.add(what + " " + *why + ": not judged");
      return why.has_value();
    };
    std::erase_if(h.ops, [&](const Op& op) { return judge("an " + op.op + " op", op.job, op.rank, op.pid); });
    std::erase_if(b.fds_reports,
                  [&](const Builder::FdsReport& f) { return judge("an fds event", f.who.job, f.who.rank, f.who.pid); });
  }
  for (const auto& f : b.fds_reports) {
    if (f.count > h.audit.max_fds) {
      h.audit.max_fds = f.count;
      h.audit.max_fds_job = f.who.job;
      h.audit.max_fds_rank = f.who.rank;
      h.audit.max_fds_pid = f.who.pid;
    }
  }

  std::stable_sort(h.ops.begin(), h.ops.end(),
                   [](const Op& a, const Op& x) { return a.invoke_t < x.invoke_t; });
  std::stable_sort(h.processes.begin(), h.processes.end(),
                   [](const Process& a, const Process& x) { return a.t < x.t; });
  std::stable_sort(h.faults.begin(), h.faults.end(),
                   [](const Fault& a, const Fault& x) { return a.start_t < x.start_t; });
  return h;
}

}  // namespace harness
