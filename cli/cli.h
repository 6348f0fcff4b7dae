// The command line of build/shmstress: one file per subcommand, each adding
// itself to the CLI11 app and returning what runs it. Exit codes (DESIGN.md
// §8): 0 every invariant held, 1 a violation, 2 bad usage or scenario, 3 the
// harness failed, 4 inconclusive (unknown verdicts, expected states never
// reached, or interrupted before the end with no violation). `replay` answers
// "does it reproduce?" and has its own (docs/reports.md).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/files.h"
#include "harness/results.h"
#include "harness/run.h"
#include "harness/scenario.h"
#include "harness/stored.h"
#include "harness/summary.h"

namespace cli {

namespace fs = std::filesystem;

// A subcommand: its CLI11 app (parsed() says it was chosen) and how to run it
// once the command line is parsed. `argv0` spells the binary in reproduce commands.
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int(const char* argv0)> run;
};

Subcommand add_run(CLI::App& app);            // run.cc
Subcommand add_list(CLI::App& app);           // list.cc
Subcommand add_check(CLI::App& app);          // check.cc
Subcommand add_clean(CLI::App& app);          // clean.cc
Subcommand add_report(CLI::App& app);         // report.cc
Subcommand add_shrink(CLI::App& app);         // shrink.cc
Subcommand add_subject_check(CLI::App& app);  // subject_check.cc
Subcommand add_replay(CLI::App& app);         // replay.cc
Subcommand add_baseline(CLI::App& app);       // baseline.cc
Subcommand add_merge(CLI::App& app);          // merge.cc

// --- common.cc: what several subcommands share ----------------------------------
// This binary's path.
std::string self_exe();
// The worker binary a run execs when no --worker-bin is given: shmstress-worker
// beside this binary when it is this build's, else this binary
// (harness/worker_exe.h). Decided once; why a sibling was passed over is said
// once on stderr.
std::string default_worker_exe();
std::string canonical_or(const fs::path& p);
// Colours on stdout: a TTY and no NO_COLOR.
bool stdout_color();

// One stored trial dir's own copy of its scenario (named, and with the file,
// as the run that wrote it had it) and its schedule (seeds). nullopt, with
// *err naming the file and what is wrong in it, if either is bad.
struct StoredTrial {
  harness::Scenario scenario;
  harness::StoredSchedule schedule;
};
std::optional<StoredTrial> load_stored_trial(const fs::path& t, std::string* err);

// Re-checks one stored trial dir against its own copy of the scenario and its
// schedule (name, file, seeds). If the scenario or schedule.json is bad, *s
// stays empty and *err names the file and what is wrong in it.
harness::TrialResult recheck_trial(const fs::path& t, std::optional<harness::Scenario>* s,
                                   std::string* err);
// Trial dirs (history.jsonl + scenario.toml) under dir, or dir itself, sorted.
// Replays kept under a trial dir (<trial>/replays/) are not part of the run:
// `report` leaves them out, `check` re-checks them too (with_replays).
// Unreadable subdirectories are skipped.
std::vector<fs::path> find_trial_dirs(const std::string& dir, bool with_replays = false);

// The run's summary.json for a run, trial or scenario dir (it sits at the run
// dir's top): an empty summary if there is none, nullopt with *err if there is
// one that cannot be decoded. Reports use it for what trial dirs do not
// record: the reproduce commands (with --worker-bin), the subject, the run id.
std::optional<harness::StoredSummary> find_run_summary(const fs::path& dir, std::string* err);
// A run's whole summary.json (what `merge` adds up, what `list --coverage`
// counts), from a run dir or the file itself: nullopt with *err naming the
// file and what is wrong. *file: the summary.json it read.
std::optional<harness::RunResult> read_run_result(const std::string& dir_or_file, fs::path* file, std::string* err);
// What a stored trial's run was started with, read from its reproduce command
// in the run's summary.json (looked up by the trial dir as given); nullopt
// with *err if that summary.json cannot be decoded.
struct TrialRunFlags {
  std::optional<std::string> worker_bin;  // --worker-bin
  std::optional<std::string> subject;     // schedule.json's "subject", else --subject, else scenario.toml's
  bool no_mount_ns = false;               // --no-mount-ns
  bool allow_shared_shm = false;          // --allow-shared-shm
  bool no_sometimes = false;              // --no-sometimes
  bool exec_workers = false;              // --exec-workers
};

