// Trial dirs of passing trials, kept for the next trials instead of removed.
//
// Why: on a filesystem without a journal (ext4 as these machines mount it),
// allocating an inode soon after many were freed scans past every recently
// freed one (ext4's recently_deleted()), and a run frees a trial's dir, its
// workers' dirs and their two logs each every few milliseconds. In a no-op
// trial of 16 workers that allocation was over half the harness's own CPU
// (perf over bench/harness_bench's run). A spare keeps its worker dirs and
// their emptied logs, so the next trial opens the same inodes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <vector>

namespace harness {

class SpareDirs {
 public:
  // Spares live under `root` (made on first use), at most `cap` of them.
  SpareDirs(std::string root, std::size_t cap);
  ~SpareDirs();  // removes the root with every spare in it
  SpareDirs(const SpareDirs&) = delete;
  SpareDirs& operator=(const SpareDirs&) = delete;

  // Done with a trial's dir: it becomes a spare, or is removed. A spare holds
  // no file of the trial's but empty stdout.log and stderr.log in its worker
  // dirs, so it is never taken for a trial dir (no history.jsonl, no
  // scenario.toml) if the run dies before it is reused or removed.
  void give(const std::string& dir);

  // A spare renamed to `dir` (which must not exist; its parent must), with
  // only the worker dirs named in `labels` left in it, each holding at most
  // an empty stdout.log and stderr.log, owned by us, mode 0755, nothing
  // under it a symlink (as give() left it: spares are kept only where no
  // process of a trial outlives it to touch one). False if there is none:
  // make `dir` yourself.
  bool take(const std::string& dir, const std::set<std::string>& labels);

  std::size_t size() const { return spares_.size(); }

 private:
  std::string root_;
  std::size_t cap_;
  std::vector<std::string> spares_;
  std::uint64_t next_ = 0;
};

// Where a run's trials live while they run: a tmpfs of the run's own, mounted
// at `<out>/.trials` in a mount namespace of this process's (made once per
// process, every mount in it a slave of the host's), so no process outside
// the run sees it and nothing of it outlives the run: the kernel drops it
// with the namespace if the run dies. A trial dir moves to the out dir only
// when the run keeps it (move_trial_dir).
//
// Why: the same recently_deleted() scan as above, at every file a trial
// creates until spares exist - the whole of a run's first round, which is
// where a --stop-on-violation run finds most of what it finds. Trial dirs on
// the run's tmpfs took the median time to a first violation over
// tests/mutants from 1.12 to 0.95 s, paired (docs/mutants.md, issue 20 §4).
// A running trial is seen from outside the run only through the run's
// namespace: `nsenter -t RUN_PID -m`, or /proc/RUN_PID/root/<out>/.trials.
class TrialScratch {
 public:
  // Needs root (CAP_SYS_ADMIN) and an `<out>/.trials` that is absent or an
  // empty dir (a run killed before it removed its own): else nullptr, `why`
  // says why, and the run keeps its trials in the out dir as before. The
  // calling thread (and every process it forks) enters the namespace; a
  // later call from another thread gets nullptr, never a mount the host sees.
  static std::unique_ptr<TrialScratch> make(const std::string& out_dir, std::string* why);
  ~TrialScratch();  // unmounts and removes `<out>/.trials`
  TrialScratch(const TrialScratch&) = delete;
  TrialScratch& operator=(const TrialScratch&) = delete;

  const std::string& root() const { return root_; }

 private:
  explicit TrialScratch(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

// Moves the trial dir `from` to `to` (absent; its parent exists): a rename
// where both are on one filesystem, else a copy of its files, dirs and
// symlinks (a FIFO or a socket is left out) under a hidden name, renamed to
// `to`, then `from` removed. On failure `to` was never made and `from` stays.
std::error_code move_trial_dir(const std::string& from, const std::string& to);

}  // namespace harness
