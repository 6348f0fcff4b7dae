// Window coverage (issue 20 §2): which multi-step windows of shmcoord a run
// reached with a neighbour acting inside them. A cell is a failpoint, how the
// process stopped there (crash: it died at the point; pause: it stopped there
// and was resumed) and what another process did meanwhile (an acquire, a
// cleanup, a barrier round). A trial that reached a cell carries the state
// "window:<point>:<crash|pause>:<acquire|clean|barrier>", counted in the run's
// summary like every reached state; `shmstress list --coverage` prints the
// table of all cells from one or more summaries.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "history.h"

namespace harness {

// The neighbour kinds and stop modes of a cell, in table order.
inline constexpr const char* kCoverageModes[] = {"crash", "pause"};
inline constexpr const char* kCoverageOps[] = {"acquire", "clean", "barrier"};

// How long after a crash a neighbour's op still acts inside the window the
// dead process left half done (nobody repairs a window sooner than the next
// operation that meets it).
inline constexpr std::int64_t kCrashWindowNs = 1'000'000'000;

std::string window_state(const std::string& point, const std::string& mode, const std::string& op);

// Adds the trial's window states to `reached`.
void add_window_states(const History& h, std::set<std::string>* reached);

struct CoverageRow {
  std::string point;
  bool window = false;                 // a window point (else a syscall point)
  std::vector<std::uint64_t> counts;   // modes x ops, kCoverageModes-major
};

// Every failpoint of shmcoord with the trials that reached each of its cells.
std::vector<CoverageRow> coverage_table(const std::map<std::string, std::uint64_t>& reached);

}  // namespace harness
