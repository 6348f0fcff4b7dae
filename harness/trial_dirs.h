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
#include <set>
#include <string>
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

}  // namespace harness
