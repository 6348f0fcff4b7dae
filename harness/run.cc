#include "run.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <system_error>

#include "concurrency.h"
#include "coverage.h"
#include "cut.h"
#include "events.h"
#include "files.h"
#include "injector.h"
#include "plan.h"
#include "run_lease.h"
#include "subjects.h"
#include "supervisor.h"
#include "trial_dirs.h"
#include "zygote_server.h"

namespace harness {
namespace fs = std::filesystem;

namespace {

// Set by SIGINT, SIGTERM, SIGHUP or SIGPIPE (install_stop_signals): sticky for
// the process, so a signal that came while scenarios loaded, or during one
// run of a replay or a shrink, stops the rest too.
volatile std::sig_atomic_t g_signalled = 0;
void on_stop(int) { g_signalled = 1; }
// The adaptive concurrency's tick: it only interrupts waitpid().
void on_tick(int) {}

std::string quote(const std::string& s) {
  if (s.find_first_of(" '\"$\\") == std::string::npos) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The `sometimes` fault (injectors/sometimes.cc), planned after every other
// fault of the trial, so it only takes the ranks no other fault stops, from a
// stream of its own, so the other faults' draws - every trial's plan without
// it - stay what they were. The scenario's own [[fault]] of that kind if it
// lists one; else the run adds one with the defaults unless the run
// (`add`) or the scenario (`sometimes = false`) turned it off.
std::optional<std::string> plan_sometimes(const Scenario& s, bool add, TrialPlan& plan) {
  std::optional<FaultSpec> spec;
  for (const auto& f : s.faults) {
    if (f.kind == "sometimes") spec = f;
  }
  if (!spec && add && s.sometimes) spec = FaultSpec{"sometimes", nlohmann::json::object()};
  if (!spec) return std::nullopt;
  Rng own(derive_seed(plan.seed, "sometimes", 0));
  if (auto why = find_injector("sometimes")->plan(*spec, s, own, plan))
    return s.file + ":" + std::to_string(spec->line) + ": cannot be planned into this trial: " + *why;
  return std::nullopt;
}

// When an open op is a hang whatever the trial does next, for the
// supervisor's early end (supervisor_hang.cc): where barrier.liveness and
// prefix.progress call it one - its deadline + grace, without CPU wait - plus
// a second of margin. Ops without a deadline are never ended early.
std::map<std::string, std::int64_t> hang_bounds(const TrialMeta& m) {
  constexpr std::int64_t kMarginNs = 1'000'000'000;
  std::map<std::string, std::int64_t> out;
  if (m.barrier_deadline_ns > 0) {
    for (const char* op : {"barrier_attach", "barrier", "barrier_detach"})
      out[op] = m.barrier_deadline_ns + m.grace_ns + kMarginNs;
  }
  if (m.acquire_deadline_ns > 0) {
    for (const char* op : {"acquire", "release"}) out[op] = m.acquire_deadline_ns + m.grace_ns + kMarginNs;
  }
  return out;
}

// How long past its trial's timeout a supervisor may take (heal, cleanup
// step, audit: about 20 s at most) before the run calls it hung.
constexpr std::chrono::seconds kSupervisorGrace{60};

// Trials whose plans load_and_validate draws to find faults that cannot share
// a trial: planning costs microseconds.
constexpr int kValidationTrials = 256;

// What validation plans faults into: unseeded_plan(s) without the workers'
// base environment. An injector's plan() reads only the keys it (or an
// earlier fault) sets, and copying every worker's protocol variables into
// each of a scenario's kValidationTrials draws was a third of the load's CPU.
TrialPlan validation_plan(const Scenario& s) {
  TrialPlan p = unseeded_plan(s);
  for (auto& w : p.workers) w.env.clear();
  return p;
}

// "file:line: why" if the scenario's faults, planned together into one trial
// as run() plans them, conflict in some trial. `base` is validation_plan(s),
// built once by the caller.
std::optional<std::string> faults_conflict(const Scenario& s, const std::string& f,
                                           const TrialPlan& base) {
  // A trial takes one `sometimes` (plan_sometimes, after every other fault):
  // a second would be dropped without a word.
  int sometimes_at = 0;
  for (const auto& fault : s.faults) {
    if (fault.kind != "sometimes") continue;
    if (sometimes_at > 0) {
      return f + ":" + std::to_string(fault.line) + ": a second fault of kind sometimes (the first is at line " +
             std::to_string(sometimes_at) + "): a trial takes one; give its parameters to that one";
    }
    sometimes_at = fault.line;
  }
  // One plan assigned over and over: the assignment reuses its maps' nodes.
  TrialPlan plan;
  for (int trial = 0; trial < kValidationTrials && !s.faults.empty(); ++trial) {
    plan = base;
    seed_trial(plan, s, 1, trial);
    Rng rng(plan.seed);
    std::map<std::string, int> seeded;  // "where:name" -> the line of the fault that seeds it
    for (const auto& fault : s.faults) {
      if (fault.kind == "sometimes") continue;  // planned last, as run() does
      const std::size_t seeds_before = plan.seeds.size();
      if (auto why = find_injector(fault.kind)->plan(fault, s, rng, plan)) {
        return f + ":" + std::to_string(fault.line) + ": " + *why +
               " (with the faults before it in the file, planned into one trial as every trial is" +
               (trial > 0 ? ", e.g. trial " + std::to_string(trial) + " of seed 1" : std::string()) + ")";
      }
      for (std::size_t i = seeds_before; i < plan.seeds.size(); ++i) {
        const Seed& sd = plan.seeds[i];
        const auto [it, fresh] = seeded.emplace(sd.where + ":" + sd.name, fault.line);
        if (fresh) continue;
        return f + ":" + std::to_string(fault.line) + ": seeds " + (sd.where == "lock" ? "the lock file " : "the segment ") +
               sd.name + ", which " +
               (it->second == fault.line ? "it seeds twice" : "the fault at line " + std::to_string(it->second) + " seeds too") +
               ": one file, one seed (a second holder of a held lock would wait for the first forever)";
      }
    }
    if (auto why = plan_sometimes(s, false, plan)) return why;
  }
  return std::nullopt;
}

}  // namespace

void install_stop_signals(bool restart) {
  struct sigaction sa{};
  sa.sa_handler = on_stop;
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaction(sig, &sa, nullptr);
}

bool stop_signalled() { return g_signalled != 0; }

namespace {

// One file's checks but the costly one (faults_conflict): "" if it passed
// them all; `late` if it failed one that comes after faults_conflict in a
// file's order of checks, so a conflict in the same file is named first.
struct FileCheck {
  std::string err;
  bool late = false;
};

FileCheck check_file(const std::string& f, std::optional<Scenario>& s, const TrialPlan& base,
                     const std::vector<Scenario>& before) {
  for (const auto& fault : s->faults) {
    const InjectorInfo* inj = find_injector(fault.kind);
    if (!inj)
      return {f + ":" + std::to_string(fault.line) + ": unknown fault kind '" + fault.kind +
              "' (see `shmstress list`)"};
    TrialPlan scratch = base;
    seed_plan(scratch, *s, 1, 0);
    Rng rng(1);
    if (auto why = inj->plan(fault, *s, rng, scratch)) {
      int line = fault.line;
      for (const auto& [k, l] : fault.param_lines) {
        if (why->find("'" + k + "'") != std::string::npos) line = l;
      }
      return {f + ":" + std::to_string(line) + ": " + *why};
    }
  }
  if (!s->subject.empty()) {
    std::string why;
    auto subj = resolve_subject(s->subject, {f}, &why);
    if (!subj) return {f + ":" + std::to_string(s->subject_line) + ": " + why, true};
    s->subject_command = subj->command;
    s->subject_root = subj->shm_root;
    s->subject_shm_size = subj->shm_size;
  }
  // Trials are stored under <out>/<name>/: two scenarios of one name would
  // write into each other's trial dirs.
  for (const auto& other : before) {
    if (other.name != s->name) continue;
    return {
        f + ": scenario name '" + s->name + "' is also " + other.file +
            "'s: their trial dirs would collide (set a different 'name', or give the file once)",
        true};
  }
  return {};
}

}  // namespace

bool load_and_validate(const std::vector<std::string>& files, std::vector<Scenario>* out, std::string* err) {
  // Every check but faults_conflict runs file by file; faults_conflict (three
  // quarters of the load's CPU: kValidationTrials draws a scenario) runs after,
  // over the files that passed, on two threads, before the first trial: the
  // time a user waits for a first violation starts at the command. The error
  // named is the one the file-by-file order meets first, as before.
  std::vector<TrialPlan> bases;  // validation_plan of each file that reached faults_conflict
  std::vector<std::vector<std::string>> warnings;  // each file's, printed once its fate is known
  std::string stop_err;             // the first file that failed a cheap check, if any
  std::optional<Scenario> stopped;  // that file, when its check came after faults_conflict
  const std::size_t first_new = out->size();
  for (const auto& f : files) {
    ScenarioError e;
    auto s = load_scenario(f, &e);
    if (!s) {
      stop_err = e.to_string();
      break;
    }
    for (const auto* states : {&s->expect_reached, &s->expect_evidence}) {
      for (const auto& entry : *states) {
        for (std::size_t at = 0;;) {  // expect_evidence may list "a|b"
          std::size_t bar = entry.find('|', at);
          std::string st = entry.substr(at, bar == std::string::npos ? std::string::npos : bar - at);
          if (st.starts_with("fault:") && !find_injector(st.substr(6)) && stop_err.empty()) {
            // The parser checked the shape at the entry's line; the kinds are
            // known only here: name the first line that quotes the entry.
            int line = 0, n = 1;
            for (std::size_t p = 0; p < s->raw_toml.size(); ++p) {
              if (s->raw_toml.compare(p, st.size() + 2, "\"" + st + "\"") == 0) {
                line = n;
                break;
              }
              n += s->raw_toml[p] == '\n';
            }
            stop_err = f + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": '" + st +
                       "' names an unknown fault kind (see `shmstress list`)";
          }
          if (bar == std::string::npos) break;
          at = bar + 1;
        }
      }
    }
    if (!stop_err.empty()) break;
    warnings.push_back(s->warnings);
    TrialPlan plan = validation_plan(*s);
    FileCheck c = check_file(f, s, plan, *out);
    if (!c.err.empty()) {
      stop_err = c.err;
      if (c.late) {
        stopped = std::move(s);
        bases.push_back(std::move(plan));
      }
      break;
    }
    bases.push_back(std::move(plan));
    out->push_back(std::move(*s));
  }
  // Two faults that cannot share a rank or a job (two stops at a point, two
  // containers for one job), or two that seed one file (a second holder of a
  // held lock would wait forever), are refused here, never one silently
  // dropped. Targets drawn at random are drawn as kValidationTrials trials
  // would draw them.
  const std::size_t n = bases.size();
  auto scenario = [&](std::size_t i) -> const Scenario& {
    return first_new + i < out->size() ? (*out)[first_new + i] : *stopped;
  };
  std::vector<std::optional<std::string>> conflict(n);
  auto judge = [&](std::size_t from, std::size_t step) {
    for (std::size_t i = from; i < n; i += step)
      conflict[i] = faults_conflict(scenario(i), scenario(i).file, bases[i]);
  };
  // get() rethrows what the second thread threw, as the sequential code
  // would have; the future waits for that thread however this one leaves. A
  // thread that cannot start leaves it all to this one.
  std::future<void> other;
  if (n > 1) {
    try {
      other = std::async(std::launch::async, judge, 1, 2);
    } catch (const std::system_error&) {
    }
  }
  judge(0, other.valid() ? 2 : 1);
  if (other.valid()) other.get();
  for (std::size_t i = 0; i < warnings.size(); ++i) {
    for (const auto& w : warnings[i]) std::fprintf(stderr, "warning: %s\n", w.c_str());
    if (i >= n || !conflict[i]) continue;
    *err = *conflict[i];
    out->erase(out->begin() + static_cast<std::ptrdiff_t>(first_new + i), out->end());
    return false;
  }
  if (!stop_err.empty()) {
    *err = stop_err;
    return false;
  }
  return true;
}

TrialMeta meta_for(const Scenario& s, std::uint64_t seed) {
  TrialMeta m;
  m.scenario = s.name;
  m.seed = seed;
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    const auto& js = s.jobs[j];
    JobMeta jm;
    jm.ranks = js.ranks;
    jm.barrier_rounds = js.workload.rounds;
    if (js.loader.workers > 0 && js.loader.enter_barrier) jm.barrier_workers = js.loader.workers;
    jm.misconfigured = js.lws_mode != LwsMode::kSet;
    jm.root_suffix = js.root_suffix;
    jm.acquire = js.workload.acquire;
    for (auto d : js.dirs) {
      for (std::size_t at; (at = d.find("{job}")) != std::string::npos;) d.replace(at, 5, std::to_string(j));
      jm.dirs.push_back(d);
      jm.has_remote.push_back(js.remote);
    }
    m.jobs.push_back(std::move(jm));
  }
  m.acquire_deadline_ns = s.acquire_deadline.count() * 1000000LL;
  m.barrier_deadline_ns = s.barrier_deadline.count() * 1000000LL;
  m.liveness_ns = s.liveness.count() * 1000000LL;
  m.release_ns = s.release.count() * 1000000LL;
  m.spin_budget_ns = s.spin.count() * 1000000LL;
  m.cleanup_step = s.final_cleanup;
  return m;
}

double fault_lateness_ms(const History& h, const std::vector<Action>& actions) {
  if (!h.started) return 0;
  std::vector<bool> used_start(h.faults.size(), false), used_end(h.faults.size(), false);
  double worst = 0;
  for (const auto& a : actions) {
    // Timed signals only (kill, stop, continue): they are sent the moment
    // they are due, while other actions (seeds, misconfigurations) are logged
    // once the workers are spawned, which says nothing about lateness.
    if (!a.on_type.empty() || a.signal == 0) continue;
    const bool end = a.phase == "end";
    auto& used = end ? used_end : used_start;
    const double at_ms = static_cast<double>(a.at_ns) / 1e6;
    for (std::size_t i = 0; i < h.faults.size(); ++i) {
      const Fault& f = h.faults[i];
      if (used[i] || f.kind != a.fault || f.job != a.job || f.rank != a.rank) continue;
      const double rel_ms = static_cast<double>((end ? f.end_t : f.start_t) - h.start_t) / 1e6;
      if (rel_ms + 0.5 < at_ms) continue;  // an earlier fault of the same kind
      used[i] = true;
      worst = std::max(worst, rel_ms - at_ms);
      break;
    }
  }
  return worst;
}

TrialResult check_trial_dir(const Scenario& s, const std::string& dir, int trial, std::uint64_t run_seed,
                            std::uint64_t seed, const std::vector<Action>* planned) {
  TrialResult t;
  t.scenario = s.name;
  t.scenario_file = s.file;
  t.trial = trial;
  t.run_seed = run_seed;
  t.seed = seed;
  t.dir = dir;
  std::vector<std::string> errors;
  // A history that is there but cannot be read (over kMaxHistoryBytes, not a
  // regular file) is the subject's doing: a history error, the trial unknown.
  std::string unread;
  auto text = read_regular_file(dir + "/history.jsonl", kMaxHistoryBytes, &unread);
  std::error_code exists_ec;
  const bool refused = !text && fs::exists(dir + "/history.jsonl", exists_ec);
  if (refused) errors.push_back("history.jsonl not read: it " + unread);
  const std::vector<Json> events = parse_jsonl(text.value_or(std::string()), &errors);
  const TrialMeta meta = meta_for(s, seed);
  const std::size_t parse_errors = errors.size();
  History h = build_history(events, meta, &errors);
  if (planned) t.late_ms = fault_lateness_ms(h, *planned);
  // The supervisor stopped the trial at a violation (harness/cut.h): the
  // record up to its mark is what is judged. A mark that decides nothing
  // there (one a subject wrote, say) is ignored and the whole record judged,
  // so no line anyone writes can hide a violation.
  std::optional<CutJudgement> at_mark;
  if (!h.cut_marks.empty()) {
    const std::vector<std::string> judges_cuts = cut_invariants(s.excuses);
    for (const std::int64_t mark : h.cut_marks) {
      if (CutJudgement j = judge_cut(events, meta, mark, judges_cuts); j.decisive) {
        at_mark = std::move(j);
        break;
      }
    }
  }
  if (at_mark) {
    // The parse's errors stay (a decisive cut has none of its own); the
    // whole record's are not this record's.
    errors.resize(parse_errors);
    h = std::move(at_mark->history);
  }
  // What the supervisor and the subject said about the trial itself, as
  // build_history validated it. A subject that cannot run here (e.g. its
  // package is not installed) says so: the trial is inconclusive, with the
  // reason — never a silent pass.
  for (const auto& message : h.harness_errors) {
    t.harness_error = true;
    t.harness_error_text += message + "; ";
  }
  if (h.unavailable) t.unavailable = *h.unavailable;
  if (!refused && (!h.started || !h.ended)) {
    if (h.malformed_trial_event) {
      errors.push_back("the history has no well-formed trial start and end");
    } else {
      t.harness_error = true;
      t.harness_error_text += "the trial supervisor did not finish its history";
    }
  }
  for (const auto& op : h.ops) t.cpu_wait_ms = std::max(t.cpu_wait_ms, static_cast<double>(op.cpu_wait_ns()) / 1e6);
  for (const auto& e : h.exits) t.cpu_wait_ms = std::max(t.cpu_wait_ms, static_cast<double>(e.reaper_wait_ns) / 1e6);
  t.checks = run_checkers(h);
  for (auto& c : t.checks) {
    if (refused) c = CheckResult{c.invariant, Verdict::kUnknown, {errors.front()}, {}, {}};
    t.reached.insert(c.reached.begin(), c.reached.end());
    if (auto it = s.excuses.find(c.invariant); it != s.excuses.end()) {
      c.excused = it->second;  // shown, not counted
      continue;
    }
    t.verdict = compose(t.verdict, c.verdict);
  }
  // A history that does not fit the protocol shows nothing for certain.
  t.history_error_count = errors.size();
  for (std::size_t i = 0; i < errors.size() && i < 10; ++i) t.history_errors.push_back(errors[i]);
  if (!errors.empty()) t.verdict = compose(t.verdict, Verdict::kUnknown);
  if (t.harness_error) t.verdict = compose(t.verdict, Verdict::kUnknown);
  if (!t.unavailable.empty()) {
    t.checks.clear();  // nothing ran: nothing to judge
    t.verdict = Verdict::kUnknown;
    t.reached.insert("subject-unavailable");
  }
  // Coverage: what the trial reached besides the checkers' states.
  for (const auto& f : h.faults) {
    if (f.end_t == f.start_t || f.end_t > 0) ++t.faults[f.kind];
    t.reached.insert("fault:" + f.kind);
  }
  // A crash point fires inside the subject: its trace is the worker's own
  // `point` event before a death by signal, not a fault event.
  for (const auto& e : h.exits) {
    if (!e.crash_point.empty()) t.reached.insert("fault:crash-point");
  }
  for (const auto& op : h.ops) {
    if (op.outcome == Outcome::kFail) t.reached.insert("error:" + op.op + ":" + op.error_code);
  }
  add_window_states(h, &t.reached);
  // A known-bad subject's scenario: did it break what it expects, for the
  // reason it names (the subject's own evidence, in this trial)?
  if (!s.expect_violation.empty() && t.unavailable.empty()) {
    auto join = [](const std::vector<std::string>& v, const char* sep) {
      std::string out;
      for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
      return out;
    };
    t.expected = join(s.expect_violation, " or ");
    if (!s.expect_evidence.empty()) t.expected += " with " + join(s.expect_evidence, " and ");
    std::vector<std::string> broke, expected_broke, missing;
    for (const auto& c : t.checks) {
      if (c.verdict != Verdict::kInvalid || !c.excused.empty()) continue;
      broke.push_back(c.invariant);
      if (std::find(s.expect_violation.begin(), s.expect_violation.end(), c.invariant) != s.expect_violation.end()) {
        expected_broke.push_back(c.invariant);
      }
    }
    for (const auto& e : s.expect_evidence) {  // "a|b": either will do
      bool seen = false;
      for (std::size_t at = 0;;) {
        std::size_t bar = e.find('|', at);
        seen = seen || t.reached.contains(e.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
        if (bar == std::string::npos) break;
        at = bar + 1;
      }
      if (!seen) missing.push_back(e);
    }
    if (!expected_broke.empty() && missing.empty()) {
      t.expectation = Expectation::kMet;
      t.expectation_note = "broke " + join(expected_broke, ", ") +
                           (s.expect_evidence.empty() ? "" : " with " + join(s.expect_evidence, ", "));
    } else if (!expected_broke.empty()) {
      t.expectation = Expectation::kNoEvidence;
      t.expectation_note = "broke " + join(expected_broke, ", ") + " but without " + join(missing, ", ") +
                           ": not for the reason the scenario names";
    } else if (!broke.empty()) {
      t.expectation = Expectation::kOther;
      t.expectation_note = "broke only " + join(broke, ", ") + ", not " + join(s.expect_violation, " or ");
    } else {
      t.expectation = Expectation::kClean;
      t.expectation_note = "broke nothing";
    }
  }
  // Recovery: from the end of a fault window to the next round that completed.
  for (const auto& f : h.faults) {
    if (f.end_t <= 0) continue;
    std::int64_t next = 0;
    for (const auto& op : h.ops) {
      if (op.op == "barrier" && op.outcome == Outcome::kOk && op.complete_t > f.end_t && (next == 0 || op.complete_t < next)) {
        next = op.complete_t;
      }
    }
    if (next > 0) t.recovery_ms.push_back((next - f.end_t) / 1e6);
  }
  for (const auto& op : h.ops) {
    if (op.outcome != Outcome::kOk) continue;
    double ms = (op.complete_t - op.invoke_t) / 1e6;
    if (op.op == "acquire") t.acquire_ms.push_back(ms);
    if (op.op == "barrier") t.barrier_ms.push_back(ms);
  }
  nlohmann::json v = {{"verdict", verdict_name(t.verdict)}, {"history_errors", errors}};
  for (const auto& c : t.checks) {
    nlohmann::json check = {{"invariant", c.invariant}, {"verdict", verdict_name(c.verdict)}, {"problems", c.problems}, {"reached", c.reached}};
    if (!c.excused.empty()) check["excused"] = c.excused;
    v["checks"].push_back(std::move(check));
  }
  if (t.expectation != Expectation::kNone) {
    v["expectation"] = {{"expected", t.expected}, {"result", expectation_name(t.expectation)}, {"note", t.expectation_note}};
  }
  write_trial_file(dir + "/verdict.json", v.dump(2) + "\n");
  return t;
}

// A trial runs the run's subject when --subject was given or its scenario names none.
bool runs_run_subject(const Scenario& s, const RunOptions& opt) { return opt.subject_explicit || s.subject.empty(); }

int default_max_parallel(const std::vector<Scenario>& scenarios, const RunOptions& opt, int cores) {
  if (opt.max_parallel > 0) return std::min(256, opt.max_parallel);
  bool external = false;
  for (const Scenario& s : scenarios) {
    if ((runs_run_subject(s, opt) ? opt.subject : s.subject) != "native") external = true;
  }
  return std::min(256, (external ? kTrialsPerCoreExternal : kTrialsPerCore) * std::max(1, cores));
}

std::vector<const Scenario*> start_order(const std::vector<Scenario>& scenarios, int round) {
  std::vector<const Scenario*> order;
  for (const auto& s : scenarios) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](const Scenario* a, const Scenario* b) {
    return (a->every > 1) < (b->every > 1);
  });
  if (round % 2 == 1) {
    const auto cheap_end =
        std::find_if(order.begin(), order.end(), [](const Scenario* s) { return s->every > 1; });
    std::reverse(order.begin(), cheap_end);
  }
  return order;
}

