// shmstress: the command line. Exit codes (DESIGN.md §8): 0 every invariant
// held, 1 a violation, 2 bad usage or scenario, 3 harness failure, 4 inconclusive.
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "checker.h"
#include "injector.h"
#include "reports/live.h"  // --listen, --pushgateway
#include "reports/reports.h"
#include "run.h"
#include "shrink.h"
#include "subject_check.h"
#include "subjects.h"
#include "worker.h"

namespace fs = std::filesystem;
using namespace harness;

namespace {

std::string fmt_list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "shmstress" : p.string();
}

int cmd_list(const std::string& dir) {
  std::printf("scenarios (%s):\n", dir.c_str());
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.path().extension() == ".toml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    ScenarioError err;
    auto s = load_scenario(f, &err);
    std::string d = s ? s->description : "(invalid: " + err.to_string() + ")";
    if (auto nl = d.find_first_of(".\n"); nl != std::string::npos) d = d.substr(0, nl + 1);
    std::printf("  %-34s %s\n", f.c_str(), d.c_str());
  }
  std::printf("\ninvariants:\n");
  for (const auto& c : checker_registry()) std::printf("  %-26s %s\n", c.invariant.c_str(), c.summary.c_str());
  std::printf("\nfault kinds:\n");
  for (const auto& i : injector_registry()) std::printf("  %-26s %s\n", i.kind.c_str(), i.summary.c_str());
  std::printf("\nsubjects:\n  %-26s %s\n", "native", "shmcoord (lib/), driven by `shmstress worker`");
  for (const auto& sj : list_subjects({dir})) std::printf("  %-26s %s\n", sj.name.c_str(), sj.description.c_str());
  std::printf("  %-26s %s\n", "exec:CMD", "any program speaking docs/worker-protocol.md (check it with subject-check)");
  return 0;
}

// Re-checks one stored trial dir against its own copy of the scenario and its
// schedule (name, file, seeds). On a bad scenario *s stays empty and *err says why.
TrialResult recheck_trial(const fs::path& t, std::optional<Scenario>* s, std::string* err) {
  ScenarioError e;
  *s = load_scenario((t / "scenario.toml").string(), &e);
  if (!*s) {
    *err = e.to_string();
    return {};
  }
  nlohmann::json sched = nlohmann::json::parse(std::ifstream(t / "schedule.json"), nullptr, false);
  if (!sched.is_object()) sched = nlohmann::json::object();
  (*s)->name = sched.value("scenario", (*s)->name);
  (*s)->file = sched.value("scenario_file", (*s)->file);
  return check_trial_dir(**s, t.string(), sched.value("trial", 0), sched.value("run_seed", 0ULL), sched.value("seed", 0ULL));
}

// Re-checks stored trial dirs (any dir holding history.jsonl + scenario.toml).
int cmd_check(const std::string& dir) {
  std::vector<fs::path> trials;
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "history.jsonl")) trials.push_back(dir);
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_directory() && fs::exists(e.path() / "history.jsonl") && fs::exists(e.path() / "scenario.toml")) {
      trials.push_back(e.path());
    }
  }
  if (trials.empty()) {
    std::fprintf(stderr, "shmstress check: no trial dirs (history.jsonl + scenario.toml) under %s\n", dir.c_str());
    return 2;
  }
  RunResult r;
  r.run_id = "check";
  for (const auto& t : trials) {
    std::optional<Scenario> s;
    std::string err;
    auto tr = recheck_trial(t, &s, &err);
    if (!s) {
      std::fprintf(stderr, "%s\n", err.c_str());
      return 2;
    }
    tr.kept = true;
    r.trials.push_back(std::move(tr));
  }
  reports::console_summary(stdout, r, ::isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR"));
  return r.exit_code();
}

// Removes what a killed run left: name-root segments of dead harnesses, and libfiu FIFOs of dead pids.
int cmd_clean() {
  int removed = 0;
  auto dead = [](const std::string& digits) {
    int pid = std::atoi(digits.c_str());
    return pid > 0 && ::kill(pid, 0) < 0 && errno == ESRCH;
  };
  if (DIR* d = ::opendir("/dev/shm")) {
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("shmstress.", 0) == 0 && dead(n.substr(10))) {
        if (::shm_unlink(("/" + n).c_str()) == 0) {
          std::printf("removed /dev/shm/%s\n", n.c_str());
          ++removed;
        }
      }
    }
    ::closedir(d);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/tmp", ec)) {
    std::string n = e.path().filename();
    if (n.rfind("fiu-ctrl-", 0) == 0) {
      auto dash = n.rfind('-');
      if (dead(n.substr(dash + 1)) && fs::remove(e.path(), ec)) {
        std::printf("removed %s\n", e.path().c_str());
        ++removed;
      }
    }
  }
  std::printf("%d leftovers removed\n", removed);
  return 0;
}

