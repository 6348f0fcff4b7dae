// Timeline of one trial as Chrome trace event JSON (chrome://tracing,
// ui.perfetto.dev, and timeline_html.cc all read it).
//
// Checkers report problems as text only, so "which op violated" is recovered
// from that text (docs/reports.md): a problem line names workers as
// "job J rank R (pid P)" or "rank R (pid P)" (checks::who), ops as "<op> of
// <worker> invoked +T" (checks::describe), and times as "+12.345ms" from the
// trial start (checks::at). Per line, each op of a named worker scores 3 if
// the line describes it, 2 if it cites both its invoke and completion, 1 if it
// cites one of them; the best-scoring ops of the line are its violation, the
// others with a cited time are context ("cited"), and every op of a named
// worker is "involved". A line worded otherwise marks nothing.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "harness/files.h"
#include "reports/reports.h"

namespace reports {
namespace {

using harness::Json;
using harness::Outcome;

constexpr int kTracePid = 1;
constexpr int kFaultsTid = 1;  // lanes of ranks follow

struct Mention {
  int job = -2, rank = -2, pid = 0;  // job -2: not given; pid 0: not given
};

struct Described {
  std::string op;
  Mention who;
  double at_ms;
};

// Workers, ops and times one problem line mentions.
struct Cited {
  std::vector<Mention> workers;
  std::vector<Described> described;
  std::vector<double> ms;  // from the trial start
  std::string line;        // "invariant: problem"
};

Cited parse_problem(const std::string& invariant, const std::string& line) {
  static const std::regex who(R"((?:job (-?\d+) )?rank (-?\d+)(?: \(pid (\d+)\))?)");
  static const std::regex pid_only(R"(\bpid (\d+))");
  static const std::regex describe(
      R"((\w+) of job (-?\d+) rank (-?\d+) \(pid (\d+)\) invoked ([+-]\d+\.\d+)ms)");
  static const std::regex at(R"(([+-]\d+\.\d+)ms)");
  Cited c;
  c.line = invariant + ": " + line;
  for (std::sregex_iterator it(line.begin(), line.end(), who), end; it != end; ++it) {
    const auto& m = *it;
    c.workers.push_back(
        {m[1].matched ? std::stoi(m[1]) : -2, std::stoi(m[2]), m[3].matched ? std::stoi(m[3]) : 0});
  }
  for (std::sregex_iterator it(line.begin(), line.end(), pid_only), end; it != end; ++it) {
    c.workers.push_back({-2, -2, std::stoi((*it)[1])});
  }
  for (std::sregex_iterator it(line.begin(), line.end(), describe), end; it != end; ++it) {
    const auto& m = *it;
    c.described.push_back(
        {m[1], {std::stoi(m[2]), std::stoi(m[3]), std::stoi(m[4])}, std::stod(m[5])});
  }
  for (std::sregex_iterator it(line.begin(), line.end(), at), end; it != end; ++it) {
    c.ms.push_back(std::stod((*it)[1]));
  }
  return c;
}

bool names(const Mention& m, int job, int rank, int pid) {
  if (m.pid != 0)
    return m.pid == pid && (m.rank == -2 || m.rank == rank) && (m.job == -2 || m.job == job);
  return m.rank == rank && (m.job == -2 || m.job == job);
}

const char* outcome_name(Outcome o) {
  return o == Outcome::kOk ? "ok" : o == Outcome::kFail ? "fail" : "info";
}

std::string lane_name(int job, int rank) {
  if (job < 0) return "cleanup";
  return fmt::format("job {} rank {}", job, rank);
}

}  // namespace

nlohmann::json timeline_trace(const harness::History& h, const harness::TrialResult& t) {
  // Time zero: the trial start, as the checkers' "+12.345ms" use it.
  std::int64_t t0 = h.start_t;
  if (t0 == 0) {
    t0 = std::numeric_limits<std::int64_t>::max();
    for (const auto& op : h.ops) t0 = std::min(t0, op.invoke_t);
    for (const auto& f : h.faults) t0 = std::min(t0, f.start_t);
    if (t0 == std::numeric_limits<std::int64_t>::max()) t0 = 0;
  }
  auto us = [&](std::int64_t ns) { return static_cast<double>(ns - t0) / 1000.0; };
  auto rel_ms = [&](std::int64_t ns) { return static_cast<double>(ns - t0) / 1e6; };

  // Lanes: one per (job, rank), sorted, the cleanup worker (job -1) last.
  std::map<std::pair<int, int>, std::set<int>> pids;
  for (const auto& op : h.ops) pids[{op.job, op.rank}].insert(op.pid);
  for (const auto& e : h.exits) pids[{e.job, e.rank}].insert(e.pid);
  for (const auto& f : h.faults) {
    if (f.job >= 0)
      pids[{f.job, f.rank}].insert(f.pid);  // job -1: aimed at the trial, not a worker
  }
  for (int j = 0; j < static_cast<int>(h.meta.jobs.size()); ++j) {
    for (int r = 0; r < h.meta.jobs[j].ranks; ++r) pids[{j, r}];
  }
  std::vector<std::pair<int, int>> order;
  for (const auto& [k, _] : pids) order.push_back(k);
  std::stable_partition(order.begin(), order.end(), [](const auto& k) { return k.first >= 0; });
  std::map<std::pair<int, int>, int> tid;
  for (std::size_t i = 0; i < order.size(); ++i)
    tid[order[i]] = kFaultsTid + 1 + static_cast<int>(i);

  // What the problems cite.
  std::vector<Cited> cited;
  Json problems = Json::object();
  for (const auto& c : t.checks) {
    if (c.verdict == harness::Verdict::kValid) continue;
    problems[c.invariant] = {{"verdict", harness::verdict_name(c.verdict)},
                             {"problems", c.problems}};
    for (const auto& line : c.problems) cited.push_back(parse_problem(c.invariant, line));
  }
  std::set<std::pair<int, int>> involved_lanes;
  // checks::at prints three decimals: a cited time equals an op's to within its rounding.
  auto same_ms = [](double a, double b) { return std::fabs(a - b) < 0.0006; };
  struct Mark {
    bool involved = false;
    int best = 0;  // highest score of a line that makes this op its violation
    std::vector<std::string> lines;
  };
  std::vector<Mark> marks(h.ops.size());
  for (const auto& c : cited) {
    std::vector<std::pair<std::size_t, int>> scored;
    int top = 0;
    for (std::size_t i = 0; i < h.ops.size(); ++i) {
      const auto& op = h.ops[i];
      bool named = false;
      for (const auto& m : c.workers) named |= names(m, op.job, op.rank, op.pid);
      if (!named) continue;
      marks[i].involved = true;
      int score = 0;
      for (const auto& d : c.described) {
        if (d.op == op.op && names(d.who, op.job, op.rank, op.pid) &&
            same_ms(d.at_ms, rel_ms(op.invoke_t)))
          score = 3;
      }
      if (score == 0) {
        bool inv = false, done = false;
        for (double ms : c.ms)
          inv |= same_ms(ms, rel_ms(op.invoke_t)), done |= same_ms(ms, rel_ms(op.complete_t));
        score = inv && done ? 2 : inv || done ? 1 : 0;
      }
      if (score == 0) continue;
      scored.push_back({i, score});
      top = std::max(top, score);
    }
    for (const auto& [i, score] : scored) {
      marks[i].lines.push_back(c.line);
      if (score == top) marks[i].best = std::max(marks[i].best, score);
    }
  }

  Json events = Json::array();
  auto meta = [&](const char* name, int tid_, Json args) {
    events.push_back({{"ph", "M"},
                      {"name", name},
                      {"pid", kTracePid},
                      {"tid", tid_},
                      {"args", std::move(args)}});
  };
  events.push_back({{"ph", "M"},
                    {"name", "process_name"},
                    {"pid", kTracePid},
                    {"args", {{"name", fmt::format("{} trial {}", t.scenario, t.trial)}}}});
  meta("thread_name", kFaultsTid, {{"name", "faults"}});
  meta("thread_sort_index", kFaultsTid, {{"sort_index", kFaultsTid}});

  int violating_ops = 0;
  for (std::size_t i = 0; i < h.ops.size(); ++i) {
    const auto& op = h.ops[i];
    const Mark& mark = marks[i];
    Json args = {{"outcome", outcome_name(op.outcome)}, {"id", op.id}, {"pid", op.pid}};
    if (!op.args.is_null() && !(op.args.is_object() && op.args.empty())) args["args"] = op.args;
    if (op.outcome == Outcome::kOk && !op.value.is_null()) args["value"] = op.value;
    if (op.outcome == Outcome::kFail)
      args["error"] = {{"code", op.error_code}, {"message", op.error_message}};
    if (op.outcome == Outcome::kInfo)
      args["error"] = {{"code", "unknown"}, {"message", op.info_cause}};
    Json ev = {{"ph", "X"},
               {"name", op.op},
               {"cat", "op"},
               {"pid", kTracePid},
               {"tid", tid[{op.job, op.rank}]},
               {"ts", us(op.invoke_t)},
               {"dur", std::max(0.0, static_cast<double>(op.complete_t - op.invoke_t) / 1000.0)}};
    if (mark.involved) {
      args["involved"] = true;
      involved_lanes.insert({op.job, op.rank});
    }
    if (!mark.lines.empty()) args["violations"] = mark.lines;
    if (mark.best > 0) {
      args["violation"] = true;
      ev["cname"] = "terrible";
      ++violating_ops;
    } else if (!mark.lines.empty()) {
      args["cited"] = true;
      ev["cname"] = "olive";
    } else if (op.outcome == Outcome::kFail) {
      ev["cname"] = "bad";
    } else if (op.outcome == Outcome::kInfo) {
      ev["cname"] = "grey";
    }
    ev["args"] = std::move(args);
    events.push_back(std::move(ev));
  }
  for (const auto& c : cited) {
    for (const auto& m : c.workers) {
      for (const auto& [key, ps] : pids) {
        if (m.pid != 0 ? ps.contains(m.pid) : names(m, key.first, key.second, 0))
          involved_lanes.insert(key);
      }
    }
  }

  for (const auto& [key, lane] : tid) {
    std::string name = lane_name(key.first, key.second);
    const auto& ps = pids[key];
    if (!ps.empty()) {
      std::vector<std::string> p;
      for (int x : ps) p.push_back(std::to_string(x));
      name += fmt::format(" (pid{} {})", ps.size() > 1 ? "s" : "", fmt::join(p, ", "));
    }
    meta("thread_name", lane, {{"name", name}});
    meta("thread_sort_index", lane, {{"sort_index", lane}});
  }

  for (const auto& f : h.faults) {
    std::string target = f.job >= 0 ? lane_name(f.job, f.rank) : "trial";
    Json args = {{"kind", f.kind}, {"target", target}};
    if (f.pid) args["pid"] = f.pid;
    if (!f.detail.is_null() && !f.detail.empty()) args["detail"] = f.detail;
    // A window the history never saw closed was closed at the trial end by build_history.
    const bool window = f.end_t > f.start_t;
    Json ev = {
        {"name", f.kind + " " + target}, {"cat", "fault"}, {"pid", kTracePid}, {"tid", kFaultsTid},
        {"ts", us(f.start_t)},           {"args", args}};
    if (window) {
      ev["ph"] = "X";
      ev["dur"] = static_cast<double>(f.end_t - f.start_t) / 1000.0;
      ev["cname"] = "yellow";
    } else {
      ev["ph"] = "i";
      ev["s"] = "t";
      ev["cname"] = "terrible";
    }
    events.push_back(ev);
    // The same fault on its victim's lane, so a viewer shows it next to the ops it cut.
    if (auto it = tid.find({f.job, f.rank}); f.job >= 0 && it != tid.end()) {
      ev["tid"] = it->second;
      ev["name"] = f.kind;
      events.push_back(std::move(ev));
    }
  }

  for (const auto& e : h.exits) {
    auto it = tid.find({e.job, e.rank});
    if (it == tid.end()) continue;
    std::string what = !e.crash_point.empty() ? "crash point " + e.crash_point
                       : e.signal > 0         ? fmt::format("signal {}{}", e.signal,
                                                    e.signal_sent_by_harness ? " (harness)" : "")
                                              : fmt::format("exit {}", e.exit_code);
    Json args = {
        {"pid", e.pid}, {"exit_code", e.exit_code}, {"signal", e.signal}, {"teardown", e.teardown}};
    if (!e.crash_point.empty()) args["crash_point"] = e.crash_point;
    events.push_back({{"ph", "i"},
                      {"s", "t"},
                      {"name", what},
                      {"cat", "exit"},
                      {"pid", kTracePid},
                      {"tid", it->second},
                      {"ts", us(e.t)},
                      {"args", std::move(args)}});
  }

  Json lanes = Json::array();
  for (const auto& key : order) {
    lanes.push_back({{"tid", tid[key]},
                     {"job", key.first},
                     {"rank", key.second},
                     {"involved", involved_lanes.contains(key)}});
  }
  Json other = {{"scenario", t.scenario},
                {"trial", t.trial},
                // Strings: seeds use all 64 bits, and JavaScript numbers keep 53.
                {"seed", std::to_string(t.seed)},
                {"run_seed", std::to_string(t.run_seed)},
                {"verdict", harness::verdict_name(t.verdict)},
                {"trial_dir", t.dir},
                {"reproduce", t.reproduce},
                {"duration_ms", h.end_t > t0 ? rel_ms(h.end_t) : 0.0},
                {"timed_out", h.timed_out},
                {"problems", problems},
                {"violating_ops", violating_ops},
                {"faults_tid", kFaultsTid},
                {"lanes", lanes}};
  if (t.harness_error) other["harness_error"] = t.harness_error_text;
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData", std::move(other)}};
}

bool write_timeline(const harness::TrialResult& t, const harness::TrialMeta& meta,
                    std::string* err) {
  std::string why;
  const auto text =
      harness::read_regular_file(t.dir + "/history.jsonl", harness::kMaxHistoryBytes, &why);
  if (!text) {
    if (err != nullptr) *err = "cannot read " + t.dir + "/history.jsonl: " + why;
    return false;
  }
  std::vector<std::string> errors;
  auto events = harness::parse_jsonl(*text, &errors);
  harness::History h = harness::build_history(events, meta, &errors);
  Json trace = timeline_trace(h, t);
  for (const auto& [file, text] :
       {std::pair{t.dir + "/timeline.json", trace.dump(1, ' ', false, Json::error_handler_t::replace) + "\n"},
        std::pair{t.dir + "/timeline.html", timeline_html(trace)}}) {
    // A trial dir's own files, unsynced as its history.jsonl is (files.h).
    if (auto e = harness::write_output(file, text, harness::OutputOrigin::kDerived,
                                       harness::Durability::kUnsynced)) {
      if (err != nullptr) *err = e->message;
      return false;
    }
  }
  return true;
}

}  // namespace reports