// Makes *o run `spec` (native, a name under subjects/, exec:CMD) as `run
// --subject spec` does: it wins over every scenario's own `subject`, and goes
// into o's reproduce flags. False with *why for an unknown subject.
bool use_subject(const std::string& spec, const std::vector<std::string>& search_from,
                 harness::RunOptions* o, std::string* why);
// One POSIX shell word (single-quoted when it needs to be).
std::string shell_word(const std::string& s);
std::optional<TrialRunFlags> trial_run_flags(const fs::path& trial_dir, std::string* err);
// Makes *o run trials as the stored run did where that changes what a trial
// is (its sometimes-on pauses, how its workers start), repeating the flags
// in o's reproduce command: `replay` and `shrink` both follow the original.
void follow_trial_run(const TrialRunFlags& original, harness::RunOptions* o);

// A stored trial dir may come from a bug report: what it says to run is code,
// and `replay`/`shrink` run it as root. Without --allow-stored-command, only
// what the user's own installation provides runs: the native subject, this
// binary as the worker, a named subject found in ./subjects (not next to the
// trial dir); a stored exec: command, another --worker-bin, or a named
// subject that is not the user's is refused. nullopt if `stored` may run;
// else the refusal (exit 2), naming the command and where it came from.
// `user_subject`/`user_worker_bin`: the user gave --subject / --worker-bin
// (then the stored one is not used).
std::optional<std::string> refuse_stored_command(const TrialRunFlags& stored, bool user_subject,
                                                 bool user_worker_bin, bool allowed);

// A strictly decimal integer flag in [lo, hi]: "-1", "1e3", "0x10", " 5" and
// "5.0" are refused with the range, before CLI11 converts anything.
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi);
// The same for a value in 1..2^64-1 (--seed).
CLI::Validator seed_value();

// Makes --out usable as a run directory before anything runs: creates it and
// writes a probe file. 0 if it is; else *why says why and the exit code is 2
// (a file, not a directory; under /proc or /sys) or 3 (it cannot be created
// or written: the environment).
int prepare_out_dir(const std::string& path, std::string* why);

// A run dir held by a live command: an exclusive flock on <dir>/.shmstress.lock
// (never truncated, never a symlink followed), released when the holder exits
// however it exits, and inherited by its trial supervisors. A second `run`
// (or a `merge --out`) on a dir a live run holds is refused with exit 2.
class RunDirLock {
 public:
  // nullopt with *why and *rc (2: held by a live run or not a file of ours; 3:
  // cannot be created) if the dir cannot be locked.
  static std::optional<RunDirLock> take(const std::string& dir, std::string* why, int* rc);
  RunDirLock(RunDirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RunDirLock& operator=(RunDirLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~RunDirLock();

 private:
  explicit RunDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Writes timeline.{json,html} into one kept trial dir; false (after a warning
// on stderr) if it cannot: its supervisor died before the history existed.
bool write_timeline(const harness::TrialResult& t, const harness::Scenario& s);
// Every report goes through harness::write_output (harness/files.h). True if
// `e` says it was written; else prints why (naming `what`) and, if *failed is
// still 0, sets it to the exit code the failure means (2 or 3): the first
// failure decides, and every other report is still written.
bool report_written(const std::optional<harness::OutputError>& e, const char* what, int* failed);
// --junit / --metrics-file and the like, before anything runs: what
// write_output would refuse whatever the moment (exit 2), e.g. a directory, a
// block device, a socket.
std::optional<harness::OutputError> check_user_outputs(const std::vector<std::string>& paths);
// --junit / --metrics-file of `run`, `report` and `merge` (named by the user:
// OutputOrigin::kUser): both are attempted; 0 if both were written, else the
// exit code of the first that was not (2 or 3).
int write_ci_reports(const harness::RunResult& r, int rc, const std::string& junit,
                     const std::string& metrics);

}  // namespace cli
