// shmstress run FILES: runs trials of scenario files, checks every invariant,
// and writes the run's reports. The run loop (harness/run.h) only emits
// events; this is where reports subscribe to them, one line each.
#include "harness/run.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "cli/cli.h"
#include "harness/baseline.h"
#include "harness/subjects.h"
#include "reports/live.h"  // --listen, --pushgateway
#include "reports/reports.h"

namespace cli {
namespace {

// A soak longer than a month is a typo ("--duration 999999m").
constexpr harness::Ms kMaxDuration = std::chrono::minutes(43200);
constexpr int kMaxShards = 100000;

// "i/n", both strictly decimal, 0 <= i < n <= kMaxShards.
std::optional<std::pair<int, int>> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos) return std::nullopt;
  auto number = [](std::string_view s) -> std::optional<int> {
    int v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || s[0] == '-' || ec != std::errc() || ptr != s.data() + s.size())
      return std::nullopt;
    return v;
  };
  auto i = number(std::string_view(text).substr(0, slash));
  auto n = number(std::string_view(text).substr(slash + 1));
  if (!i || !n || *n < 1 || *n > kMaxShards || *i >= *n) return std::nullopt;
  return std::pair{*i, *n};
}

struct RunArgs {
  harness::RunOptions ro;
  std::string duration, shard, worker_bin, junit_file, metrics_file, baseline;
  bool allow_shared_shm = false, no_mount_ns = false, verbose = false, no_sometimes = false,
       exec_workers = false;
  reports::LiveOptions live;
};

