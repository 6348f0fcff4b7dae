// Turns the merged event log of one trial into a History.
//
// Half of these lines are written by external subjects, so nothing here trusts
// its input: a line that is not what the protocol says costs one message in
// `errors` and is skipped, never the whole trial, and nothing throws.
#include "history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
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

bool get_bool(const Json& j, const char* key, bool fallback = false) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return fallback;
  return it->get<bool>();
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
using FaultKey = std::tuple<std::string, int, int>;     // kind, job, rank

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
    op.pid = pid;
    op.op = *op_name;
    op.id = *id;
    op.invoke_t = t;
    op.complete_t = t;
    auto args = ev.find("args");
    op.args = args != ev.end() && !args->is_null() ? *args : Json::object();
    open_ops.emplace(key, h.ops.size());
    h.ops.push_back(std::move(op));
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
    if (ok) {
      op.outcome = Outcome::kOk;
      auto value = ev.find("value");
      op.value = value != ev.end() && !value->is_null() ? *value : Json::object();
      return;
    }
    op.outcome = Outcome::kFail;
    auto err = ev.find("error");
    if (err != ev.end() && err->is_object()) {
      op.error_code = get_str(*err, "code").value_or("");
      op.error_message = get_str(*err, "message").value_or("");
    } else if (err != ev.end() && err->is_string()) {
      op.error_message = err->get<std::string>();
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

  void fds(std::size_t index, std::int64_t t, const Json& ev) {
    int job, rank, pid;
    if (!worker_ids(index, t, ev, &job, &rank, &pid)) return;
    auto count = get_int(ev, "count");
    if (!count || *count < 0) {
      error(index, t, "fds needs a non-negative integer count", ev);
      return;
    }
    if (*count > h.audit.max_fds) {
      h.audit.max_fds = *count;
      h.audit.max_fds_job = job;
      h.audit.max_fds_rank = rank;
      h.audit.max_fds_pid = pid;
    }
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
    FaultKey key{*kind, job, rank};
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
    e.t = t;
    auto code = get_int(ev, "exit_code");
    auto sig = get_int(ev, "signal");
    if (!code && !sig) error(index, t, "exit has neither exit_code nor signal", ev);
    e.exit_code = code.value_or(-1);
    e.signal = sig.value_or(0);
    e.signal_sent_by_harness = get_bool(ev, "by_harness");
    e.teardown = get_bool(ev, "teardown");
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
    strings(index, t, ev, "leftover_shm", &h.audit.leftover_shm);
    strings(index, t, ev, "leftover_locks", &h.audit.leftover_locks);
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
    if (get_bool(ev, "timed_out")) h.timed_out = true;
    if (phase == "start") {
      if (!trial_start) trial_start = t;
    } else if (phase == "end") {
      trial_end = t;
    } else if (!phase) {
      error(index, t, "trial event needs a string phase", ev);
    }  // other phases ("timeout") only mark the moment; timed_out says what it means
  }

  void dispatch(std::size_t index, std::int64_t t, const std::string& type, const Json& ev) {
    if (type == "invoke") return invoke(index, t, ev);
    if (type == "ok") return complete(index, t, ev, true);
    if (type == "fail") return complete(index, t, ev, false);
    if (type == "point") return point(index, t, ev);
    if (type == "fds") return fds(index, t, ev);
    if (type == "fault") return fault(index, t, ev);
    if (type == "exit") return exit(index, t, ev);
    if (type == "audit") return audit(index, t, ev);
    if (type == "trial") return trial(index, t, ev);
    if (type == "harness-error")
      return;  // the harness's own trouble: reported by the runner, not a history fact
    error(index, t, fmt::format("unknown event type \"{}\"", brief_text(type)), ev);
  }
};

}  // namespace

std::vector<Json> parse_jsonl(const std::string& text, std::vector<std::string>* errors) {
  ErrorSink sink(errors);
  std::vector<Json> events;
  std::size_t line_no = 0;
  std::size_t pos = 0;
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
    try {
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) {
        sink.add(fmt::format("line {}: not JSON: {}", line_no, brief_text(line)));
      } else if (!j.is_object()) {
        sink.add(fmt::format("line {}: not a JSON object: {}", line_no, brief_text(line)));
      } else {
        events.push_back(std::move(j));
      }
    } catch (const std::exception& e) {
      sink.add(fmt::format("line {}: {}: {}", line_no, e.what(), brief_text(line)));
    }
  }
  return events;
}

History build_history(const std::vector<Json>& events, const TrialMeta& meta,
                      std::vector<std::string>* errors) {
  ErrorSink sink(errors);
  History h;
  h.meta = meta;
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
    order.push_back(Entry{*t, i, *type});
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Entry& a, const Entry& x) { return a.t < x.t; });

  for (const Entry& e : order) b.dispatch(e.index, e.t, e.type, events[e.index]);

  if (!order.empty()) {
    h.start_t = b.trial_start.value_or(order.front().t);
    h.end_t = std::max(b.trial_end.value_or(order.back().t), h.start_t);
  }

  // A window whose end never came lasted until the trial ended.
  for (std::size_t i : b.pending_faults) h.faults[i].end_t = std::max(h.end_t, h.faults[i].start_t);

  std::stable_sort(h.exits.begin(), h.exits.end(),
                   [](const Exit& a, const Exit& x) { return a.t < x.t; });
  for (Exit& e : h.exits) {
    if (e.signal <= 0) continue;  // a worker that announced a point but exited did not crash there
    if (const Point* p = find_point(b.points, e)) e.crash_point = p->name;
  }

  for (const auto& [key, index] : b.open_ops) {
    Op& op = h.ops[index];
    const Exit* e = find_exit(h.exits, op);
    op.outcome = Outcome::kInfo;
    op.complete_t = std::max(e != nullptr ? e->t : h.end_t, op.invoke_t);
    op.info_cause = info_cause(e, h);
  }

  std::stable_sort(h.ops.begin(), h.ops.end(),
                   [](const Op& a, const Op& x) { return a.invoke_t < x.invoke_t; });
  std::stable_sort(h.faults.begin(), h.faults.end(),
                   [](const Fault& a, const Fault& x) { return a.start_t < x.start_t; });
  return h;
}

}  // namespace harness
