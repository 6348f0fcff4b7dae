// Report formats: each a pure function of a run (harness::RunResult: the
// aggregate of a finished or in-progress run, see harness/results.h) or of one
// trial, and the subscribers that keep some of them live while a run goes on
// (harness/run_events.h). Reports never decide a verdict: they render the
// one the harness computed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <memory>
#include <nlohmann/json.hpp>

#include "harness/files.h"
#include "harness/history.h"
#include "harness/results.h"
#include "harness/run_events.h"
#include "harness/stored.h"

namespace reports {

// summary.json (DESIGN.md §6-7).
nlohmann::json summary_json(const harness::RunResult& r);
// Writes summary.json (harness::write_output: a derived path, replaced
// atomically). nullopt once written.
std::optional<harness::OutputError> write_summary(
    const harness::RunResult& r, const std::string& path,
    harness::Durability d = harness::Durability::kSynced);
// Subscriber: rewrites the run dir's summary.json after every trial (a
// --duration soak), so a soak killed by SIGKILL still leaves one. Unsynced
// (the final write is synced): an fsync on the run loop's one thread took
// up to 120 ms, and every trial waits on that thread to start.
std::shared_ptr<harness::RunSubscriber> live_summary();
// One bucket as summary.json lists it (docs/reports.md, "Triage").
nlohmann::json bucket_json(const harness::Bucket& b);
// The run's buckets as every report lists them: new ones first, then by
// trials (most first), then by fingerprint.
std::vector<const harness::Bucket*> buckets_in_order(const harness::RunResult& r);

// Per scenario: trials, and per invariant how many trials failed it and the
// worst verdict. Shared by the console table and report.html (console.cc).
struct InvariantCell {
  std::uint64_t failing = 0;
  harness::Verdict worst = harness::Verdict::kValid;
  std::string excused;  // the scenario's reason: its verdict is shown, counts for nothing
};
struct ScenarioRow {
  std::uint64_t trials = 0;
  std::map<std::string, InvariantCell> invariants;
};
// "excused", or the verdict's name.
std::string cell_label(const InvariantCell& c);
// One line per scenario with expect_violation: "caught in 3 of 4 trials
// (barrier.liveness with error:barrier:broken)" or "NOT caught: ...".
std::string expectation_line(const harness::ScenarioTally& s);
std::map<std::string, ScenarioRow> scenario_table(const harness::RunResult& r);

// report.html: the whole run on one self-contained page (report_html.cc).
std::string report_html(const harness::RunResult& r);
std::optional<harness::OutputError> write_report_html(const harness::RunResult& r, const std::string& path);

// Console: a live progress line (TTY) or periodic plain lines, and the final summary.
using Progress = harness::Progress;
void console_progress(std::FILE* out, const Progress& p, bool tty, bool color);
// The verdict first, then only what is not valid (buckets with their
// reproduce commands, unknown checks with why, errors, excuses, unmet
// expectations, states never reached); `verbose` adds one line per scenario.
void console_summary(std::FILE* out, const harness::RunResult& r, bool color, bool verbose = false);
// The buckets part of console_summary: each with its count, trial range,
// example problem and reproduce command; known buckets that did not recur.
void console_buckets(std::FILE* out, const harness::RunResult& r, bool color);
// Subscriber: the progress line, at most every 200 ms on a TTY (else a plain
// line every 5 s), always the final one, then a line break on a TTY.
std::shared_ptr<harness::RunSubscriber> progress_line(std::FILE* out, bool tty, bool color);

// --- junit.cc: JUnit XML (docs/reports.md) ------------------------------------
// One <testsuite> per scenario, one <testcase> per (scenario, invariant):
// invalid -> <failure>, unknown -> <skipped> (inconclusive), a harness error in
// a scenario's trials -> an extra testcase "harness" with <error>, and a
// testcase "expect_reached" for scenarios that name states they must reach.
// Valid for tests/junit/junit.xsd (a subset of Jenkins' junit-10.xsd).
std::string junit_xml(const harness::RunResult& r);
// Text as XML character data (attribute = false) or an attribute value
// (attribute = true: also quotes and line breaks as character references).
// Characters XML 1.0 forbids and invalid UTF-8 become U+FFFD, so the output
// parses whatever bytes a worker wrote into an error message.
std::string xml_escape(std::string_view s, bool attribute);

// --- prometheus.cc: textfile for node_exporter (docs/reports.md) -------------
struct MetricsOptions {
  double now_s = 0;  // Unix time of the write: shmstress_last_run_timestamp_seconds
  // The run's exit code: shmstress_last_success_timestamp_seconds = now_s only if 0.
  int exit_code = 0;
  // A live write during a soak: no exit code yet, and neither timestamp moves.
  bool in_progress = false;
  // What the file being replaced said. A run that has not finished (or not
  // succeeded) repeats them, so the series keep meaning "when did a run last
  // finish / succeed" instead of vanishing.
  std::optional<double> previous_run, previous_success;
  // From the RunResult, when there is one (metrics_families(RunResult, ...)
  // fills them): how far along the run is (0..1), trials at once, and the
  // baseline's known buckets that did not recur (only with a baseline).
  std::optional<double> progress;
  int concurrency = 0;
  std::optional<std::size_t> not_recurred;
};

// The one model every Prometheus output renders: the textfile (metrics_text),
// the live /metrics endpoint and the Pushgateway push (reports/live.h), so all
// three carry the same names, labels and buckets.
struct MetricSample {
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;                    // counter, gauge
  std::vector<std::uint64_t> buckets;  // histogram: cumulative counts, one per latency_buckets_s()
  std::uint64_t count = 0;             // histogram: observations (the +Inf bucket)
  double sum = 0;                      // histogram: their sum
};
struct MetricFamily {
  std::string name;  // in full: "shmstress_trials_total"
  std::string type;  // "counter", "gauge" or "histogram"
  std::string help;
  std::vector<MetricSample> samples;
};
// What the counters and histograms count: the run's own tally (counters per
// scenario, invariant, fault and state; latencies in latency_buckets_s()
// classes), bounded however long the run.
using MetricsTally = harness::RunTally;
// Every family, in the textfile's order. `subject` and `elapsed_s` are the run's.
std::vector<MetricFamily> metrics_families(const MetricsTally& tally, const std::string& subject,
                                           double elapsed_s, const MetricsOptions& o);
std::vector<MetricFamily> metrics_families(const harness::RunResult& r, const MetricsOptions& o);
// Text exposition format 0.0.4 of the families (the textfile, the push body).
std::string metrics_text(const std::vector<MetricFamily>& families);
std::string metrics_text(const harness::RunResult& r, const MetricsOptions& o);
// Histogram buckets (seconds) of the latency and recovery histograms.
const std::vector<double>& latency_buckets_s();
// The value of `name{subject="..."}` in an existing textfile, if it has one.
std::optional<double> read_metric(const std::string& path, const std::string& name,
                                  const std::string& subject);
// The end of a run: metrics_text with now = the wall clock, carrying the
// previous timestamps over from `path` (named by the user: written with
// harness::write_output, OutputOrigin::kUser). nullopt once written.
std::optional<harness::OutputError> write_metrics(const harness::RunResult& r, const std::string& path,
                                                  int exit_code);
// The same while the run goes on (shmstress_run_in_progress 1): safe to call
// after every trial of a soak, as summary.json is. Synced, unlike the live
// summary.json: this file alone carries the last success's timestamp from
// one run to the next, and an unsynced replacement could leave it empty after
// a power loss.
std::optional<harness::OutputError> write_metrics_live(const harness::RunResult& r, const std::string& path);
// Subscriber: write_metrics_live after every trial (a --duration soak).
std::shared_ptr<harness::RunSubscriber> live_metrics_file(const std::string& path);

// --- timeline.cc: Chrome trace event JSON of one trial (docs/reports.md) -----
// One thread per (job, rank), a "faults" track, ops as "X" events. Ops of a
// worker that a problem line names are args.involved; the op the line is about
// (described, or both its times cited) is args.violation with cname
// "terrible", other ops whose times it cites are args.cited.
nlohmann::json timeline_trace(const harness::History& h, const harness::TrialResult& t);
// --- timeline_html.cc: the same trace as a self-contained page -----------------
// Inline CSS and JS only (no network): one lane per rank, faults shaded, the
// violating spans outlined, tooltips on hover.
std::string timeline_html(const nlohmann::json& trace);
// Reads <t.dir>/history.jsonl, writes <t.dir>/timeline.json and timeline.html.
bool write_timeline(const harness::TrialResult& t, const harness::TrialMeta& meta,
                    std::string* err);

// --- replay.cc: `shmstress replay` tally ---------------------------------------
struct ReplayTally {
  std::vector<std::string> targets;    // invariants that failed originally (verdict.json)
  std::map<std::string, int> failed;   // invariant -> replays in which it was invalid
  std::map<std::string, int> unknown;  // invariant -> replays in which it was unknown
  int replays = 0;                     // replays that finished
  int harness_errors = 0;              // ... of which the harness failed
  bool reproduced() const;             // some target failed again at least once
};
// The invariants a trial's verdict.json says were invalid; if none, the unknown ones.
std::vector<std::string> replay_targets(const harness::StoredVerdict& verdict);
// Adds one replay's result (a RunResult of one trial; more count as more replays).
void add_replay(ReplayTally* tally, const harness::RunResult& replay);
// "  prefix.unique: 7/10" lines, targets first, then other invariants that failed.
std::string replay_text(const ReplayTally& tally);
// The value of `flag` (e.g. "--worker-bin") in a reproduce command as run.cc
// quotes it (POSIX single quotes), if present.
std::optional<std::string> command_flag(const std::string& command, const std::string& flag);

}  // namespace reports