// The run's summary.json for a run, trial or scenario dir (it sits at the run
// dir's top), or null. Reports use it for what trial dirs do not record: the
// reproduce commands (with --worker-bin), the subject, the run id.
nlohmann::json find_run_summary(const fs::path& dir) {
  std::error_code ec;
  fs::path p = fs::canonical(dir, ec);
  for (int up = 0; !ec && up < 3 && !p.empty(); ++up, p = p.parent_path()) {
    if (fs::exists(p / "summary.json")) {
      nlohmann::json j = nlohmann::json::parse(std::ifstream(p / "summary.json"), nullptr, false);
      if (j.is_object()) return j;
    }
    if (p == p.parent_path()) break;
  }
  return nullptr;
}

// trial_dir -> reproduce command, from a summary.json.
std::map<std::string, std::string> reproduce_commands(const nlohmann::json& summary) {
  std::map<std::string, std::string> out;
  if (!summary.is_object()) return out;
  for (const char* key : {"violations", "unknown"}) {
    if (!summary.contains(key) || !summary[key].is_array()) continue;
    for (const auto& v : summary[key]) {
      if (v.is_object() && v.contains("trial_dir") && v.contains("reproduce")) {
        out[v.value("trial_dir", "")] = v.value("reproduce", "");
      }
    }
  }
  return out;
}

std::string canonical_or(const fs::path& p) {
  std::error_code ec;
  auto c = fs::canonical(p, ec);
  return ec ? p.string() : c.string();
}

// Writes timeline.{json,html} into every kept trial dir that did not pass (all
// kept ones with `all`); returns how many. A trial whose timeline cannot be
// written (its supervisor died before the history existed) costs a warning,
// not the other reports.
int write_timelines(const RunResult& r, const std::vector<Scenario>& scenarios, bool all) {
  int n = 0;
  for (const auto& t : r.trials) {
    if (!t.kept || t.dir.empty()) continue;
    if (!all && t.verdict == Verdict::kValid && !t.harness_error) continue;
    const Scenario* s = nullptr;
    for (const auto& sc : scenarios) {
      if (sc.name == t.scenario) s = &sc;
    }
    if (s == nullptr) continue;
    std::string err;
    if (!reports::write_timeline(t, meta_for(*s, t.seed), &err)) {
      std::fprintf(stderr, "shmstress: no timeline for %s: %s\n", t.dir.c_str(), err.c_str());
      continue;
    }
    ++n;
  }
  return n;
}

// --junit / --metrics-file of `run` and `report`; false after printing an error.
bool write_ci_reports(const RunResult& r, int rc, const std::string& junit, const std::string& metrics) {
  std::error_code ec;
  std::string err;
  if (!junit.empty()) {
    if (fs::path(junit).has_parent_path()) fs::create_directories(fs::path(junit).parent_path(), ec);
    if (!reports::write_file_atomic(junit, reports::junit_xml(r), &err)) {
      std::fprintf(stderr, "shmstress: cannot write JUnit XML: %s\n", err.c_str());
      return false;
    }
    std::printf("junit: %s\n", junit.c_str());
  }
  if (!metrics.empty()) {
    if (fs::path(metrics).has_parent_path()) fs::create_directories(fs::path(metrics).parent_path(), ec);
    if (!reports::write_metrics(r, metrics, rc, &err)) {
      std::fprintf(stderr, "shmstress: cannot write metrics: %s\n", err.c_str());
      return false;
    }
    std::printf("metrics: %s\n", metrics.c_str());
  }
  return true;
}

