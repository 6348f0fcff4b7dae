#include "checkers/history_queries.h"

#include "checkers/excuses.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <map>
#include <tuple>
#include <utility>

namespace harness::checks {

void Report::invalid(std::string problem) {
  r_.verdict = compose(r_.verdict, Verdict::kInvalid);
  r_.problems.push_back(std::move(problem));
}

void Report::unknown(std::string problem) {
  r_.verdict = compose(r_.verdict, Verdict::kUnknown);
  r_.problems.push_back(std::move(problem));
}

void Report::reach(std::string_view state) {
  if (std::find(r_.reached.begin(), r_.reached.end(), state) == r_.reached.end()) {
    r_.reached.emplace_back(state);
  }
}

std::string at(const History& h, std::int64_t t) {
  return fmt::format("{:+.3f}ms", static_cast<double>(t - h.start_t) / 1e6);
}

std::string ms(std::int64_t ns) { return fmt::format("{:.3f}ms", static_cast<double>(ns) / 1e6); }

std::string who(int job, int rank, int pid, int worker) {
  if (worker >= 0) return fmt::format("job {} rank {} worker {} (pid {})", job, rank, worker, pid);
  return fmt::format("job {} rank {} (pid {})", job, rank, pid);
}

std::string who(const Op& op) { return who(op.job, op.rank, op.pid, op.worker); }
std::string who(const Exit& e) {
  if (e.launcher) return fmt::format("the launcher of job {} (pid {})", e.job, e.pid);
  return who(e.job, e.rank, e.pid, e.worker);
}

namespace {
int seat_workers(const History& h, int job) {
  if (job < 0 || static_cast<std::size_t>(job) >= h.meta.jobs.size()) return 0;
  return h.meta.jobs[static_cast<std::size_t>(job)].barrier_workers;
}
}  // namespace

int seat(const History& h, int job, int rank, int worker) {
  const int w = seat_workers(h, job);
  if (w <= 0) return worker < 0 ? rank : -1;
  return worker >= 0 && worker < w && rank >= 0 ? rank * w + worker : -1;
}

int seats(const History& h, int job) {
  if (job < 0 || static_cast<std::size_t>(job) >= h.meta.jobs.size()) return 0;
  const JobMeta& m = h.meta.jobs[static_cast<std::size_t>(job)];
  return m.barrier_workers > 0 ? m.ranks * m.barrier_workers : m.ranks;
}

std::string seat_name(const History& h, int job, int s) {
  const int w = seat_workers(h, job);
  if (w <= 0) return fmt::format("rank {}", s);
  return fmt::format("rank {} worker {}", s / w, s % w);
}

std::int64_t dataset_of(const Op& op) { return json_int(op.args, "dataset").value_or(0); }

std::string describe(const History& h, const Op& op) {
  return fmt::format("{} of {} invoked {}", op.op, who(op), at(h, op.invoke_t));
}

std::optional<std::int64_t> json_int(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned() &&
      it->get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return std::nullopt;
  }
  return it->get<std::int64_t>();
}

