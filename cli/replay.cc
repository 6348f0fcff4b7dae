// shmstress replay TRIAL_DIR: re-runs one stored trial's exact schedule
// (scenario copy, run seed, trial index) N times and reports how often each
// invariant it violated fails again. Exit code: 0 reproduced at least once, 1
// never, 2 bad usage, 3 the harness failed in every replay.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli/cli.h"
#include "harness/run.h"
#include "reports/reports.h"

namespace cli {
namespace {

struct ReplayArgs {
  std::string dir;
  int times = 10;
  std::string worker_bin;
  std::string subject;  // empty: the trial's own
  bool no_mount_ns = false;
  bool keep = false;
  bool allow_stored_command = false;
};

std::string fmt_list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

int replay(const ReplayArgs& a, const char* argv0) {
  const fs::path dir = canonical_or(a.dir);
  std::error_code ec;
  if (!fs::exists(dir / "schedule.json", ec) || !fs::exists(dir / "scenario.toml", ec)) {
    std::fprintf(
        stderr, "shmstress replay: %s is not a trial dir (needs schedule.json and scenario.toml)\n",
        dir.c_str());
    return 2;
  }
  harness::StoredError stored_err;
  const auto sched = harness::load_schedule((dir / "schedule.json").string(), &stored_err);
  if (!sched) {
    std::fprintf(stderr, "shmstress replay: %s\n", stored_err.to_string().c_str());
    return 2;
  }
  std::vector<harness::Scenario> scenarios;
  std::string err;
  if (!harness::load_and_validate({(dir / "scenario.toml").string()}, &scenarios, &err)) {
    std::fprintf(stderr, "%s\n", harness::printable_text(err).c_str());
    return 2;
  }
  harness::Scenario& s = scenarios.front();
  if (sched->scenario) s.name = *sched->scenario;
  if (sched->scenario_file) s.file = *sched->scenario_file;
  const int trial = sched->trial;
  const std::uint64_t run_seed = sched->run_seed;

  if (!fs::exists(dir / "verdict.json", ec)) {  // never checked: check it now
    (void)harness::check_trial_dir(s, dir.string(), trial, run_seed, sched->seed);
  }
  const auto verdict = harness::load_verdict((dir / "verdict.json").string(), &stored_err);
  if (!verdict) {
    std::fprintf(stderr, "shmstress replay: %s\n", stored_err.to_string().c_str());
    return 2;
  }
  reports::ReplayTally tally;
  tally.targets = reports::replay_targets(*verdict);

  // The worker binary and isolation of the original run live in its reproduce command.
  std::string worker_bin = a.worker_bin;
  bool no_mount_ns = a.no_mount_ns;
  const std::optional<TrialRunFlags> flags = trial_run_flags(dir, &err);
  if (!flags) {
    std::fprintf(stderr, "shmstress replay: %s\n", err.c_str());
    return 2;
  }
  const TrialRunFlags& original = *flags;
  if (auto why = refuse_stored_command(original, !a.subject.empty(), !a.worker_bin.empty(), a.allow_stored_command)) {
    std::fprintf(stderr, "shmstress replay: %s\n", why->c_str());
    return 2;
  }
  if (worker_bin.empty() && original.worker_bin) {
    if (!fs::exists(*original.worker_bin)) {
      std::fprintf(stderr,
                   "shmstress replay: the run used --worker-bin %s, which is not there from here; "
                   "pass --worker-bin\n",
                   original.worker_bin->c_str());
      return 2;
    }
    worker_bin = *original.worker_bin;
    std::printf("worker: %s (from the run's reproduce command)\n", harness::printable_text(worker_bin).c_str());
  }
  no_mount_ns |= original.no_mount_ns;
  // The subject the trial ran (an external one given with --subject is not in
  // the scenario copy): without it a replay would test another subject.
  const std::string subject = !a.subject.empty() ? a.subject : original.subject.value_or("");
  // A named subject the trial dir's own ancestry defines (a subjects/ dir in
  // a bug report's tarball) is searched only when the user said so.
  const std::vector<std::string> search_from =
      !a.subject.empty() || a.allow_stored_command ? std::vector<std::string>{s.file, dir.string()}
                                                   : std::vector<std::string>{};
  if (!subject.empty()) {
    harness::RunOptions probe;
    std::string why;
    if (!use_subject(subject, search_from, &probe, &why)) {
      std::fprintf(stderr, "shmstress replay: subject: %s\n", harness::printable_text(why).c_str());
      return 2;
    }
    std::printf("subject: %s%s\n", harness::printable_text(subject).c_str(), a.subject.empty() ? " (the trial's)" : "");
  }

  std::printf("replay %s trial %d (run seed %llu), %d times; originally failed: %s\n",
              s.name.c_str(), trial, static_cast<unsigned long long>(run_seed), a.times,
              tally.targets.empty() ? "(nothing)" : fmt_list(tally.targets).c_str());
  std::fflush(stdout);
  const fs::path replays = dir / "replays";
  const bool tty = ::isatty(STDERR_FILENO);
  bool interrupted = false;
  for (int i = 0; i < a.times && !interrupted; ++i) {
    harness::RunOptions o;
    o.files = {s.file};
    o.seed = run_seed;
    o.only_trial = trial;
    o.parallel = 1;
    o.keep_passing = a.keep;  // --keep keeps every replay, passing or not
    o.out_dir = (replays / std::to_string(i)).string();
    o.exe = worker_bin.empty() ? default_worker_exe() : fs::absolute(worker_bin).string();
    o.allow_mount_ns = !no_mount_ns;
    o.invocation = argv0;
    if (!worker_bin.empty()) o.reproduce_flags = " --worker-bin " + shell_word(worker_bin);
    if (no_mount_ns) o.reproduce_flags += " --no-mount-ns";
    follow_trial_run(original, &o);
    std::string why;
    if (!subject.empty()) (void)use_subject(subject, search_from, &o, &why);
    o.allow_shared_shm = original.allow_shared_shm;
    if (o.allow_shared_shm) o.reproduce_flags += " --allow-shared-shm";
    o.subscribers.push_back(reports::progress_line(stderr, tty, tty && !std::getenv("NO_COLOR")));
    harness::RunResult r = harness::run(scenarios, o);
    interrupted = r.interrupted;
    reports::add_replay(&tally, r);
    if (!a.keep) fs::remove_all(o.out_dir, ec);
  }
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

Subcommand add_replay(CLI::App& app) {
  auto a = std::make_shared<ReplayArgs>();
  auto* cmd = app.add_subcommand(
      "replay", "re-run one trial's exact schedule and report how often it fails again");
  cmd->add_option("dir", a->dir, "a trial directory (<run>/<scenario>/trial-<n>)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--times", a->times, "replays (default 10)")->check(integer_in(1, 100000));
  cmd->add_option("--worker-bin", a->worker_bin,
                  "native worker binary (default: the run's, else this one)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--subject", a->subject,
                  "subject to replay against (default: the one the trial ran)");
  cmd->add_flag("--no-mount-ns", a->no_mount_ns,
                "isolate trials by name root instead of a private /dev/shm");
  cmd->add_flag("--keep", a->keep, "keep the replays' trial dirs under <dir>/replays/");
  cmd->add_flag("--allow-stored-command", a->allow_stored_command,
                "run the exec: subject or --worker-bin the trial dir names (a trial dir from elsewhere is code; "
                "without this flag only the native subject, this binary and ./subjects run)");
  return {cmd, [a](const char* argv0) { return replay(*a, argv0); }};
}

}  // namespace cli
