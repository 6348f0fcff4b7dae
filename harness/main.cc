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

#include "checker.h"
#include "injector.h"
#include "reports/reports.h"
#include "run.h"
#include "worker.h"

namespace fs = std::filesystem;
using namespace harness;

namespace {

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
  return 0;
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
    ScenarioError err;
    auto s = load_scenario((t / "scenario.toml").string(), &err);
    if (!s) {
      std::fprintf(stderr, "%s\n", err.to_string().c_str());
      return 2;
    }
    nlohmann::json sched;
    std::ifstream(t / "schedule.json") >> sched;
    s->name = sched.value("scenario", s->name);
    s->file = sched.value("scenario_file", s->file);
    auto tr = check_trial_dir(*s, t.string(), sched.value("trial", 0), sched.value("run_seed", 0ULL), sched.value("seed", 0ULL));
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

}  // namespace

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
  run_cmd->add_option("--subject", ro.subject, "subject (native)")->check(CLI::IsMember({"native"}));
  run_cmd->add_flag("--keep-passing", ro.keep_passing, "keep passing trials' directories");
  std::string worker_bin;
  run_cmd->add_option("--worker-bin", worker_bin, "native worker binary (default: this one), e.g. a known-bad variant")
      ->check(CLI::ExistingFile);
  run_cmd->add_flag("--stop-on-violation", ro.stop_on_violation, "stop after the first trial that violates an invariant");
  bool no_mount_ns = false;
  run_cmd->add_flag("--no-mount-ns", no_mount_ns, "isolate trials by name root instead of a private /dev/shm");

  std::string list_dir = "scenarios";
  auto* list_cmd = app.add_subcommand("list", "list scenarios, invariants, fault kinds and subjects");
  list_cmd->add_option("--dir", list_dir, "scenario directory");

  std::string check_dir;
  auto* check_cmd = app.add_subcommand("check", "re-check stored histories offline");
  check_cmd->add_option("dir", check_dir, "a run or trial directory")->required()->check(CLI::ExistingDirectory);

  app.add_subcommand("clean", "remove what a killed run left behind");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (list_cmd->parsed()) return cmd_list(list_dir);
  if (check_cmd->parsed()) return cmd_check(check_dir);
  if (app.got_subcommand("clean")) return cmd_clean();

  if (!duration.empty()) {
    MsRange d;
    std::string why;
    if (!parse_range_text(duration, &d, &why) || d.min != d.max || d.min.count() <= 0) {
      std::fprintf(stderr, "shmstress run: --duration '%s': %s\n", duration.c_str(), why.empty() ? "must be one positive duration" : why.c_str());
      return 2;
    }
    ro.duration_s = d.min.count() / 1000.0;
  }
  ro.allow_mount_ns = !no_mount_ns;
  ro.exe = worker_bin.empty() ? self_exe() : fs::absolute(worker_bin).string();
  ro.invocation = argv[0];
  if (!worker_bin.empty()) ro.reproduce_flags = " --worker-bin " + worker_bin;
  if (no_mount_ns) ro.reproduce_flags += " --no-mount-ns";
  std::vector<Scenario> scenarios;
  std::string err;
  if (!load_and_validate(ro.files, &scenarios, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 2;
  }
  RunResult r = run(scenarios, ro);
  reports::console_summary(stdout, r, ::isatty(STDOUT_FILENO) && !std::getenv("NO_COLOR"));
  std::string summary = r.out_dir + "/summary.json";
  if (!reports::write_summary(r, summary)) {
    std::fprintf(stderr, "shmstress: cannot write %s\n", summary.c_str());
    return 3;
  }
  std::printf("summary: %s (seed %llu)\n", summary.c_str(), static_cast<unsigned long long>(r.seed));
  if (r.trials.empty() && !r.interrupted) return 3;
  return r.exit_code();
}