// Trial dirs (history.jsonl + scenario.toml) under dir, or dir itself; replays
// kept under a trial dir (<trial>/replays/) are not part of the run.
std::vector<fs::path> find_trial_dirs(const std::string& dir) {
  std::vector<fs::path> trials;
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "history.jsonl") && fs::exists(fs::path(dir) / "scenario.toml")) trials.push_back(dir);
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_directory()) continue;
    if (it->path().filename() == "replays") {
      it.disable_recursion_pending();
      continue;
    }
    if (fs::exists(it->path() / "history.jsonl") && fs::exists(it->path() / "scenario.toml")) trials.push_back(it->path());
  }
  std::sort(trials.begin(), trials.end());
  return trials;
}

// Regenerates reports from stored trial dirs: re-checks each like `check`,
// writes its timeline (failing trials, or all), and JUnit / metrics if asked.
// They describe the stored trials only: a run keeps just its failing ones
// unless --keep-passing. Exit code: as `check` (the verdict), 3 if a report
// cannot be written.
int cmd_report(const std::string& dir, const std::string& junit, const std::string& metrics, bool all) {
  auto trials = find_trial_dirs(dir);
  if (trials.empty()) {
    std::fprintf(stderr, "shmstress report: no trial dirs (history.jsonl + scenario.toml) under %s\n", dir.c_str());
    return 2;
  }
  nlohmann::json summary = find_run_summary(dir);
  auto repro = reproduce_commands(summary);
  RunResult r;
  r.run_id = summary.is_object() ? summary.value("run_id", "report") : "report";
  r.subject = summary.is_object() ? summary.value("subject", "native") : "native";
  r.elapsed = summary.is_object() ? summary.value("elapsed_s", 0.0) : 0.0;
  r.out_dir = canonical_or(dir);
  std::vector<Scenario> scenarios;
  std::set<std::uint64_t> run_seeds;
  for (const auto& t : trials) {
    std::optional<Scenario> s;
    std::string err;
    auto tr = recheck_trial(t, &s, &err);
    if (!s) {
      std::fprintf(stderr, "%s\n", err.c_str());
      return 2;
    }
    tr.kept = true;
    tr.dir = canonical_or(t);
    if (auto it = repro.find(tr.dir); it != repro.end()) tr.reproduce = it->second;
    run_seeds.insert(tr.run_seed);
    bool known = false;
    for (const auto& sc : scenarios) known |= sc.name == s->name;
    if (!known) scenarios.push_back(std::move(*s));
    r.trials.push_back(std::move(tr));
  }
  if (run_seeds.size() == 1) r.seed = *run_seeds.begin();
  reports::console_summary(stdout, r, ::isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR"));
  int n = write_timelines(r, scenarios, all);
  std::printf("timelines: %d written (timeline.json, timeline.html in each trial dir)\n", n);
  if (reports::write_report_html(r, r.out_dir + "/report.html")) std::printf("report: %s/report.html\n", r.out_dir.c_str());
  if (!write_ci_reports(r, r.exit_code(), junit, metrics)) return 3;
  return r.exit_code();
}

struct ReplayArgs {
  std::string dir;
  int times = 10;
  std::string worker_bin;
  bool no_mount_ns = false;
  bool keep = false;
};

// Re-runs one stored trial's exact schedule (scenario copy, run seed, trial
// index) `times` times and reports how often each invariant it violated fails
// again. Exit code: 0 reproduced at least once, 1 never, 2 bad usage, 3 the
// harness failed in every replay.
int cmd_replay(const ReplayArgs& a, const char* argv0) {
  const fs::path dir = canonical_or(a.dir);
  nlohmann::json sched = nlohmann::json::parse(std::ifstream(dir / "schedule.json"), nullptr, false);
  if (!sched.is_object() || !sched.contains("trial") || !sched.contains("run_seed") || !fs::exists(dir / "scenario.toml")) {
    std::fprintf(stderr, "shmstress replay: %s is not a trial dir (needs schedule.json and scenario.toml)\n", dir.c_str());
    return 2;
  }
  std::vector<Scenario> scenarios;
  std::string err;
  if (!load_and_validate({(dir / "scenario.toml").string()}, &scenarios, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 2;
  }
  Scenario& s = scenarios.front();
  s.name = sched.value("scenario", s.name);
  s.file = sched.value("scenario_file", s.file);
  const int trial = sched.value("trial", 0);
  const std::uint64_t run_seed = sched.value("run_seed", 0ULL);

  nlohmann::json verdict = nlohmann::json::parse(std::ifstream(dir / "verdict.json"), nullptr, false);
  if (!verdict.is_object()) {  // never checked: check it now
    (void)check_trial_dir(s, dir.string(), trial, run_seed, sched.value("seed", 0ULL));
    verdict = nlohmann::json::parse(std::ifstream(dir / "verdict.json"), nullptr, false);
  }
  reports::ReplayTally tally;
  tally.targets = reports::replay_targets(verdict);

  // The worker binary and isolation of the original run live in its reproduce command.
  std::string worker_bin = a.worker_bin;
  bool no_mount_ns = a.no_mount_ns;
  auto repro = reproduce_commands(find_run_summary(dir));
  if (auto it = repro.find(dir.string()); it != repro.end()) {
    if (worker_bin.empty()) {
      if (auto wb = reports::command_flag(it->second, "--worker-bin")) {
        if (!fs::exists(*wb)) {
          std::fprintf(stderr, "shmstress replay: the run used --worker-bin %s, which is not there from here; pass --worker-bin\n", wb->c_str());
          return 2;
        }
        worker_bin = *wb;
        std::printf("worker: %s (from the run's reproduce command)\n", worker_bin.c_str());
      }
    }
    no_mount_ns |= (" " + it->second + " ").find(" --no-mount-ns ") != std::string::npos;
  }

  std::printf("replay %s trial %d (run seed %llu), %d times; originally failed: %s\n", s.name.c_str(), trial,
              static_cast<unsigned long long>(run_seed), a.times,
              tally.targets.empty() ? "(nothing)" : fmt_list(tally.targets).c_str());
  std::fflush(stdout);
  const fs::path replays = dir / "replays";
  bool interrupted = false;
  for (int i = 0; i < a.times && !interrupted; ++i) {
    RunOptions o;
    o.files = {s.file};
    o.seed = run_seed;
    o.only_trial = trial;
    o.parallel = 1;
    o.out_dir = (replays / std::to_string(i)).string();
    o.exe = worker_bin.empty() ? self_exe() : fs::absolute(worker_bin).string();
    o.allow_mount_ns = !no_mount_ns;
    o.invocation = argv0;
    if (!worker_bin.empty()) o.reproduce_flags = " --worker-bin " + worker_bin;
    if (no_mount_ns) o.reproduce_flags += " --no-mount-ns";
    RunResult r = run(scenarios, o);
    interrupted = r.interrupted;
    reports::add_replay(&tally, r);
    std::error_code ec;
    if (!a.keep) fs::remove_all(o.out_dir, ec);
  }
  std::error_code ec;
  if (!a.keep) fs::remove(replays, ec);  // only if empty
  std::printf("%s", reports::replay_text(tally).c_str());
  if (interrupted) std::printf("(interrupted after %d replays)\n", tally.replays);
  if (tally.reproduced()) {
    std::printf("reproduced\n");
    return 0;
  }
  if (tally.replays > 0 && tally.harness_errors == tally.replays) {
    std::printf("the harness failed in every replay\n");
    return 3;
  }
  std::printf("not reproduced in %d replays\n", tally.replays);
  return 1;
}

}  // namespace

// Shrinks a failing trial; the worker binary and isolation come from the run's
// reproduce command unless given.
int cmd_shrink(const fs::path& dir, ShrinkOptions so, std::string worker_bin, bool no_mount_ns, const char* argv0) {
  auto repro = reproduce_commands(find_run_summary(dir));
  if (auto it = repro.find(dir.string()); it != repro.end()) {
    if (worker_bin.empty()) {
      if (auto wb = reports::command_flag(it->second, "--worker-bin")) worker_bin = *wb;
    }
    no_mount_ns |= (" " + it->second + " ").find(" --no-mount-ns ") != std::string::npos;
  }
  so.trial_dir = dir.string();
  so.run.exe = worker_bin.empty() ? self_exe() : fs::absolute(worker_bin).string();
  so.run.allow_mount_ns = !no_mount_ns;
  so.run.invocation = argv0;
  so.run.parallel = 1;
  if (!worker_bin.empty()) so.run.reproduce_flags = " --worker-bin " + worker_bin;
  if (no_mount_ns) so.run.reproduce_flags += " --no-mount-ns";
  std::printf("shrinking %s (%d retries per candidate, budget %d)...\n", dir.c_str(), so.retries, so.budget);
  std::fflush(stdout);
  ShrinkResult r = shrink(so);
  if (!r.ok) {
    std::fprintf(stderr, "shmstress shrink: %s\n", r.error.c_str());
    return r.error.find("not a trial dir") != std::string::npos ? 2 : 4;
  }
  std::printf("%s still fails with %s\n  original: %s\n  minimal:  %s\n  (%d candidates tried, %d kept)\n"
              "minimal scenario: %s\nreproduce: %s\n",
              r.invariant.c_str(), r.minimal.to_string().c_str(), r.original.to_string().c_str(),
              r.minimal.to_string().c_str(), r.candidates, r.kept, r.minimal_file.c_str(), r.reproduce.c_str());
  return 0;
}

// Validates a program as a subject against docs/worker-protocol.md.
int cmd_subject_check(const std::string& cmd) {
  std::vector<std::string> argv = split_words(cmd);
  if (argv.empty()) {
    std::fprintf(stderr, "shmstress subject-check: give the subject's command\n");
    return 2;
  }
  bool all = true;
  for (const auto& l : subject_check(argv, self_exe())) {
    std::printf("%s  %s: %s\n", l.ok ? "PASS" : "FAIL", l.what.c_str(), l.detail.c_str());
    all &= l.ok;
  }
  std::printf("%s\n", all ? "the subject speaks worker protocol v1" : "the subject does not pass: see docs/worker-protocol.md");
  return all ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "worker") return worker_main();

  CLI::App app{"shmstress: stress and fault-injection harness for shared-memory coordination"};
  app.require_subcommand(1);

  RunOptions ro;
  std::string duration;
  auto* run_cmd = app.add_subcommand("run", "run trials of scenario files and check invariants");
  run_cmd->add_option("files", ro.files, "scenario files (*.toml)")->required()->check(CLI::ExistingFile);
  run_cmd->add_option("--seed", ro.seed, "master seed (default: random, printed)");
  run_cmd->add_option("--trials", ro.trials, "trials per scenario (default: the scenario's)")->check(CLI::Range(1, 10000000));
  run_cmd->add_option("--trial", ro.only_trial, "run only this trial index (replays its exact schedule)")->check(CLI::NonNegativeNumber);
  run_cmd->add_option("--duration", duration, "run until this much time has passed, e.g. 90s, 10m");
  run_cmd->add_option("--parallel", ro.parallel, "trials at once (default: cores)")->check(CLI::Range(1, 256));
  run_cmd->add_option("--out", ro.out_dir, "run directory (default runs/<run-id>)");
  run_cmd->add_option("--subject", ro.subject,
                      "subject: native (shmcoord), a named subject (subjects/<name>/subject.toml), or exec:CMD "
                      "(any program speaking docs/worker-protocol.md); wins over scenarios' `subject`")
      ;
  bool allow_shared_shm = false;
  run_cmd->add_flag("--allow-shared-shm", allow_shared_shm,
                    "run an external subject even without a private /dev/shm (it may meet the machine's own names)");
  run_cmd->add_flag("--keep-passing", ro.keep_passing, "keep passing trials' directories");
  std::string worker_bin;
  std::string shard;
  run_cmd->add_option("--shard", shard, "run shard i of n (e.g. 2/8): trial indices congruent to i mod n, same --seed on every shard");
  run_cmd->add_option("--max-kept", ro.max_kept, "keep at most this many failing (and passing) trial dirs (default 100, 0: no cap)")
      ->check(CLI::NonNegativeNumber);
  run_cmd->add_option("--worker-bin", worker_bin, "native worker binary (default: this one), e.g. a known-bad variant")
      ->check(CLI::ExistingFile);
  run_cmd->add_flag("--stop-on-violation", ro.stop_on_violation, "stop after the first trial that violates an invariant");
  bool no_mount_ns = false;
  run_cmd->add_flag("--no-mount-ns", no_mount_ns, "isolate trials by name root instead of a private /dev/shm");
  std::string junit_file, metrics_file;
  run_cmd->add_option("--junit", junit_file, "also write JUnit XML here (docs/reports.md)");
  run_cmd->add_option("--metrics-file", metrics_file, "also write a Prometheus textfile here, atomically (docs/reports.md)");
  // ---- live metrics: --listen, --pushgateway (reports/live.h, docs/reports.md) ----
  reports::LiveOptions live_opt;
  run_cmd->add_option("--listen", live_opt.listen, "serve live /metrics on HOST:PORT during the run, e.g. 127.0.0.1:9464 (loopback only unless --listen-any)");
  run_cmd->add_flag("--listen-any", live_opt.listen_any, "allow --listen on a non-loopback address (reachable from other machines)");
  run_cmd->add_option("--pushgateway", live_opt.pushgateway, "at the end, push the run's metrics to this Pushgateway, http://HOST:PORT (a failed push only warns)");
  run_cmd->add_option("--push-timeout", live_opt.push_timeout, "give up on the push after this long (default 10s)");
  // ---- end live metrics ----

  std::string list_dir = "scenarios";
  auto* list_cmd = app.add_subcommand("list", "list scenarios, invariants, fault kinds and subjects");
  list_cmd->add_option("--dir", list_dir, "scenario directory");

  std::string check_dir;
  auto* check_cmd = app.add_subcommand("check", "re-check stored histories offline");
  check_cmd->add_option("dir", check_dir, "a run or trial directory")->required()->check(CLI::ExistingDirectory);

  app.add_subcommand("clean", "remove what a killed run left behind");

  std::string report_dir;
  bool report_all = false;
  auto* report_cmd = app.add_subcommand("report", "re-check stored trial dirs and regenerate their reports");
  report_cmd->add_option("dir", report_dir, "a run or trial directory")->required()->check(CLI::ExistingDirectory);
  report_cmd->add_option("--junit", junit_file, "also write JUnit XML of the stored trials here");
  report_cmd->add_option("--metrics-file", metrics_file, "also write a Prometheus textfile of the stored trials here");
  report_cmd->add_flag("--all", report_all, "timelines for passing trials too (kept with --keep-passing)");

  ReplayArgs replay;
  ShrinkOptions shrink_opt;
  std::string shrink_dir, shrink_worker;
  bool shrink_no_mount_ns = false;
  auto* shrink_cmd = app.add_subcommand("shrink", "minimise a failing trial while the same invariant still fails");
  shrink_cmd->add_option("dir", shrink_dir, "a failing trial directory")->required()->check(CLI::ExistingDirectory);
  shrink_cmd->add_option("--invariant", shrink_opt.invariant, "the invariant to keep failing (default: the trial's first)");
  shrink_cmd->add_option("--retries", shrink_opt.retries, "re-runs per candidate before calling it passing (default 5)")
      ->check(CLI::Range(1, 1000));
  shrink_cmd->add_option("--budget", shrink_opt.budget, "at most this many candidates (default 150)")->check(CLI::Range(1, 100000));
  shrink_cmd->add_option("--worker-bin", shrink_worker, "native worker binary (default: the run's, else this one)");
  shrink_cmd->add_flag("--no-mount-ns", shrink_no_mount_ns, "isolate trials by name root instead of a private /dev/shm");
  std::string check_subject;
  auto* subject_check_cmd =
      app.add_subcommand("subject-check", "validate a program as a subject (worker protocol, isolation, SIGTERM)");
  subject_check_cmd->add_option("command", check_subject, "the subject's command, e.g. \"/usr/bin/python3 subjects/streaming/adapter.py\"")
      ->required();
  auto* replay_cmd = app.add_subcommand("replay", "re-run one trial's exact schedule and report how often it fails again");
  replay_cmd->add_option("dir", replay.dir, "a trial directory (<run>/<scenario>/trial-<n>)")->required()->check(CLI::ExistingDirectory);
  replay_cmd->add_option("--times", replay.times, "replays (default 10)")->check(CLI::Range(1, 100000));
  replay_cmd->add_option("--worker-bin", replay.worker_bin, "native worker binary (default: the run's, else this one)")
      ->check(CLI::ExistingFile);
  replay_cmd->add_flag("--no-mount-ns", replay.no_mount_ns, "isolate trials by name root instead of a private /dev/shm");
  replay_cmd->add_flag("--keep", replay.keep, "keep the replays' trial dirs under <dir>/replays/");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (list_cmd->parsed()) return cmd_list(list_dir);
  if (check_cmd->parsed()) return cmd_check(check_dir);
  if (app.got_subcommand("clean")) return cmd_clean();
  if (report_cmd->parsed()) return cmd_report(report_dir, junit_file, metrics_file, report_all);
  if (replay_cmd->parsed()) return cmd_replay(replay, argv[0]);
  if (subject_check_cmd->parsed()) return cmd_subject_check(check_subject);
  if (shrink_cmd->parsed()) return cmd_shrink(shrink_dir, shrink_opt, shrink_worker, shrink_no_mount_ns, argv[0]);

  if (!duration.empty()) {
    MsRange d;
    std::string why;
    if (!parse_range_text(duration, &d, &why) || d.min != d.max || d.min.count() <= 0) {
      std::fprintf(stderr, "shmstress run: --duration '%s': %s\n", duration.c_str(), why.empty() ? "must be one positive duration" : why.c_str());
      return 2;
    }
    ro.duration_s = d.min.count() / 1000.0;
  }
  if (!shard.empty()) {
    int i = -1, n = 0;
    char extra;
    if (std::sscanf(shard.c_str(), "%d/%d%c", &i, &n, &extra) != 2 || n < 1 || i < 0 || i >= n) {
      std::fprintf(stderr, "shmstress run: --shard '%s': expected i/n with 0 <= i < n\n", shard.c_str());
      return 2;
    }
    ro.shard_index = i;
    ro.shard_count = n;
  }
  ro.allow_mount_ns = !no_mount_ns;
  ro.metrics_file = metrics_file;
  ro.allow_shared_shm = allow_shared_shm;
  ro.subject_explicit = run_cmd->count("--subject") > 0;
  {
    std::string why;
    auto subj = resolve_subject(ro.subject, ro.files, &why);
    if (!subj) {
      std::fprintf(stderr, "shmstress run: --subject: %s\n", why.c_str());
      return 2;
    }
    ro.subject_command = subj->command;
    ro.subject_root = subj->shm_root;
  }
  ro.exe = worker_bin.empty() ? self_exe() : fs::absolute(worker_bin).string();
  ro.invocation = argv[0];
  if (!worker_bin.empty()) ro.reproduce_flags = " --worker-bin " + worker_bin;
  if (no_mount_ns) ro.reproduce_flags += " --no-mount-ns";
  if (ro.subject != "native") ro.reproduce_flags += " --subject '" + ro.subject + "'";
  if (allow_shared_shm) ro.reproduce_flags += " --allow-shared-shm";
  std::vector<Scenario> scenarios;
  std::string err;
  if (!load_and_validate(ro.files, &scenarios, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 2;
  }
  for (const auto& f : {junit_file, metrics_file}) {  // before the run: a soak may write them live
    std::error_code ec;
    if (fs::path(f).has_parent_path()) fs::create_directories(fs::path(f).parent_path(), ec);
  }
  // ---- live metrics: validate, bind /metrics, update it after every trial ----
  std::unique_ptr<reports::LiveReporting> live;
  if (!live_opt.listen.empty() || !live_opt.pushgateway.empty()) {
    live_opt.subject = ro.subject;
    int live_rc = 0;
    live = reports::LiveReporting::start(live_opt, &err, &live_rc);
    if (!live) {
      std::fprintf(stderr, "shmstress run: %s\n", err.c_str());
      return live_rc;
    }
    ro.on_trial = [&live, next = ro.on_trial](const RunResult& so_far) {
      if (next) next(so_far);
      live->on_trial(so_far);
    };
  }
  // ---- end live metrics ----
  RunResult r = run(scenarios, ro);
  reports::console_summary(stdout, r, ::isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR"));
  std::string summary = r.out_dir + "/summary.json";
  if (!reports::write_summary(r, summary)) {
    std::fprintf(stderr, "shmstress: cannot write %s\n", summary.c_str());
    return 3;
  }
  std::printf("summary: %s (seed %llu)\n", summary.c_str(), static_cast<unsigned long long>(r.seed));
  const int rc = r.trials.empty() && !r.interrupted ? 3 : r.exit_code();
  int timelines = write_timelines(r, scenarios, false);
  if (reports::write_report_html(r, r.out_dir + "/report.html")) std::printf("report: %s/report.html\n", r.out_dir.c_str());
  for (const auto& t : r.trials) {
    if (timelines > 0 && t.kept && t.verdict != Verdict::kValid) {
      std::printf("timelines: %d, e.g. %s/timeline.html\n", timelines, t.dir.c_str());
      break;
    }
  }
  // ---- live metrics: the final values, then the push (a failed push only warns) ----
  if (live) return live->finish(r, write_ci_reports(r, rc, junit_file, metrics_file) ? rc : 3);
  // ---- end live metrics ----
  if (!write_ci_reports(r, rc, junit_file, metrics_file)) return 3;
  return rc;
}