int run(RunArgs a, bool subject_given, const char* argv0) {
  harness::install_stop_signals(true);  // from here on a signal interrupts the run, never the reports
  harness::RunOptions& ro = a.ro;
  if (!a.duration.empty()) {
    harness::MsRange d;
    std::string why;
    if (!harness::parse_range_text(a.duration, &d, &why) || d.min != d.max || d.min.count() <= 0 ||
        d.min > kMaxDuration) {
      std::fprintf(stderr, "shmstress run: --duration '%s': %s\n", a.duration.c_str(),
                   why.empty() ? "must be one duration in 1ms..43200m (30 days)" : why.c_str());
      return 2;
    }
    ro.duration_s = d.min.count() / 1000.0;
  }
  if (!a.shard.empty()) {
    auto shard = parse_shard(a.shard);
    if (!shard) {
      std::fprintf(stderr,
                   "shmstress run: --shard '%s': expected i/n with 0 <= i < n <= %d, e.g. 2/8\n",
                   a.shard.c_str(), kMaxShards);
      return 2;
    }
    ro.shard_index = shard->first;
    ro.shard_count = shard->second;
  }
  ro.allow_mount_ns = !a.no_mount_ns;
  ro.allow_shared_shm = a.allow_shared_shm;
  ro.exe = a.worker_bin.empty() ? default_worker_exe() : fs::absolute(a.worker_bin).string();
  ro.invocation = argv0;
  if (!a.worker_bin.empty()) ro.reproduce_flags = " --worker-bin " + shell_word(a.worker_bin);
  if (a.no_mount_ns) ro.reproduce_flags += " --no-mount-ns";
  ro.sometimes = !a.no_sometimes;
  if (a.no_sometimes) ro.reproduce_flags += " --no-sometimes";
  ro.zygote = !a.exec_workers;
  if (a.exec_workers) ro.reproduce_flags += " --exec-workers";
  if (subject_given) {
    std::string why;
    if (!use_subject(ro.subject, ro.files, &ro, &why)) {
      std::fprintf(stderr, "shmstress run: --subject: %s\n", why.c_str());
      return 2;
    }
  }
  if (!a.baseline.empty()) {
    // Parsed once, here: a bad line stops the run before anything starts.
    auto b = harness::load_baseline(a.baseline, harness::today_utc());
    if (!b) {
      std::fprintf(stderr, "shmstress run: --baseline %s\n", b.error().to_string().c_str());
      return 2;
    }
    for (const auto& k : b->expired) {
      std::fprintf(stderr, "shmstress run: baseline %s:%d: %s expired on %s; its failures count as new\n",
                   a.baseline.c_str(), k.line, k.fingerprint.c_str(), harness::day_text(*k.expires).c_str());
    }
    ro.baseline = std::make_shared<const harness::Baseline>(std::move(*b));
  }
  if (std::string why; !a.worker_bin.empty() && !harness::check_program({a.worker_bin}, &why)) {
    std::fprintf(stderr, "shmstress run: --worker-bin: %s\n", why.c_str());
    return 2;
  }
  if (a.allow_shared_shm) ro.reproduce_flags += " --allow-shared-shm";
  std::vector<harness::Scenario> scenarios;
  std::string err;
  if (!harness::load_and_validate(ro.files, &scenarios, &err)) {
    std::fprintf(stderr, "%s\n", harness::printable_text(err).c_str());
    return 2;
  }
  // An explicit --out is this run's alone while it runs (a second run on it
  // is refused, exit 2); the default runs/<run-id> is new.
  std::optional<RunDirLock> out_lock;
  if (!ro.out_dir.empty()) {
    std::string why;
    if (int rc = prepare_out_dir(ro.out_dir, &why); rc != 0) {
      std::fprintf(stderr, "shmstress run: --out %s: %s\n", ro.out_dir.c_str(), why.c_str());
      return rc;
    }
    int rc = 0;
    out_lock = RunDirLock::take(ro.out_dir, &why, &rc);
    if (!out_lock) {
      std::fprintf(stderr, "shmstress run: --out %s: %s\n", ro.out_dir.c_str(), why.c_str());
      return rc;
    }
    for (const char* own : {"summary.json", "report.html"}) {
      if (auto e = harness::check_output(ro.out_dir + "/" + own, harness::OutputOrigin::kDerived)) {
        std::fprintf(stderr, "shmstress run: --out %s\n", e->message.c_str());
        return e->exit_code;
      }
    }
  }
  if (auto e = check_user_outputs({a.junit_file, a.metrics_file})) {
    std::fprintf(stderr, "shmstress run: %s\n", e->message.c_str());
    return e->exit_code;
  }
  for (const auto& f :
       {a.junit_file, a.metrics_file}) {  // before the run: a soak may write them live
    std::error_code ec;
    if (!f.empty() && fs::path(f).has_parent_path()) fs::create_directories(fs::path(f).parent_path(), ec);
  }
  // Live metrics: validate, bind /metrics (it then follows every trial).
  std::shared_ptr<reports::LiveReporting> live;
  if (!a.live.listen.empty() || !a.live.pushgateway.empty()) {
    a.live.subject = ro.subject;
    int live_rc = 0;
    live = reports::LiveReporting::start(a.live, &err, &live_rc);
    if (!live) {
      std::fprintf(stderr, "shmstress run: %s\n", err.c_str());
      return live_rc;
    }
  }

  // Reports that follow the run as it goes: one line each.
  const bool tty = ::isatty(STDERR_FILENO);
  if (live) ro.subscribers.push_back(live);
  if (harness::by_duration(ro)) ro.subscribers.push_back(reports::live_summary());
  if (harness::by_duration(ro) && !a.metrics_file.empty())
    ro.subscribers.push_back(reports::live_metrics_file(a.metrics_file));
  ro.subscribers.push_back(reports::progress_line(stderr, tty, tty && !std::getenv("NO_COLOR")));

  harness::RunResult r = harness::run(scenarios, ro);
  if (!r.error.empty()) {
    std::fprintf(stderr, "shmstress run: %s\n", r.error.c_str());
    return 3;
  }

  // Reports of the finished run: every one is attempted, whatever happened
  // to the others (an --out that filled up must not cost the JUnit file given
  // elsewhere); the first that could not be written decides the exit code.
  int failed = 0;
  reports::console_summary(stdout, r, stdout_color(), a.verbose);
  std::string summary = r.out_dir + "/summary.json";
  if (report_written(reports::write_summary(r, summary), "summary.json", &failed)) {
    std::printf("summary: %s (seed %llu)\n", summary.c_str(), static_cast<unsigned long long>(r.seed));
  }
  const int rc = r.tally.trials() == 0 && !r.interrupted ? 3 : r.exit_code();
  // Timelines of the kept failing trials: the listed ones with a dir.
  int timelines = 0;
  for (const auto& t : r.listed) {
    if (!t.kept || t.dir.empty()) continue;
    for (const auto& s : scenarios) {
      if (s.name == t.scenario) {
        timelines += write_timeline(t, s) ? 1 : 0;
        break;
      }
    }
  }
  if (report_written(reports::write_report_html(r, r.out_dir + "/report.html"), "report.html", &failed))
    std::printf("report: %s/report.html\n", r.out_dir.c_str());
  for (const auto& t : r.listed) {
    if (timelines > 0 && t.kept && t.verdict != harness::Verdict::kValid) {
      std::printf("timelines: %d, e.g. %s/timeline.html\n", timelines, t.dir.c_str());
      break;
    }
  }
  // The final metrics and CI files; then the push (a failed push only warns).
  if (int ci = write_ci_reports(r, rc, a.junit_file, a.metrics_file); failed == 0) failed = ci;
  if (live) return live->finish(r, failed != 0 ? failed : rc);
  return failed != 0 ? failed : rc;
}

}  // namespace