RunResult run(const std::vector<Scenario>& scenarios, const RunOptions& opt) {
  RunResult r;
  r.seed = opt.seed ? opt.seed : std::random_device{}() | (static_cast<std::uint64_t>(std::random_device{}()) << 32);
  auto now = std::chrono::system_clock::now();
  std::time_t tt = std::chrono::system_clock::to_time_t(now);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&tt));
  r.run_id = std::string(stamp) + "-" + std::to_string(::getpid());
  r.out_dir = opt.out_dir.empty() ? "runs/" + r.run_id : opt.out_dir;
  r.subject = opt.subject;
  if (!opt.subject_explicit && !scenarios.empty() && !scenarios.front().subject.empty()) r.subject = scenarios.front().subject;
  r.shard_index = opt.shard_index;
  r.shard_count = std::max(1, opt.shard_count);
  r.max_listed = opt.max_kept > 0 ? static_cast<std::size_t>(opt.max_kept) : 0;
  r.tally.buckets().set_baseline(opt.baseline);
  {
    std::error_code ec;
    fs::create_directories(r.out_dir, ec);
    fs::path canonical = ec ? fs::path() : fs::canonical(r.out_dir, ec);
    if (ec) {
      r.error = "cannot create the run directory " + r.out_dir + ": " + ec.message();
      return r;
    }
    r.out_dir = canonical.string();
  }
  for (const auto& s : scenarios) {
    // What the scenario names, and every fault kind it injects: a fault that
    // fired in none of the run's trials (a trigger nothing logs, a point the
    // subject never passes, a kill after everyone exited) tested nothing, and
    // the run is inconclusive (exit 4) rather than green.
    std::vector<std::string> states = s.expect_reached;
    for (const auto& f : s.faults) {
      if (std::find(states.begin(), states.end(), "fault:" + f.kind) == states.end()) states.push_back("fault:" + f.kind);
    }
    if (!states.empty()) r.expect_reached[s.name] = std::move(states);
  }
  // Trials that may place names in the machine's shared /dev/shm do so under
  // a lease (run_lease.h): `clean` then knows whether this run is alive from
  // any pid namespace. A /dev/shm nobody can create in (read-only, full)
  // fails here, before any trial: the environment, never a green run.
  std::optional<RunLease> lease;
  if (may_use_shared_shm(opt.allow_mount_ns)) {
    std::string why;
    auto taken = RunLease::take(&why);
    if (!taken) {
      r.error = why;
      return r;
    }
    lease.emplace(std::move(*taken));
  }

  struct Pending {
    const Scenario* s;
    int trial;
  };
  // Trials to start, oldest first. A soak refills it one round at a time and
  // drops what it started, so it never holds more than a round.
  std::deque<Pending> queue;
  // Shard i of n runs the trial indices congruent to i mod n: shards with the
  // same seed split the seed space with no overlap and no gap.
  const int shards = std::max(1, opt.shard_count), shard = opt.shard_index;
  auto enqueue_round = [&](int round_base, int per) {
    for (const Scenario* sp : start_order(scenarios, round_base)) {
      const Scenario& s = *sp;
      // --trials N gives a costly scenario (every = k) its share, N / k, at least one.
      int n = opt.trials > 0 ? std::max(1, (opt.trials + s.every - 1) / s.every) : s.default_trials;
      if (opt.only_trial) {
        if (round_base == 0) queue.push_back({&s, *opt.only_trial});
        continue;
      }
      if (per > 0) {  // duration mode: round r is this shard's r-th index
        // A costly scenario joins every s.every-th round: its own trial
        // indices stay consecutive (round r runs its (r / every)-th).
        if (round_base % s.every == 0)
          queue.push_back({&s, (round_base / s.every) * shards + shard});
        continue;
      }
      for (int i = shard; i < n; i += shards) queue.push_back({&s, i});
    }
  };
  const bool soak = by_duration(opt);
  enqueue_round(0, soak ? 1 : 0);
  const auto planned = static_cast<std::int64_t>(queue.size());
  r.planned = soak ? -1 : planned;
  r.duration_s = soak ? opt.duration_s : 0;
  int round = 1;

  install_stop_signals(false);
  // The run stops starting trials once a signal came, or (stop_on_violation)
  // once it has what it was asked for.
  bool stop_asked = false;
  auto stopping = [&] { return stop_asked || g_signalled != 0; };

  // Trials at once: --parallel, or a target that follows the load.
  const int cores = std::max(1, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
  std::unique_ptr<LoadProbe> probe;
  std::optional<AdaptiveConcurrency> adaptive;
  if (opt.parallel <= 0) {
    AdaptiveConcurrency::Config c;
    // Trials mostly sleep: up to kTrialsPerCore per core by default (run.h),
    // as far as the load and the trials' own timing allow (concurrency.h).
    c.max = default_max_parallel(scenarios, opt, cores);
    // Start at the ceiling, not at the cores: the first round of a catalog
    // is where a run finds most of what it will find (one trial of every
    // scenario), and at 2 it spent its first seconds growing. The controller
    // still backs off from there at the first sign of load (issue 20 §4:
    // median time to a first violation 2.7 -> 2.1 s over tests/mutants).
    c.start = c.max;
    adaptive.emplace(c);
    probe = std::make_unique<LoadProbe>();
  }
  // A tick interrupts waitpid(): every 250 ms, so an adaptive target follows
  // the load between trials too; else every second, for the watchdog below.
  // Interval timers are not inherited across fork().
  {
    struct sigaction tick{};
    tick.sa_handler = on_tick;
    sigaction(SIGALRM, &tick, nullptr);
    const suseconds_t us = adaptive ? 250000 : 0;
    itimerval every{{adaptive ? 0 : 1, us}, {adaptive ? 0 : 1, us}};
    setitimer(ITIMER_REAL, &every, nullptr);
  }
  auto parallel = [&] { return adaptive ? adaptive->target() : opt.parallel; };
  r.concurrency.adaptive = adaptive.has_value();
  r.concurrency.now = r.concurrency.lowest = r.concurrency.highest = parallel();
  struct Running {
    Pending p;
    std::string dir;  // where it runs: the run's scratch (trial_dirs.h) if it has one, else where
                      // it is kept
    std::uint64_t seed;
    std::chrono::steady_clock::time_point started;
    std::vector<Action> actions;  // the plan's: how late its signals fired
    // The watchdog: a supervisor still running this long after it started
    // hangs (its own trial timeout, heal and cleanup bounds are far below).
    std::chrono::steady_clock::time_point hung_after;
    bool killed_hung = false;
  };
  std::map<pid_t, Running> running;
  std::uint64_t started = 0;  // trials started (or that failed to start): names their fallback roots
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  double last_tick = 0, weighted = 0, weighed_until = 0;
  // The time-weighted mean of the target, and its range.
  auto note_concurrency = [&] {
    const double now = elapsed();
    weighted += r.concurrency.now * (now - weighed_until);
    weighed_until = now;
    r.concurrency.now = parallel();
    r.concurrency.mean = now > 0 ? weighted / now : r.concurrency.now;
    if (adaptive) {
      r.concurrency.lowest = adaptive->lowest();
      r.concurrency.highest = adaptive->highest();
      r.concurrency.backoffs = adaptive->backoffs();
    }
  };
  std::uint64_t violations = 0, new_violations = 0;
  int kept_failing = 0;
  std::deque<std::string> kept_passing;  // dirs, oldest first
  // Passing trials' dirs are reused (trial_dirs.h) only where no process of
  // a trial outlives its supervisor (its own pid namespace, as root): a
  // straggler must never write into the next trial's dir.
  // (No scenario's dir can be .spare: a name may not start with '.'.)
  // Trials run on the run's own tmpfs where they can (the same condition):
  // only a trial the run keeps is written to the out dir's disk.
  std::unique_ptr<TrialScratch> scratch;
  std::optional<SpareDirs> spares;
  // A trial's dir under `root` (the out dir: where it is kept; or the scratch).
  auto trial_dir_in = [](const std::string& root, const Pending& p) {
    return root + "/" + p.s->name + "/trial-" + std::to_string(p.trial);
  };
  if (opt.allow_mount_ns && ::geteuid() == 0) {
    std::string no_scratch;  // then the out dir, as before: nothing to report
    scratch = TrialScratch::make(r.out_dir, &no_scratch);
    spares.emplace((scratch ? scratch->root() : r.out_dir) + "/.spare", 64);
  }
  // The run's zygote (zygote.h): only a trial with its own pid namespace
  // (root, a mount namespace) can take workers from it.
  std::optional<ZygoteServer> zygote;
  if (opt.zygote && opt.allow_mount_ns && ::geteuid() == 0) zygote.emplace(opt.exe);

  auto progress = [&](bool final) {
    Progress p;
    p.done = r.tally.trials();
    p.planned = soak ? -1 : planned;
    p.violations = violations;
    p.new_violations = new_violations;
    p.concurrency = parallel();
    p.elapsed = elapsed();
    p.final = final;
    if (soak) {
      p.remaining = std::max(0.0, opt.duration_s - p.elapsed);
    } else if (p.done > 0) {
      p.remaining = p.elapsed / static_cast<double>(p.done) * static_cast<double>(p.planned - static_cast<std::int64_t>(p.done));
    }
    for (const auto& sub : opt.subscribers) sub->progress(p);
  };
  // Counts a finished trial and tells the subscribers; true if it had a
  // violation in a new bucket. With `stops`, such a trial stops the run, and
  // the running trials are killed before anyone hears of it: a subscriber
  // may take long (the live summary's first write took 120 ms with its
  // fsync), and trials that ran on meanwhile were checked and kept after.
  // Every running trial ended: each supervisor's group, workers included.
  auto kill_running = [&] {
    for (auto& [sp, run] : running) ::kill(-sp, SIGKILL), ::kill(sp, SIGKILL);
  };
  auto finished = [&](TrialResult t, bool stops = false) {
    r.elapsed = elapsed();
    if (adaptive) {
      adaptive->trial_lateness(t.late_ms, r.elapsed);
      adaptive->trial_cpu_wait(t.cpu_wait_ms, r.elapsed);
    }
    const bool is_new = r.add(t);
    new_violations += is_new ? 1 : 0;
    if (is_new && stops) {
      stop_asked = true;
      kill_running();
    }
    note_concurrency();
    for (const auto& sub : opt.subscribers) sub->trial_finished(t, r);
    progress(false);
    return is_new;
  };

  // Room for one more trial, and one waiting to start.
  auto may_start = [&] {
    return !stopping() && running.size() < static_cast<std::size_t>(parallel()) && !queue.empty() &&
           (!soak || elapsed() < opt.duration_s);
  };
  while (true) {
    // Whatever blocks a supervisor (a bug, a kernel that never answers), it
    // never hangs the run: killed, its trial a harness error.
    for (auto& [sp, run] : running) {
      if (run.killed_hung || std::chrono::steady_clock::now() < run.hung_after) continue;
      run.killed_hung = true;
      ::kill(-sp, SIGKILL), ::kill(sp, SIGKILL);
    }
    if (adaptive && elapsed() - last_tick >= 0.25) {
      last_tick = elapsed();
      note_concurrency();
      adaptive->update(probe->sample(), last_tick, static_cast<int>(running.size() + queue.size()));
      note_concurrency();
    }
    if (!stopping()) {
      if (soak && queue.empty() && elapsed() < opt.duration_s) enqueue_round(round++, 1);
      // One trial started per pass, then whatever ended meanwhile is checked
      // before the next: starting a whole round of 32 took 0.3 s on 2 cores,
      // and a trial that ended within it waited for its check (and a run
      // that stops at it, for its verdict) until the last had started.
      while (may_start()) {
        Pending p = queue.front();
        queue.pop_front();
        ++started;
        TrialPlan plan = base_plan(*p.s, r.seed, p.trial);
        plan.subject = runs_run_subject(*p.s, opt) ? opt.subject : p.s->subject;
        Rng rng(plan.seed);
        // load_and_validate planned these together; a draw it did not meet
        // that makes two faults conflict is this trial's failure, named,
        // never a fault silently dropped.
        std::string unplanned;
        for (const auto& f : p.s->faults) {
          if (f.kind == "sometimes") continue;  // last, below
          if (auto why = find_injector(f.kind)->plan(f, *p.s, rng, plan); why && unplanned.empty())
            unplanned = p.s->file + ":" + std::to_string(f.line) + ": cannot be planned into this trial: " + *why;
        }
        if (auto why = plan_sometimes(*p.s, opt.sometimes, plan); why && unplanned.empty()) unplanned = *why;
        if (!unplanned.empty()) {
          TrialResult t;
          t.scenario = p.s->name;
          t.scenario_file = p.s->file;
          t.trial = p.trial;
          t.harness_error = true;
          t.harness_error_text = unplanned;
          finished(std::move(t));
          continue;
        }
        std::stable_sort(plan.actions.begin(), plan.actions.end(), [](const Action& a, const Action& b) { return a.at_ns < b.at_ns; });
        const std::string kept_dir = trial_dir_in(r.out_dir, p);
        const std::string dir = scratch ? trial_dir_in(scratch->root(), p) : kept_dir;
        std::error_code dir_ec;
        std::string dir_failed = dir;  // named if making it fails
        std::string not_ours;
        // A dir already there is removed only if it is a trial dir an earlier
        // run into the same --out left (a real dir with its schedule.json):
        // never what a user keeps under that name, nor what a symlink names.
        if (fs::symlink_status(kept_dir, dir_ec).type() != fs::file_type::not_found) {
          if (!fs::is_directory(fs::symlink_status(kept_dir, dir_ec)) ||
              !fs::is_regular_file(fs::symlink_status(kept_dir + "/schedule.json", dir_ec))) {
            not_ours = kept_dir + " exists and is not a trial dir of shmstress's: not removed";
          } else {
            fs::remove_all(kept_dir, dir_ec);
          }
        }
        dir_ec.clear();
        if (not_ours.empty()) {
          fs::create_directories(fs::path(kept_dir).parent_path(), dir_ec);
          if (dir_ec) dir_failed = fs::path(kept_dir).parent_path().string();
          if (scratch && !dir_ec) fs::create_directories(fs::path(dir).parent_path(), dir_ec);
          std::set<std::string> labels;
          for (const WorkerPlan& w : plan.workers) labels.insert(worker_label(w.job, w.rank));
          // (Not past an error: on the scratch the dir would be made, and the
          // out dir's error forgotten.)
          if (!dir_ec && (!spares || !spares->take(dir, labels)))
            fs::create_directories(dir, dir_ec);
        }
        if (!not_ours.empty() || dir_ec || !write_trial_file(dir + "/scenario.toml", p.s->raw_toml) ||
            !write_trial_file(dir + "/schedule.json", to_json(plan).dump(2) + "\n")) {
          TrialResult t;  // the disk, not the subject: a harness failure
          t.scenario = p.s->name;
          t.scenario_file = p.s->file;
          t.trial = p.trial;
          t.harness_error = true;
          t.harness_error_text =
              !not_ours.empty() ? not_ours
                                : "cannot prepare the trial dir " + dir_failed + ": " +
                                      (dir_ec ? dir_ec.message() : std::string("write failed"));
          finished(std::move(t));
          continue;
        }
        SupervisorConfig cfg;
        cfg.exe = opt.exe;
        cfg.trial_dir = dir;
        cfg.allow_mount_ns = opt.allow_mount_ns;
        cfg.command = runs_run_subject(*p.s, opt) ? opt.subject_command : p.s->subject_command;
        cfg.shm_root = runs_run_subject(*p.s, opt) ? opt.subject_root : p.s->subject_root;
        cfg.shm_size = runs_run_subject(*p.s, opt) ? opt.subject_shm_size : p.s->subject_shm_size;
        cfg.allow_shared_shm = opt.allow_shared_shm;
        cfg.zygote_fd = zygote ? zygote->fd() : -1;
        // A hang is judged from the history alone, by the scenario's deadlines,
        // whatever the subject: any subject's trial may end once every live
        // worker is past them (supervisor_hang.cc; it still stands aside while
        // a process of the trial we did not start lives). The rest the
        // supervisor judges while the trial runs is the native subject's only:
        // a spin and a cut rest on what the native worker promises about its
        // writes (cpu_run_ns at every invoke, kEmitCpuNs from a line's stamp
        // to its write: supervisor_spin.cc).
        const TrialMeta meta = meta_for(*p.s, plan.seed);
        cfg.hang_after_ns = hang_bounds(meta);
        if (plan.subject == "native") {
          cfg.spin_budget_ns = meta.spin_budget_ns;
          // The first violation is all a --stop-on-violation run wants: a trial
          // may end at it (harness/cut.h). Not with a baseline (a known
          // violation must not end a trial before a new one shows) nor for a
          // scenario that expects one (it wants its evidence whole).
          if (opt.stop_on_violation && !opt.baseline && p.s->expect_violation.empty()) {
            cfg.cut_meta = meta;
            cfg.cut_invariants = cut_invariants(p.s->excuses);
          }
        }
        cfg.fallback_root = lease ? lease->trial_root(started)
                                  : "shmstress." + std::to_string(::getpid()) + "." + std::to_string(started) + ".";
        pid_t pid = start_supervisor(plan, cfg);
        if (pid < 0) {
          TrialResult t;
          t.scenario = p.s->name;
          t.trial = p.trial;
          t.harness_error = true;
          t.harness_error_text = "fork failed";
          finished(std::move(t));
          continue;
        }
        const auto now = std::chrono::steady_clock::now();
        running[pid] = Running{p,
                               dir,
                               plan.seed,
                               now,
                               std::move(plan.actions),
                               now + std::chrono::nanoseconds(plan.timeout_ns) + kSupervisorGrace};
        for (const auto& sub : opt.subscribers) sub->trial_started({p.s->name, p.trial, pid});
        break;
      }
    }
    if (running.empty()) {
      const bool time_up = soak && elapsed() >= opt.duration_s;
      if (stopping() || time_up || (!soak && queue.empty())) break;
      continue;
    }
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, may_start() ? WNOHANG : 0);
    if (pid == 0) continue;  // none ended: start the next
    if (pid < 0) {
      if (errno == EINTR) {
        if (stopping()) {
          kill_running();  // the stop within 2 s
        }
        continue;
      }
      break;
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    Running done = std::move(it->second);
    running.erase(it);
    std::error_code rm_ec;  // a dir that cannot be removed stays: nothing to decide on it
    // Cut short by the run's stop (a signal, or --stop-on-violation): neither
    // a result nor a harness failure, and not checked - the run's exit waits
    // for every such trial, and judging what it wrote decides nothing.
    if (stopping() && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
      fs::remove_all(done.dir, rm_ec);
      continue;
    }
    TrialResult t =
        check_trial_dir(*done.p.s, done.dir, done.p.trial, r.seed, done.seed, &done.actions);
    t.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - done.started).count();
    if (done.killed_hung) {
      t.harness_error = true;
      t.harness_error_text += fmt::format("the trial supervisor hung: killed {} s past the trial's timeout; ",
                                          std::chrono::duration_cast<std::chrono::seconds>(kSupervisorGrace).count());
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      t.harness_error = true;
      t.harness_error_text += "supervisor exited abnormally";
    }
    t.reproduce = quote(opt.invocation) + " run " + quote(done.p.s->file) + opt.reproduce_flags + " --seed " + std::to_string(r.seed) +
                  " --trial " + std::to_string(done.p.trial);
    // Bounded disk: at most max_kept failing trial dirs (the first ones; later
    // failures are summarised without their dir), and with --keep-passing the
    // oldest passing dirs make room for newer ones.
    const bool failing = t.failing();
    // A kept trial leaves the scratch for the out dir before anyone hears of
    // it (the timeline report writes into it). One that cannot (the out dir
    // full or gone) is dropped with its dir, and the harness failed: named,
    // as a full out dir was when trial dirs were made there.
    auto keep = [&] {
      const std::string kept_dir = trial_dir_in(r.out_dir, done.p);
      if (done.dir == kept_dir) return true;
      if (auto e = move_trial_dir(done.dir, kept_dir)) {
        t.harness_error = true;
        t.harness_error_text +=
            "cannot keep the trial dir in " + kept_dir + ": " + e.message() + "; ";
        return false;
      }
      t.dir = kept_dir;
      return true;
    };
    if (failing && (opt.max_kept <= 0 || kept_failing < opt.max_kept) && keep()) {
      t.kept = true;
      ++kept_failing;
    } else if (!failing && opt.keep_passing && keep()) {
      t.kept = true;
      kept_passing.push_back(t.dir);
      if (opt.max_kept > 0 && static_cast<int>(kept_passing.size()) > opt.max_kept) {
        fs::remove_all(kept_passing.front(), rm_ec);
        kept_passing.pop_front();
      }
    } else {
      if (spares) {
        spares->give(done.dir);
      } else {
        fs::remove_all(done.dir, rm_ec);
      }
      t.dir.clear();
      if (failing) t.dir_dropped = true;
    }
    if (t.verdict == Verdict::kInvalid) ++violations;
    // A known-bad scenario stops at the violation it expects (with its
    // evidence), not at the first unrelated one on its way there; with a
    // baseline, at the first violation the baseline does not know.
    const bool expected = t.expectation == Expectation::kNone || t.expectation == Expectation::kMet;
    finished(std::move(t), opt.stop_on_violation && expected && !stopping());
  }
  spares.reset();  // the spares go before anything reads the out dir
  scratch.reset();
  {
    itimerval off{};
    setitimer(ITIMER_REAL, &off, nullptr);
    signal(SIGALRM, SIG_DFL);
    probe.reset();
  }
  r.interrupted = stopping();
  r.elapsed = elapsed();
  note_concurrency();
  // A signal from here on (the reports are being written) kills nothing and
  // changes nothing: the trials are over, and every report is written.
  install_stop_signals(true);
  progress(true);
  for (const auto& sub : opt.subscribers) sub->run_finished(r);
  return r;
}

}  // namespace harness