std::string json_string(const Json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::vector<std::string> json_strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const Json& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

namespace {

std::string_view basename(std::string_view name) {
  auto slash = name.rfind('/');
  return slash == std::string_view::npos ? name : name.substr(slash + 1);
}

bool digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

int name_prefix(const History& h, std::string_view name) {
  const int p = name_prefix(name);
  if (p < 0 || h.root.empty()) return p;
  std::string_view base = basename(name);
  // The stem: everything before the "NNNNNN_" token.
  char token[16];
  std::snprintf(token, sizeof token, "%06d_", p);
  const auto at = base.rfind(token);
  if (at == std::string_view::npos || base.substr(0, at).rfind(h.root, 0) != 0) return p;
  const int ns = namespace_index(h.meta, std::string(base.substr(h.root.size(), at - h.root.size())));
  return ns < 0 ? -1 : ns * kNamespaceStride + p;
}

int name_prefix(std::string_view name) {
  std::string_view base = basename(name);
  int found = -1;
  for (std::size_t i = 0; i + 7 <= base.size(); ++i) {
    if (i > 0 && digit(base[i - 1])) continue;
    bool six = true;
    for (std::size_t k = 0; k < 6 && six; ++k) six = digit(base[i + k]);
    if (!six || base[i + 6] != '_') continue;
    int p = 0;
    for (std::size_t k = 0; k < 6; ++k) p = p * 10 + (base[i + k] - '0');
    found = p;
  }
  return found;
}

bool is_registry_name(std::string_view name) { return basename(name).ends_with("registry"); }

int registry_namespace(const History& h, std::string_view name) {
  std::string_view base = basename(name);
  if (h.root.empty() || !base.ends_with("registry") || base.rfind(h.root, 0) != 0) return 0;
  return namespace_index(h.meta, std::string(base.substr(h.root.size(), base.size() - h.root.size() - 8)));
}

const Op* pool_holding(const History& h, const Op& made) {
  for (const Op& op : h.ops) {
    if (op.op == "pool" && op.pid == made.pid && op.job == made.job && op.rank == made.rank &&
        op.invoke_t <= made.invoke_t && made.complete_t <= op.complete_t) {
      return &op;
    }
  }
  return nullptr;
}

bool under(std::string_view name, std::string_view dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  return name == dir || (name.size() > dir.size() && name.starts_with(dir) && name[dir.size()] == '/');
}

bool removing_itself(const History& h, const Op& w, std::string_view name) {
  for (const Op& op : h.ops) {
    if (op.pid != w.pid || op.job != w.job || op.rank != w.rank || op.invoke_t >= w.complete_t) continue;
    const std::string target = json_string(op.args, "name");
    if (target.empty()) continue;
    if (op.op == "remove" && under(name, target)) return true;
    if (op.op == "track" && json_string(op.args, "cmd") == "maybe_unlink" && under(name, target)) return true;
  }
  return false;
}

const Exit* exit_of(const History& h, int job, int rank, int pid) {
  for (const Exit& e : h.exits) {
    if (e.job == job && e.rank == rank && (e.pid == pid || e.pid == 0 || pid == 0)) return &e;
  }
  return nullptr;
}

bool aims_at(const Fault& f, int job, int rank, int pid) {
  // A fault aimed at no job (a ghost's reused pid, a seeded lock's holder)
  // names a pid that is not a worker's, even when a worker later gets the
  // same number. Pids are per container, so a pid matches only in its job.
  if (f.job < 0 || f.job != job) return false;
  if (f.pid != 0 && pid != 0) return f.pid == pid;
  return f.rank < 0 || f.rank == rank;
}

bool is_stop(const Fault& f) { return stops(f); }

std::int64_t stopped_ns(const History& h, int job, int rank, int pid, std::int64_t a,
                        std::int64_t b) {
  std::vector<std::pair<std::int64_t, std::int64_t>> windows;
  for (const Fault& f : h.faults) {
    if (!is_stop(f) || !aims_at(f, job, rank, pid)) continue;
    std::int64_t s = std::max(f.start_t, a), e = std::min(f.end_t, b);
    if (s < e) windows.emplace_back(s, e);
  }
  std::sort(windows.begin(), windows.end());
  std::int64_t total = 0, covered_to = a;
  for (auto [s, e] : windows) {
    s = std::max(s, covered_to);
    if (s < e) {
      total += e - s;
      covered_to = e;
    }
  }
  return total;
}

std::string not_counted(std::int64_t stopped_ns, std::int64_t cpu_wait_ns, bool of_it) {
  if (stopped_ns <= 0 && cpu_wait_ns < 0) return "";
  std::string parts;
  if (stopped_ns > 0) parts = fmt::format("{} {}stopped", ms(stopped_ns), of_it ? "of it " : "");
  if (cpu_wait_ns >= 0) {
    parts += fmt::format("{}{} waiting for a CPU", parts.empty() ? "" : ", ", ms(cpu_wait_ns));
  }
  return " (" + parts + ", not counted)";
}

std::int64_t exit_cpu_wait_ns(const Exit& e, const Op* last) {
  std::int64_t own = -1;
  if (last != nullptr && e.cpu_wait_ns >= 0) {
    const std::int64_t logged = last->outcome == Outcome::kInfo ? last->invoke_wait_ns : last->complete_wait_ns;
    if (logged >= 0 && e.cpu_wait_ns >= logged) own = e.cpu_wait_ns - logged;
  }
  if (own < 0 && e.reaper_wait_ns <= 0) return -1;
  return std::max<std::int64_t>(0, own) + std::max<std::int64_t>(0, e.reaper_wait_ns);
}

const Fault* stop_window_at(const History& h, int job, int rank, int pid, std::int64_t t) {
  for (const Fault& f : h.faults) {
    if (is_stop(f) && aims_at(f, job, rank, pid) && f.start_t <= t && t <= f.end_t)
      return &f;
  }
  return nullptr;
}

std::int64_t last_alive(const History& h, int job, int rank, int pid) {
  std::int64_t t = std::numeric_limits<std::int64_t>::min();
  for (const Op& op : h.ops) {
    if (op.job != job || op.rank != rank || op.pid != pid) continue;
    t = std::max(t, op.invoke_t);
    if (op.outcome != Outcome::kInfo) t = std::max(t, op.complete_t);
  }
  const Exit* e = exit_of(h, job, rank, pid);
  for (const Fault& f : h.faults) {
    if ((kills(f) || is_stop(f)) && aims_at(f, job, rank, pid) &&
        (e == nullptr || f.start_t <= e->t)) {
      t = std::max(t, f.start_t);
    }
  }
  for (const History::Alive& a : h.alive) {
    if (a.job == job && a.rank == rank && a.pid == pid) t = std::max(t, a.t);
  }
  return t;
}

std::int64_t dead_by(const History& h, int job, int rank, int pid) {
  std::int64_t t = kNever;
  if (const Exit* e = exit_of(h, job, rank, pid)) t = e->t;
  for (const Fault& f : h.faults) {
    if (kills(f) && f.signal == SIGKILL && f.effect_t > 0 && aims_at(f, job, rank, pid)) {
      t = std::min(t, f.effect_t);
    }
  }
  return t;
}

// build_history sets crash_point_t only with crash_point, from a point at or
// before the exit: never later than e.t.
std::int64_t gone_t(const Exit& e) { return e.crash_point_t >= 0 ? e.crash_point_t : e.t; }

std::set<std::string> foreign_names(const History& h) {
  std::set<std::string> names;
  for (const auto& [name, owner] : foreign_owners(h)) names.insert(name);
  return names;
}

std::map<std::string, int> foreign_owners(const History& h) {
  std::map<std::string, int> owners;
  for (const Fault& f : h.faults) {
    if (!f.detail.is_object()) continue;
    auto foreign = f.detail.find("foreign");
    if (foreign == f.detail.end() || !foreign->is_boolean() || !foreign->get<bool>()) continue;
    auto uid = f.detail.find("uid");
    const int owner = uid != f.detail.end() && uid->is_number_integer() ? uid->get<int>() : -1;
    std::vector<std::string> names = json_strings(f.detail, "names");
    for (const char* key : {"name", "path"}) {
      auto it = f.detail.find(key);
      if (it != f.detail.end() && it->is_string()) names.push_back(it->get<std::string>());
    }
    // A shm name may be spelled "/x" (shm_open, cleanup reports) or "x" (the
    // audit's listing of /dev/shm): both are recorded.
    for (const auto& n : names) {
      owners[n] = owner;
      if (n.size() > 1 && n[0] == '/' && n.find('/', 1) == std::string::npos) owners[n.substr(1)] = owner;
    }
  }
  return owners;
}

int worker_uid(const History& h, int job, int rank, int pid) {
  for (const Fault& f : h.faults) {
    // aims_at: never the audit's listing of what such workers left (job -1, aimed at nobody).
    if (f.kind != "unprivileged" || !aims_at(f, job, rank, pid) || !f.detail.is_object()) continue;
    auto uid = f.detail.find("uid");
    if (uid != f.detail.end() && uid->is_number_integer()) return uid->get<int>();
  }
  return 0;
}

std::set<int> seeded_prefixes(const History& h) {
  std::set<int> out;
  for (const Fault& f : h.faults) {
    if (!f.detail.is_object()) continue;
    for (const char* key : {"name", "path"}) {
      auto it = f.detail.find(key);
      if (it != f.detail.end() && it->is_string()) out.insert(name_prefix(h, it->get<std::string>()));
    }
    for (const auto& n : json_strings(f.detail, "names")) out.insert(name_prefix(h, n));
  }
  out.erase(-1);
  return out;
}

std::string JobHold::pids() const {
  std::set<int> seen;
  std::string out;
  for (const RankHold& r : ranks) {
    if (seen.insert(r.pid).second) out += (out.empty() ? "" : ",") + std::to_string(r.pid);
  }
  return out;
}

namespace {

bool same_dirs(const History& h, int a, int b) {
  if (a == b) return true;
  if (a < 0 || b < 0 || a >= static_cast<int>(h.meta.jobs.size()) ||
      b >= static_cast<int>(h.meta.jobs.size())) {
    return false;
  }
  auto da = h.meta.jobs[a].dirs, db = h.meta.jobs[b].dirs;
  if (da.empty()) return false;
  std::sort(da.begin(), da.end());
  std::sort(db.begin(), db.end());
  return da == db;
}

RankHold rank_hold(const History& h, const Op& acq, int prefix, bool certain) {
  RankHold r;
  r.acquire = &acq;
  r.job = acq.job, r.rank = acq.rank, r.pid = acq.pid, r.prefix = prefix;
  r.certain = certain;
  r.maybe_start = acq.invoke_t;
  if (certain) r.sure_start = acq.complete_t;
  r.exit = exit_of(h, acq.job, acq.rank, acq.pid);
  auto ended_by_exit = [&]() {
    return r.exit == nullptr
               ? RankHold::End::kRunning
               : (r.exit->signal > 0 ? RankHold::End::kKilled : RankHold::End::kExited);
  };

  const Op* release = nullptr;
  if (acq.outcome == Outcome::kOk) {
    for (const Op& op : h.ops) {
      if (op.op == "release" && op.job == acq.job && op.rank == acq.rank && op.pid == acq.pid &&
          op.invoke_t >= acq.complete_t && op.outcome != Outcome::kFail &&
          dataset_of(op) == dataset_of(acq)) {
        release = &op;  // a failed release definitely did not happen: still held
        break;
      }
    }
  }
  // Certain up to its last sign of life, not beyond: when it died without
  // releasing, or (at a cut) may yet die right after it.
  auto until_last_sign = [&] {
    return std::min(std::max(last_alive(h, acq.job, acq.rank, acq.pid), r.sure_start), r.maybe_end);
  };
  if (release != nullptr) {
    r.sure_end = release->invoke_t;
    r.maybe_end = release->complete_t;
    r.end = release->outcome == Outcome::kOk ? RankHold::End::kReleased : ended_by_exit();
  } else if (r.exit != nullptr) {
    r.maybe_end = std::max(r.exit->t, acq.invoke_t);
    r.sure_end = until_last_sign();
    r.end = ended_by_exit();
  } else {
    // Running at the trial's end, or at a cut (History::cut_t), where the
    // rest of the trial may still show it died after its last sign of life:
    // a whole record then holds it certain only that far (the branch above),
    // and claiming more would let a cut call invalid what the trial does not.
    r.maybe_end = std::max(h.end_t, acq.complete_t);
    r.sure_end = h.cut_t ? until_last_sign() : r.maybe_end;
    r.end = RankHold::End::kRunning;
  }
  if (!certain) r.sure_end = 0;
  return r;
}

// An ok acquire whose "present" list (what existed under the prefix when the
// worker got it) holds nothing but what the acquiring job itself created.
bool fresh_grant(const History& h, const Op& acq) {
  if (!acq.has_present || acq.truncated) return false;  // an incomplete list shows nothing
  std::set<std::string> own;
  for (const Op& op : h.ops) {
    if (op.op == "segment" && op.job == acq.job && op.segment) own.insert(op.segment->name);
  }
  for (const SegmentRef& n : acq.present) {
    if (!own.contains(n.name)) return false;
  }
  return true;
}

// When a hold that died with its holders stops counting (see JobHold).
void settle_stale(const History& h, JobHold& j, std::int64_t death_t) {
  j.stale_end = h.end_t;
  j.stale_ended_by = "nothing cleaned it before the trial ended";
  // The earliest evidence wins; its description is made only if it does.
  auto end_at = [&](std::int64_t t, auto why) {
    if (t < j.stale_end) j.stale_end = t, j.stale_ended_by = why();
  };
  for (const Op& op : h.ops) {
    if (op.outcome != Outcome::kOk) continue;
    if (op.op == "clean" && op.complete_t > death_t) {
      bool kept = op.truncated;  // a cut report may have kept it
      for (const auto* list : {&op.kept, &op.skipped}) {
        for (const auto& n : *list) kept = kept || name_prefix(h, n) == j.prefix;
      }
      if (!kept) {
        end_at(op.complete_t,
               [&] { return fmt::format("cleanup by {} completed {}", who(op), at(h, op.complete_t)); });
      }
    } else if (op.op == "acquire" && op.invoke_t >= death_t &&
               std::ranges::any_of(op.removed, [&](const std::string& n) { return name_prefix(h, n) == j.prefix; })) {
      // An acquire begun after the death removed names of the prefix on its
      // way (its sweep): the dead job's, gone from some moment of that
      // acquire on, the earliest being its invoke. (One begun before the
      // death may have removed a previous user's names, before the dead job
      // made its own: no evidence.)
      end_at(op.invoke_t, [&] {
        return fmt::format("the acquire by {} removed its names, invoked {}", who(op), at(h, op.invoke_t));
      });
    } else if (op.op == "acquire" && op.complete_t > death_t && op.job != j.job &&
               op.prefix == j.prefix && fresh_grant(h, op)) {
      // The worker saw nothing of the prefix when it was granted: the dead
      // job's resources were gone, reclaimed within this acquire.
      end_at(std::max(op.invoke_t, death_t), [&] {
        return fmt::format("job {} was granted it with nothing of it left, invoked {}", op.job, at(h, op.invoke_t));
      });
    } else if (op.op == "acquire" && op.complete_t > death_t && op.invoke_t > j.maybe_start &&
               op.prefix == j.prefix && same_dirs(h, op.job, j.job)) {
      end_at(std::max(op.invoke_t, death_t), [&] {
        return fmt::format("{} of job {} reclaimed it, invoked {}", op.job == j.job ? "a new acquire" : "its restart",
                           op.job, at(h, op.invoke_t));
      });
    }
  }
  j.stale_end = std::max(j.stale_end, j.maybe_end);
}

}  // namespace

std::vector<JobHold> prefix_holds(const History& h) {
  // A job's prefix is what its ranks' ok acquires returned; an acquire cut off
  // in a job whose ranks all agree on one prefix possibly holds that one.
  std::map<int, std::set<int>> job_prefixes;
  for (const Op& op : h.ops) {
    if (op.op != "acquire" || op.outcome != Outcome::kOk || !op.prefix) continue;
    job_prefixes[op.job].insert(*op.prefix);
  }
  std::map<std::pair<int, int>, std::vector<RankHold>> by_job_prefix;
  for (const Op& op : h.ops) {
    if (op.op != "acquire") continue;
    if (op.outcome == Outcome::kOk) {
      if (!op.prefix) continue;
      by_job_prefix[{op.job, *op.prefix}].push_back(rank_hold(h, op, *op.prefix, true));
    } else if (op.outcome == Outcome::kInfo) {
      auto it = job_prefixes.find(op.job);
      if (it == job_prefixes.end() || it->second.size() != 1) continue;
      int p = *it->second.begin();
      by_job_prefix[{op.job, p}].push_back(rank_hold(h, op, p, false));
    }
  }

  std::vector<JobHold> holds;
  for (auto& [key, ranks] : by_job_prefix) {
    std::sort(ranks.begin(), ranks.end(),
              [](const RankHold& a, const RankHold& b) { return a.maybe_start < b.maybe_start; });
    std::vector<JobHold> groups;
    for (RankHold& r : ranks) {
      if (groups.empty() || r.maybe_start > groups.back().maybe_end) {
        groups.emplace_back();
        groups.back().job = key.first;
        groups.back().prefix = key.second;
      }
      JobHold& g = groups.back();
      g.maybe_start = std::min(g.maybe_start, r.maybe_start);
      g.maybe_end = std::max(g.maybe_end, r.maybe_end);
      g.ranks.push_back(r);
    }
    for (JobHold& g : groups) {
      const RankHold* last = nullptr;  // the certain holder that let go last
      for (const RankHold& r : g.ranks) {
        if (!r.certain) continue;
        g.sure_start = std::min(g.sure_start, r.sure_start);
        g.sure_end = std::max(g.sure_end, r.sure_end);
        if (last == nullptr || r.maybe_end > last->maybe_end ||
            (r.maybe_end == last->maybe_end && r.end == RankHold::End::kReleased)) {
          last = &r;
        }
      }
      if (last == nullptr) continue;  // only cut-off acquires: nothing certain to check
      g.died_holding = last->end == RankHold::End::kKilled || last->end == RankHold::End::kExited;
      g.killed = last->end == RankHold::End::kKilled;
      g.stale_end = g.maybe_end;
      if (g.died_holding) settle_stale(h, g, last->maybe_end);
      holds.push_back(std::move(g));
    }
  }
  std::sort(holds.begin(), holds.end(), [](const JobHold& a, const JobHold& b) {
    return std::tie(a.maybe_start, a.job, a.prefix) < std::tie(b.maybe_start, b.job, b.prefix);
  });
  return holds;
}

}  // namespace harness::checks
