// How often a live output is refreshed while a run goes on: the progress
// line (200 ms on a TTY, 5 s otherwise) and the live files (summary.json,
// the metrics textfile), after a trial at most once per interval. A rewrite
// of a live file renders the whole run (every scenario's tally) on the run's
// one thread; after every trial of a catalog's first round that was dozens
// of rewrites a second, time the next trials waited for (issue 20 §4). The
// final write (the caller's, after the last trial) is never throttled, so
// what is on disk when the run exits is complete.
#pragma once

#include <chrono>
#include <optional>

namespace reports {

inline constexpr std::chrono::milliseconds kLiveRewriteEvery{1000};

class Throttle {
 public:
  explicit Throttle(std::chrono::steady_clock::duration every) : every_(every) {}
  // True for the first call and then once `every` has passed since the last true.
  bool due(std::chrono::steady_clock::time_point now) {
    if (last_ && now - *last_ < every_) return false;
    last_ = now;
    return true;
  }

 private:
  std::chrono::steady_clock::duration every_;
  std::optional<std::chrono::steady_clock::time_point> last_;
};

}  // namespace reports
