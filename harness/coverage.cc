#include "coverage.h"

#include <shmcoord/failpoint.h>

namespace harness {

std::string window_state(const std::string& point, const std::string& mode, const std::string& op) {
  return "window:" + point + ":" + mode + ":" + op;
}

namespace {

bool neighbour_kind(const Op& o) { return o.op == "acquire" || o.op == "clean" || o.op == "barrier"; }

// Another process's op of a cell's kind that overlaps [from, to]. An op never
// completed (info) counts from its invoke on.
void neighbours(const History& h, int job, int pid, std::int64_t from, std::int64_t to, const std::string& point,
                const char* mode, std::set<std::string>* reached) {
  for (const Op& o : h.ops) {
    if (!neighbour_kind(o) || (o.pid == pid && o.job == job)) continue;
    const std::int64_t end = o.outcome == Outcome::kInfo ? std::max(o.complete_t, to) : o.complete_t;
    if (o.invoke_t <= to && end >= from) reached->insert(window_state(point, mode, o.op));
  }
}

}  // namespace

void add_window_states(const History& h, std::set<std::string>* reached) {
  for (const Exit& e : h.exits) {
    if (e.crash_point.empty()) continue;
    neighbours(h, e.job, e.pid, e.t, e.t + kCrashWindowNs, e.crash_point, "crash", reached);
  }
  for (const Fault& f : h.faults) {
    // A sometimes-on pause is a pause at a point like any other: a neighbour
    // acting inside it reached the window.
    if ((f.kind != "pause-at-point" && f.kind != "sometimes") || !f.detail.is_object() || f.end_t <= f.start_t)
      continue;
    auto it = f.detail.find("point");
    if (it == f.detail.end() || !it->is_string()) continue;
    neighbours(h, f.job, f.pid, f.start_t, f.end_t, it->get<std::string>(), "pause", reached);
    // then = "kill": it died where it stopped, at end_t.
    if (f.detail.value("then", "") == "kill") {
      neighbours(h, f.job, f.pid, f.end_t, f.end_t + kCrashWindowNs, it->get<std::string>(), "crash", reached);
    }
  }
}

std::vector<CoverageRow> coverage_table(const std::map<std::string, std::uint64_t>& reached) {
  std::vector<CoverageRow> out;
  for (const auto& p : shmcoord::failpoint::points()) {
    CoverageRow row{std::string(p.name), p.kind == shmcoord::failpoint::Kind::kWindow, {}};
    for (const char* mode : kCoverageModes) {
      for (const char* op : kCoverageOps) {
        auto it = reached.find(window_state(row.point, mode, op));
        row.counts.push_back(it == reached.end() ? 0 : it->second);
      }
    }
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace harness