Subcommand add_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  harness::RunOptions& ro = a->ro;
  auto* cmd = app.add_subcommand("run", "run trials of scenario files and check invariants");
  cmd->add_option("files", ro.files, "scenario files (*.toml)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--seed", ro.seed, "master seed (default: random, printed)")
      ->check(seed_value());
  cmd->add_option("--trials", ro.trials, "trials per scenario (default: the scenario's)")
      ->check(integer_in(1, 10000000));
  cmd->add_option("--trial", ro.only_trial,
                  "run only this trial index (replays its exact schedule)")
      ->check(integer_in(0, std::numeric_limits<int>::max()));
  cmd->add_option("--duration", a->duration, "run until this much time has passed, e.g. 90s, 10m");
  cmd->add_option("--parallel", ro.parallel,
                  "trials at once (default: adaptive, from the machine's load: up to --max-parallel, "
                  "backing off when trials wait for the CPU or their signals fire late)")
      ->check(integer_in(1, 256));
  cmd->add_option("--max-parallel", ro.max_parallel,
                  "ceiling of the adaptive default (default: 16 per core, 1 per core with an external "
                  "subject; trials mostly sleep, and their timing checks do not count CPU wait: see "
                  "docs/architecture.md)")
      ->check(integer_in(1, 256));
  cmd->add_option("--out", ro.out_dir, "run directory (default runs/<run-id>)");
  cmd->add_option(
      "--subject", ro.subject,
      "subject: native (shmcoord), a named subject (subjects/<name>/subject.toml), or exec:CMD "
      "(any program speaking docs/worker-protocol.md); wins over scenarios' `subject`");
  cmd->add_flag("--allow-shared-shm", a->allow_shared_shm,
                "run an external subject even without a private /dev/shm (it may meet the "
                "machine's own names)");
  cmd->add_flag("-v,--verbose", a->verbose, "one line per scenario: trials, violations, expected states reached, faults injected");
  cmd->add_flag("--keep-passing", ro.keep_passing, "keep passing trials' directories");
  cmd->add_option("--shard", a->shard,
                  "run shard i of n (e.g. 2/8): trial indices congruent to i mod n, same --seed on "
                  "every shard");
  cmd->add_option(
         "--max-kept", ro.max_kept,
         "keep at most this many failing (and passing) trial dirs (default 100, 0: no cap)")
      ->check(integer_in(0, 1000000));
  cmd->add_option("--worker-bin", a->worker_bin,
                  "native worker binary (default: this one), e.g. a known-bad variant")
      ->check(CLI::ExistingFile);
  cmd->add_flag(
      "--stop-on-violation", ro.stop_on_violation,
      "stop after the first trial that violates an invariant (in a new bucket, with --baseline; "
      "in a scenario with expect_violation: the first that breaks an expected one, with its "
      "evidence); without either, a native trial ends as soon as what it has done is invalid, "
      "and is judged up to there");
  cmd->add_option("--baseline", a->baseline,
                  "known failures: a baseline file (`shmstress baseline`) or a run's summary.json; "
                  "their buckets are reported as known and only a new bucket fails the run")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--no-sometimes", a->no_sometimes,
                "add no sometimes-on pauses (a rank or two stopping a few ms at a random failpoint in some "
                "trials of every native scenario; docs/scenarios.md)");
  cmd->add_flag("--no-mount-ns", a->no_mount_ns,
                "isolate trials by name root instead of a private /dev/shm");
  cmd->add_flag("--exec-workers", a->exec_workers,
                "exec every native worker instead of forking it from the run's zygote, the worker "
                "exec'd once per run (the default: a worker's start-up is mostly the dynamic loader)");
  cmd->add_option("--junit", a->junit_file, "also write JUnit XML here (docs/reports.md)");
  cmd->add_option("--metrics-file", a->metrics_file,
                  "also write a Prometheus textfile here, atomically (docs/reports.md)");
  // Live metrics: --listen, --pushgateway (reports/live.h, docs/reports.md).
  cmd->add_option("--listen", a->live.listen,
                  "serve live /metrics on HOST:PORT during the run, e.g. 127.0.0.1:9464 (loopback "
                  "only unless --listen-any)");
  cmd->add_flag("--listen-any", a->live.listen_any,
                "allow --listen on a non-loopback address (reachable from other machines)");
  cmd->add_option("--pushgateway", a->live.pushgateway,
                  "at the end, push the run's metrics to this Pushgateway, http://HOST:PORT (a "
                  "failed push only warns)");
  cmd->add_option("--push-timeout", a->live.push_timeout,
                  "give up on the push after this long (default 10s)");
  return {cmd, [a, cmd](const char* argv0) { return run(*a, cmd->count("--subject") > 0, argv0); }};
}

}  // namespace cli
